#!/usr/bin/env python3
"""One hot key: RL.THROTTLE against redis-cell's CL.THROTTLE in one server.

Both modules are loaded into one redis-server (the harness's: free loopback
port, stopped on exit); `redis-benchmark -P 16` sends one command to one key,
admitted every time (a bucket far deeper than the run), in interleaved rounds
(cell, module, cell, module, ...), so load on a shared machine hits both
alike. Prints ops/s per round, the medians and their ratio (target: RL.THROTTLE
at least CL.THROTTLE's throughput), and checks every call was admitted.

redis-cell 0.2.2 is built by scripts/build_redis_cell.sh into target/ (a
dylib: the server runs with the toolchain's libstd on LD_LIBRARY_PATH).

Usage: hot_key.py [--rounds N] [--requests N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "integration"))
from servers import Server  # noqa: E402  (the project's harness)

# A bucket of 10^9 refilled 10^9 a second: never refuses within a run.
COMMANDS = {
    "CL.THROTTLE": ["CL.THROTTLE", "hot:cell", "999999999", "1000000000", "1", "1"],
    "RL.THROTTLE": ["RL.THROTTLE", "hot:rl", "*", "1000000000", "1000000000", "1000"],
}


def rps(port: int, command: list[str], requests: int) -> float:
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-P", "16", "-c", "4", "-n", str(requests), "-q",
                          *command], capture_output=True, text=True, timeout=600).stdout
    m = re.search(r"([\d.]+) requests per second", out.replace("\r", "\n"))
    if not m:
        raise RuntimeError(f"redis-benchmark said: {out[-300:]}")
    return float(m.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--requests", type=int, default=200_000)
    args = ap.parse_args(argv)
    built = subprocess.run([str(ROOT / "scripts" / "build_redis_cell.sh")], capture_output=True, text=True)
    if built.returncode != 0:
        print(f"redis-cell could not be built: {built.stderr[-400:]}", file=sys.stderr)
        return 1
    libstd = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True).stdout.strip() + "/lib"
    os.environ["LD_LIBRARY_PATH"] = libstd  # the server inherits it
    with Server(module=True, args=["--loadmodule", built.stdout.strip()]) as server:
        c = server.client()
        got = {name: [] for name in COMMANDS}
        for _ in range(args.rounds):
            for name, command in COMMANDS.items():
                got[name].append(rps(server.port, command, args.requests))
        # Every call admitted: redis-cell's bucket and ours are untouched by refusals.
        cell = c.execute_command(*COMMANDS["CL.THROTTLE"])
        rl = c.execute_command(*COMMANDS["RL.THROTTLE"])
        admitted = cell[0] == 0 and rl[0] == 0
        rejected = int(c.info("ratelimit").get("ratelimit_throttle_rejected", 0))
    for name, xs in got.items():
        print(f"{name:12s} ops/s per round: {' '.join(f'{x:,.0f}' for x in xs)}; median {statistics.median(xs):,.0f}")
    ratio = statistics.median(got["RL.THROTTLE"]) / statistics.median(got["CL.THROTTLE"])
    print(f"RL.THROTTLE / CL.THROTTLE ops/s, one hot key, -P 16 (target >= 1.00): {ratio:.3f}")
    if not admitted or rejected:
        print(f"NOT every call was admitted (rejected by RL.THROTTLE: {rejected})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
