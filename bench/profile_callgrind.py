#!/usr/bin/env python3
"""Where does a command's server time go? Instruction counts under callgrind.

Starts redis-server with the module under `valgrind --tool=callgrind`
(through the project's harness: free loopback port, stopped on exit),
collecting only inside `processCommand` (command lookup, ACL, the command
itself, propagation; not socket I/O or RESP parsing). Each phase (one
contestant, a fixed number of requests on keys of a fixed shape) is dumped to
its own callgrind file; the summary gives instructions per request, and
`callgrind_annotate --inclusive=yes` of the module phases shows where the
module's instructions go.

Instruction counts are deterministic, so unlike the timing bench they do not
move with other load on the machine; they are not time (cache misses and
branch mispredictions cost nothing here).

Usage: profile_callgrind.py [--out DIR] [--calls N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench as B  # noqa: E402  (the timing bench: RESP helpers, scripts, harness)

RULES = B.RULES


def callgrind_control(*args) -> str:
    r = subprocess.run(["callgrind_control", *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"callgrind_control {' '.join(args)}: {r.stderr or r.stdout}")
    return r.stdout


def total_ir(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench-out/profile", help="output directory (default bench-out/profile/)")
    ap.add_argument("--calls", type=int, default=4000, help="requests per phase (default 4000)")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("callgrind.out.*"):
        old.unlink()
    if not shutil.which("valgrind"):
        print("valgrind not found (apt-get install valgrind)", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="rl-prof-"))
    wrapper = tmp / "redis-under-callgrind"
    real = shutil.which("redis-server") or "/usr/bin/redis-server"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec valgrind --tool=callgrind --collect-atstart=no --toggle-collect=processCommand "
        f"--callgrind-out-file={out}/callgrind.out.%p '{real}' \"$@\"\n")
    wrapper.chmod(0o755)

    n = args.calls
    keys = 200
    entries = 40
    period = B.MAX_WINDOW // entries
    step = period // keys
    results = {}
    server = B.Server(module=True, binary=str(wrapper))
    # valgrind needs more than the harness's 10 s on a slow start: retry once
    try:
        server.start()
    except RuntimeError:
        server = B.Server(module=True, binary=str(wrapper))
        server.start()
    try:
        pid = str(server.proc.pid)
        import redis
        ctl = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=600)
        conn = B.Conn(server.port)
        sha = {name: ctl.script_load((B.LUA_DIR / f"{name}.lua").read_text())
               for name in ("check_uuid", "dayhour", "lockcount", "gcra")}
        base = int(ctl.time()[0]) * 1000

        def send(cmds, per=1):
            for part in B.chunks(cmds, 100):
                buf = conn.roundtrip(b"".join(part))
                for r in B.parse_all(buf, sum(per for _ in part)):
                    if B.find_error(r) is not None:
                        raise B.BenchError(str(B.find_error(r)))

        # prefill: 200 keys x 40 entries per contestant (the bench's steady state)
        pre = []
        for k in range(keys):
            first = base + (k + 1) * step
            scores = [first - j * period for j in range(entries, 0, -1)]
            for s in scores:
                pre.append(B.enc("RL.CHECK", f"mod:{k}", s, *B.flat_rules(RULES)))
            for prefix in ("lua:", "nat:"):
                a = []
                for s in scores:
                    a += [s, str(uuid.uuid4())]
                pre.append(B.enc("ZADD", prefix + str(k), *a))
            # RL.CHECK with RL.THROTTLE's one rule: the same shape, module-like names
            a = []
            for j, s in enumerate(scores):
                a += [s, "q%07d" % j]
            pre.append(B.enc("ZADD", f"thck:{k}", *a))
        # scale keys: 10, 100, 1000, 100000 members
        scale = {}
        for size in (10, 100, 1000, 100000):
            p = B.MAX_WINDOW / size
            now0 = base
            sc = [now0 - int(j * p) for j in range(size - 1, -1, -1)]
            for part in B.chunks(list(enumerate(sc)), 5000):
                a = []
                for j, s in part:
                    a += [s, "p%07d" % j]
                pre.append(B.enc("ZADD", f"sc:{size}", *a))
            scale[size] = (sc[-1], p)
        send(pre)

        def phase(name, cmds, per=1, requests=None):
            callgrind_control("-z", pid)
            t0 = time.time()
            send(cmds, per)
            callgrind_control("-d", name, pid)
            time.sleep(0.5)
            dumps = sorted(out.glob(f"callgrind.out.{pid}.*"), key=lambda p: p.stat().st_mtime)
            dump = dumps[-1]
            target = out / f"callgrind.out.{name}"
            dump.rename(target)
            ir = total_ir(target)
            reqs = requests or len(cmds)
            results[name] = {"requests": reqs, "Ir": ir, "Ir_per_request": ir / reqs,
                             "seconds_under_valgrind": time.time() - t0, "file": str(target)}
            print(f"{name:28s} {ir / reqs:10,.0f} Ir/request", flush=True)

        def check_cmds(kind, start=0, count=n):
            cmds = []
            for i in range(start, start + count):
                k = i % keys
                now = base + (i + 1) * step
                if kind == "module":
                    cmds.append(B.enc("RL.CHECK", f"mod:{k}", now, *B.flat_rules(RULES)))
                elif kind == "lua":
                    cmds.append(B.enc("EVALSHA", sha["check_uuid"], 1, f"lua:{k}", str(uuid.uuid4()), now,
                                      *B.flat_rules(RULES)))
                else:
                    key = f"nat:{k}"
                    cmds.append(b"".join([B.enc("ZCOUNT", key, now - w, now) for _, w in RULES]
                                         + [B.enc("ZADD", key, now, str(uuid.uuid4())),
                                            B.enc("PEXPIRE", key, B.MAX_WINDOW),
                                            B.enc("ZREMRANGEBYSCORE", key, 0, now - B.MAX_WINDOW)]))
            return cmds

        # warm-up (allocations, script cache), not collected
        warm = keys  # one visit per key; the phases continue the clock from there
        send(check_cmds("module", 0, warm))
        send(check_cmds("lua", 0, warm))
        send(check_cmds("native", 0, warm), per=len(RULES) + 3)
        phase("check-module", check_cmds("module", warm))
        phase("check-lua-uuid", check_cmds("lua", warm))
        phase("check-native", check_cmds("native", warm), per=len(RULES) + 3, requests=n)

        # RL.THROTTLE steady state (the bench's: one rule, a full bucket at every
        # visit), the same GCRA in Lua, and RL.CHECK with one rule on the same
        # schedule (keys of 40 members, 1 trimmed + 1 added a call)
        def throttle_cmds(kind, start, count):
            cmds = []
            for i in range(start, start + count):
                k = i % keys
                now = base + (i + 1) * step
                if kind == "module":
                    cmds.append(B.enc("RL.THROTTLE", f"th:{k}", now, *B.TH_RULE))
                elif kind == "lua":
                    cmds.append(B.enc("EVALSHA", sha["gcra"], 1, f"thl:{k}", now, *B.TH_RULE))
                else:
                    cmds.append(B.enc("RL.CHECK", f"thck:{k}", now, *B.TH_CHECK_RULE))
            return cmds

        for kind in ("module", "lua", "check"):
            send(throttle_cmds(kind, 0, warm))
        phase("throttle-module", throttle_cmds("module", warm, n))
        phase("throttle-lua", throttle_cmds("lua", warm, n))
        phase("throttle-check-1rule", throttle_cmds("check", warm, n))
        for size, (last, p) in scale.items():
            cmds = []
            rules = B.flat_rules([(2 * size + 10, RULES[0][1]), (2 * size + 10, RULES[1][1])])
            for i in range(min(n, 2000)):
                last += p
                cmds.append(B.enc("RL.CHECK", f"sc:{size}", int(last), *rules))
            phase(f"scale-{size}-admitted", cmds)
        # DAYHOUR / LOCKCOUNT: 100 pairs x 25 visits; DAYHOUR's keys and TTLs as
        # the bench computes them (the date and hour in QUOTA_ZONE)
        for kind in ("module", "lua"):
            zb = B.zone_buckets(int(time.time() * 1000))
            dttl, httl = zb["day_end"] - zb["now"], zb["hour_end"] - zb["now"]
            cmds = []
            for v in range(25):
                for k in range(100):
                    d, h = f"dh:{kind}:{k}:{zb['day']}", f"dh:{kind}:{k}:{zb['hour']}"
                    if kind == "module":
                        cmds.append(B.enc("RL.DAYHOUR", d, h, B.DAY_LIMIT, B.HOUR_LIMIT, dttl, httl))
                    else:
                        cmds.append(B.enc("EVALSHA", sha["dayhour"], 2, d, h, B.DAY_LIMIT, B.HOUR_LIMIT,
                                          dttl, httl))
            phase(f"dayhour-{kind}", cmds)
        # RL.QUOTA on the same schedule: one hash per pair, the server's clock
        # and zone (a phase that straddles an hour boundary finds fresh buckets)
        cmds = []
        for v in range(25):
            for k in range(100):
                cmds.append(B.enc("RL.QUOTA", f"qt:{k}", "*", B.QUOTA_ZONE, "DAY", B.DAY_LIMIT, "HOUR",
                                  B.HOUR_LIMIT))
        phase("quota-module", cmds)
        for kind in ("module", "lua"):
            cmds = []
            for v in range(25):
                for k in range(100):
                    lk, ck = f"lc:{kind}:{k}:l", f"lc:{kind}:{k}:c"
                    if kind == "module":
                        cmds.append(B.enc("RL.LOCKCOUNT", lk, ck, B.LC_WINDOW, B.LC_MAX, B.LC_LOCKTIME))
                    else:
                        cmds.append(B.enc("EVALSHA", sha["lockcount"], 2, lk, ck, B.LC_WINDOW, B.LC_MAX,
                                          B.LC_LOCKTIME))
            phase(f"lockcount-{kind}", cmds)
        conn.close()
        ctl.close()
    finally:
        server.stop()

    for name in ("check-module", "scale-100-admitted", "dayhour-module", "lockcount-module", "throttle-module",
                 "throttle-lua", "quota-module"):
        f = out / f"callgrind.out.{name}"
        if f.exists():
            ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=99.5", str(f)],
                                 capture_output=True, text=True, timeout=300).stdout
            (out / f"annotate-{name}.txt").write_text(ann)
    ratios = {}
    for label, num, den in (("RL.THROTTLE / its Lua (target 0.25)", "throttle-module", "throttle-lua"),
                            ("RL.THROTTLE / RL.CHECK 1 rule, same schedule (target 0.5)", "throttle-module",
                             "throttle-check-1rule"),
                            ("RL.THROTTLE / RL.CHECK 2 rules (the check workload)", "throttle-module", "check-module"),
                            ("RL.QUOTA / RL.DAYHOUR (target 1.5)", "quota-module", "dayhour-module"),
                            ("RL.QUOTA / Lua seed 001", "quota-module", "dayhour-lua")):
        if num in results and den in results:
            ratios[label] = results[num]["Ir_per_request"] / results[den]["Ir_per_request"]
            print(f"{label}: {ratios[label]:.3f} (instructions per request)")
    results["ratios"] = ratios
    (out / "profile.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out}/profile.json, callgrind.out.* and annotate-*.txt")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
