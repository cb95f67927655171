#!/usr/bin/env python3
"""The Functions library's cost, side by side with the seed Lua scripts and
the module (SPEC.md, "The Functions library": CHECK, LEASE and ALL never
above the seed scripts for the same decision; THROTTLE within 1.5x the float
GCRA script; the module at most half the library's).

One redis-server with the module loaded, the library loaded
(functions/ratelimit.lua) and the seed scripts (bench/lua/) cached.
Contestants run interleaved: each round runs one batch of every contestant
of every scenario in a rotating order, each on its own keys.

Cost of a request = the server time of the whole request (every command it
sends: RL.LEASE and RL.RELEASE; the three scripts of a three-limit check),
from INFO commandstats after CONFIG RESETSTAT, per request; the table also
gives the client's wall time per request (pipelined, one connection).
Ratios are medians over rounds of the per-round ratios.

Scenarios (explicit `now`, a day ahead of the server clock, advancing per
call so every window is in its steady state):
  CHECK listpack / skiplist: one rule over ~40 / ~150 members in the window
    (the key's encoding is checked); seed: check_uuid.lua.
  THROTTLE: one rule, always admitted; seed: gcra.lua (floats, us).
  LEASE+RELEASE: a lease taken and given back on a key holding 10 long
    leases; seed: semaphore.lua then ZREM.
  ALL (3 clauses): CHECK + THROTTLE + QUOTA (UTC day) in one call; seed: the
    three seed scripts (check_uuid.lua, gcra.lua, dayhour.lua) pipelined.

Usage: functions_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "integration"))
from servers import Server  # noqa: E402

LUA = Path(__file__).resolve().parent / "lua"
LIBRARY = ROOT / "functions" / "ratelimit.lua"
STEP = 10  # ms of virtual time between two calls on one key


class Contestant:
    def __init__(self, name, counted, request, keys=4):
        self.name = name
        self.counted = counted  # commandstats names whose usec is the cost
        self.request = request  # (key index, call number) -> list of commands
        self.keys = keys
        self.calls = [0] * keys


def scenarios(shas, t0, quick):
    def check(window, members):
        def module(k, i):
            return [("RL.CHECK", f"{{c{window}m{k}}}", t0 + i * STEP, 1_000_000, window)]

        def library(k, i):
            return [("FCALL", "rl_check", 1, f"{{c{window}l{k}}}", t0 + i * STEP, 1_000_000, window)]

        def seed(k, i):
            return [("EVALSHA", shas["check_uuid"], 1, f"{{c{window}s{k}}}", f"m{k}-{i}", t0 + i * STEP,
                     1_000_000, window)]
        return [Contestant("module", ["rl.check"], module), Contestant("library", ["fcall"], library),
                Contestant("seed", ["evalsha"], seed)]

    def throttle():
        def module(k, i):
            return [("RL.THROTTLE", f"{{tm{k}}}", t0 + i, 100, 1000, 1000)]

        def library(k, i):
            return [("FCALL", "rl_throttle", 1, f"{{tl{k}}}", t0 + i, 100, 1000, 1000)]

        def seed(k, i):
            return [("EVALSHA", shas["gcra"], 1, f"{{ts{k}}}", t0 + i, 100, 1000, 1000)]
        return [Contestant("module", ["rl.throttle"], module), Contestant("library", ["fcall"], library),
                Contestant("seed", ["evalsha"], seed)]

    def lease():
        def module(k, i):
            key, t = f"{{lm{k}}}", t0 + i
            return [("RL.LEASE", key, t, 100, 60000, "TOKEN", f"r{i}"), ("RL.RELEASE", key, t, f"r{i}")]

        def library(k, i):
            key, t = f"{{ll{k}}}", t0 + i
            return [("FCALL", "rl_lease", 1, key, t, 100, 60000, "TOKEN", f"r{i}"),
                    ("FCALL", "rl_release", 1, key, t, f"r{i}")]

        def seed(k, i):
            key, t = f"{{ls{k}}}", t0 + i
            return [("EVALSHA", shas["semaphore"], 1, key, f"r{i}", t, 100, 60000), ("ZREM", key, f"r{i}")]
        return [Contestant("module", ["rl.lease", "rl.release"], module),
                Contestant("library", ["fcall"], library),
                Contestant("seed", ["evalsha", "zrem"], seed)]

    def all3():
        w = 40 * STEP

        def module(k, i):
            t = t0 + i * STEP
            return [("RL.ALL", 3, f"{{am{k}}}c", f"{{am{k}}}t", f"{{am{k}}}q", t, "CHECK", 1, 1_000_000, w,
                     "THROTTLE", 2, 100, 1000, 1000, "QUOTA", 3, "UTC", "DAY", 1_000_000_000)]

        def library(k, i):
            t = t0 + i * STEP
            return [("FCALL", "rl_all", 3, f"{{al{k}}}c", f"{{al{k}}}t", f"{{al{k}}}q", t, "CHECK", 1, 1_000_000,
                     w, "THROTTLE", 2, 100, 1000, 1000, "QUOTA", 3, "UTC", "DAY", 1_000_000_000)]

        def seed(k, i):
            t = t0 + i * STEP
            return [("EVALSHA", shas["check_uuid"], 1, f"{{as{k}}}c", f"m{k}-{i}", t, 1_000_000, w),
                    ("EVALSHA", shas["gcra"], 1, f"{{as{k}}}t", t, 100, 1000, 1000),
                    ("EVALSHA", shas["dayhour"], 2, f"{{as{k}}}d", f"{{as{k}}}h", 1_000_000_000, 1_000_000_000,
                     86_400_000, 3_600_000)]
        return [Contestant("module", ["rl.all"], module), Contestant("library", ["fcall"], library),
                Contestant("seed", ["evalsha"], seed)]

    return {
        "CHECK listpack (~40)": check(40 * STEP, 40),
        "CHECK skiplist (~150)": check(150 * STEP, 150),
        "THROTTLE": throttle(),
        "LEASE+RELEASE": lease(),
        "ALL (3 clauses)": all3(),
    }


def stats(c) -> dict:
    out = {}
    for k, v in c.info("commandstats").items():
        if k.startswith("cmdstat_"):
            out[k[8:]] = (int(v["calls"]), int(v["usec"]), int(v.get("failed_calls", 0)))
    return out


def run_batch(c, who: Contestant, n: int):
    pipe = c.pipeline(transaction=False)
    for j in range(n):
        k = j % who.keys
        i = who.calls[k]
        who.calls[k] += 1
        for cmd in who.request(k, i):
            pipe.execute_command(*cmd)
    c.config_resetstat()
    start = time.perf_counter()
    replies = pipe.execute(raise_on_error=True)
    wall = time.perf_counter() - start
    st = stats(c)
    failed = sum(st.get(name, (0, 0, 0))[2] for name in who.counted)
    if failed:
        raise RuntimeError(f"{who.name}: {failed} failed calls")
    usec = sum(st.get(name, (0, 0, 0))[1] for name in who.counted)
    return usec / n, wall * 1e6 / n, replies


def prefill(c, contestants, n):
    """Runs each contestant n calls per key (untimed): the windows fill."""
    for who in contestants:
        pipe = c.pipeline(transaction=False)
        for k in range(who.keys):
            for _ in range(n):
                i = who.calls[k]
                who.calls[k] += 1
                for cmd in who.request(k, i):
                    pipe.execute_command(*cmd)
        pipe.execute()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (checks the bench works)")
    args = ap.parse_args(argv)
    rounds, n = (3, 300) if args.quick else (9, 3000)
    with Server() as s:
        c = s.client()
        c.execute_command("FUNCTION", "LOAD", "REPLACE", LIBRARY.read_text())
        shas = {name: c.script_load((LUA / f"{name}.lua").read_text())
                for name in ("check_uuid", "gcra", "semaphore", "dayhour")}
        t0 = int(c.time()[0]) * 1000 + 86_400_000
        # Ten long leases on every lease key.
        for prefix in ("lm", "ll", "ls"):
            for k in range(4):
                c.zadd(f"{{{prefix}{k}}}", {f"long{j}": t0 + 10_000_000 for j in range(10)})
        table = scenarios(shas, t0, args.quick)
        for name, contestants in table.items():
            fill = 200 if "skiplist" in name else 60
            prefill(c, contestants, fill)
        enc = {}
        for k in range(4):
            enc.setdefault("listpack", set()).add(c.object("encoding", f"{{c{40 * STEP}l{k}}}"))
            enc.setdefault("skiplist", set()).add(c.object("encoding", f"{{c{150 * STEP}l{k}}}"))
        results = {name: {who.name: [] for who in cs} for name, cs in table.items()}
        walls = {name: {who.name: [] for who in cs} for name, cs in table.items()}
        for r in range(rounds):
            for name, contestants in table.items():
                order = contestants[r % 3:] + contestants[:r % 3]
                for who in order:
                    usec, wall, _ = run_batch(c, who, n)
                    results[name][who.name].append(usec)
                    walls[name][who.name].append(wall)
        for k in range(4):
            enc["listpack"].add(c.object("encoding", f"{{c{40 * STEP}l{k}}}"))
            enc["skiplist"].add(c.object("encoding", f"{{c{150 * STEP}l{k}}}"))
        server = c.info("server")
    print(f"Functions library cost, {rounds} interleaved rounds x {n} requests per contestant "
          f"({server.get('redis_version')}); CHECK key encodings: "
          + ", ".join(f"{k}: {'/'.join(sorted(x.decode() for x in v))}" for k, v in enc.items()))
    print(f"{'request':24} {'module':>9} {'library':>9} {'seed':>9}   {'lib/seed':>9} {'mod/lib':>8}   target"
          f"   (server us per request; wall us: module/library/seed)")
    ok = True
    for name in table:
        med = {who: statistics.median(v) for who, v in results[name].items()}
        ratio = lambda a, b: statistics.median(x / y for x, y in zip(results[name][a], results[name][b]))  # noqa: E731
        lib_seed, mod_lib = ratio("library", "seed"), ratio("module", "library")
        limit = 1.5 if name == "THROTTLE" else 1.0
        met = lib_seed <= limit and mod_lib <= 0.5
        ok = ok and met
        wall = "/".join(f"{statistics.median(walls[name][w]):.1f}" for w in ("module", "library", "seed"))
        print(f"{name:24} {med['module']:9.2f} {med['library']:9.2f} {med['seed']:9.2f}   {lib_seed:9.2f} "
              f"{mod_lib:8.2f}   lib/seed <= {limit}, mod/lib <= 0.5: {'met' if met else 'MISSED'}   ({wall})")
    print("targets: " + ("all met" if ok else "some missed (a measurement, not a test)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
