#!/usr/bin/env python3
"""RL.LEASE + RL.RELEASE against the Lua semaphore + ZREM, on its own: the
lease rounds of bench.py (keys holding 10, 100 and 1,000 leases; a request
takes one more lease and gives it back; the contestants interleaved round by
round; server time from commandstats usec), with no replica and then with a
replica attached (with the module loaded, as in bench-profile's replica
setting) — the primary's time, which includes feeding the replica.

Prints, per setting, usec per pair and the ratios with their per-round
spread: module / Lua at each size (target 0.8, issue 22) and the module at
1,000 held / at 10 (target 1.5). `make bench` runs it after bench.py (whose
lease section is the no-replica half of this).

Usage: lease_pair.py [--setting none|replica|none,replica] [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench as B  # noqa: E402  (the timing bench: its lease rounds, harness, summaries)

TARGET_VS_LUA = 0.8
TARGET_FLAT = 1.5


def run(setting: str, rounds: int, calls: int) -> tuple[dict, list]:
    """The lease rounds in `setting`; the summary per contestant and the batches."""
    cfg = dataclasses.replace(B.FULL, rounds=rounds, lease_calls=calls)
    with B.Server(module=True) as server:
        replica = None
        try:
            if setting == "replica":
                replica = B.Server(module=True, args=["--replicaof", "127.0.0.1", str(server.port)]).start()
                rc = replica.client()
                deadline = time.time() + 60
                while rc.info("replication").get("master_link_status") != "up":
                    if time.time() > deadline:
                        raise RuntimeError("the replica did not sync")
                    time.sleep(0.1)
            bench = B.Bench(cfg, server)
            bench.base = int(bench.ctl.time()[0]) * 1000  # as check_setup sets it (the held leases' clock)
            bench.lease_setup()
            for rnd in range(cfg.rounds + 1):
                bench.lease_round(rnd, rnd > 0)
            for c in bench.conns:
                c.close()
            bench.ctl.close()
            if bench.errors:
                raise B.BenchError("; ".join(bench.errors))
            if replica is not None:
                # the replica applied what the primary sent: same leases held
                rc = replica.client()
                offset = server.client().info("replication")["master_repl_offset"]
                deadline = time.time() + 30
                while rc.info("replication").get("slave_repl_offset", -1) < offset and time.time() < deadline:
                    time.sleep(0.1)
                for size in cfg.lease_sizes:
                    for c in ("module", "lua"):
                        key = bench.lease_key(c, size, 0)
                        if rc.zcard(key) != size:
                            raise B.BenchError(f"replica: {key} holds {rc.zcard(key)} members, expected {size}")
            return B.summarize(bench.batches["lease"]), bench.batches["lease"]
        finally:
            if replica is not None:
                replica.stop()


def report(setting: str, summary: dict, batches: list, sizes: list[int]) -> list[str]:
    lines = [f"RL.LEASE + RL.RELEASE vs Lua semaphore + ZREM, {setting} (commandstats usec per pair, "
             f"median over rounds):"]
    for size in sizes:
        m, lua = summary[f"{size}:module"], summary[f"{size}:lua"]
        ratio = m["usec_per_request"] / lua["usec_per_request"]
        spread = B.fmt_ratio_spread(B.round_ratios(batches, f"{size}:module", f"{size}:lua"))
        lines.append(f"  {'met' if ratio <= TARGET_VS_LUA else 'NOT met'}  {size:>5,} held: module "
                     f"{m['usec_per_request']:.2f} / Lua {lua['usec_per_request']:.2f} = {ratio:.3f} "
                     f"(target {TARGET_VS_LUA}; {spread})")
    lo, hi = min(sizes), max(sizes)
    flat = summary[f"{hi}:module"]["usec_per_request"] / summary[f"{lo}:module"]["usec_per_request"]
    lines.append(f"  {'met' if flat <= TARGET_FLAT else 'NOT met'}  module {hi:,} held / {lo} held = {flat:.3f} "
                 f"(target {TARGET_FLAT}; "
                 f"{B.fmt_ratio_spread(B.round_ratios(batches, f'{hi}:module', f'{lo}:module'))})")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setting", default="none,replica", help="none, replica or both (default none,replica)")
    ap.add_argument("--rounds", type=int, default=20, help="measured rounds per setting (default 20)")
    ap.add_argument("--calls", type=int, default=2000, help="pairs per contestant, size and round (default 2000)")
    args = ap.parse_args(argv)
    settings = args.setting.split(",")
    if any(s not in ("none", "replica") for s in settings):
        ap.error(f"--setting: {args.setting!r}: expected none, replica or none,replica")
    out = []
    for setting in settings:
        t0 = time.time()
        summary, batches = run(setting, args.rounds, args.calls)
        out += report("no replica" if setting == "none" else "one replica attached", summary, batches,
                      B.FULL.lease_sizes)
        print(f"({setting}: {time.time() - t0:.0f} s)", flush=True)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
