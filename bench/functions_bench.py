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

After the table: the commands each request ran inside its script or
function, per request (INFO commandstats; where the library's extra cost
comes from).

--callgrind: instructions per whole request under callgrind instead of
server time (deterministic, whatever else the machine runs; one round of
--calls requests per contestant, files in --out). --before REV: the
library as it was at git revision REV runs beside the current one (loaded
as library `ratelimit_before`, functions before_rl_*, on its own keys) in
the same rounds, so a change is measured before/after in one run.
--only check,throttle: only those requests. The figures and why some
targets are out of reach: docs/guides/performance.md, "The Functions
library against the seed scripts".

Usage: functions_bench.py [--quick] [--callgrind [--calls N] [--out DIR]] [--before REV] [--only WORD,...]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "integration"))
from servers import Server, server_binary  # noqa: E402

import redis  # noqa: E402

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
        self.inner: dict[str, float] = {}  # commands run inside per request (last timed batch)


def scenarios(shas, t0, quick, before=False):
    def libraries(library):
        """The library, and (--before) the earlier library under its own
        function names on its own keys."""
        out = [Contestant("library", ["fcall"], library)]
        if before:
            out.append(Contestant("before", ["fcall"], lambda k, i: library(k, i, BEFORE_PREFIX, "b")))
        return out

    def check(window, members):
        def module(k, i):
            return [("RL.CHECK", f"{{c{window}m{k}}}", t0 + i * STEP, 1_000_000, window)]

        def library(k, i, f="rl_", tag="l"):
            return [("FCALL", f + "check", 1, f"{{c{window}{tag}{k}}}", t0 + i * STEP, 1_000_000, window)]

        def seed(k, i):
            return [("EVALSHA", shas["check_uuid"], 1, f"{{c{window}s{k}}}", f"m{k}-{i}", t0 + i * STEP,
                     1_000_000, window)]
        return [Contestant("module", ["rl.check"], module), *libraries(library), Contestant("seed", ["evalsha"], seed)]

    def throttle():
        def module(k, i):
            return [("RL.THROTTLE", f"{{tm{k}}}", t0 + i, 100, 1000, 1000)]

        def library(k, i, f="rl_", tag="l"):
            return [("FCALL", f + "throttle", 1, f"{{t{tag}{k}}}", t0 + i, 100, 1000, 1000)]

        def seed(k, i):
            return [("EVALSHA", shas["gcra"], 1, f"{{ts{k}}}", t0 + i, 100, 1000, 1000)]
        return [Contestant("module", ["rl.throttle"], module), *libraries(library),
                Contestant("seed", ["evalsha"], seed)]

    def lease():
        def module(k, i):
            key, t = f"{{lm{k}}}", t0 + i
            return [("RL.LEASE", key, t, 100, 60000, "TOKEN", f"r{i}"), ("RL.RELEASE", key, t, f"r{i}")]

        def library(k, i, f="rl_", tag="l"):
            key, t = f"{{l{tag}{k}}}", t0 + i
            return [("FCALL", f + "lease", 1, key, t, 100, 60000, "TOKEN", f"r{i}"),
                    ("FCALL", f + "release", 1, key, t, f"r{i}")]

        def seed(k, i):
            key, t = f"{{ls{k}}}", t0 + i
            return [("EVALSHA", shas["semaphore"], 1, key, f"r{i}", t, 100, 60000), ("ZREM", key, f"r{i}")]
        return [Contestant("module", ["rl.lease", "rl.release"], module), *libraries(library),
                Contestant("seed", ["evalsha", "zrem"], seed)]

    def all3():
        w = 40 * STEP

        def module(k, i):
            t = t0 + i * STEP
            return [("RL.ALL", 3, f"{{am{k}}}c", f"{{am{k}}}t", f"{{am{k}}}q", t, "CHECK", 1, 1_000_000, w,
                     "THROTTLE", 2, 100, 1000, 1000, "QUOTA", 3, "UTC", "DAY", 1_000_000_000)]

        def library(k, i, f="rl_", tag="l"):
            t = t0 + i * STEP
            return [("FCALL", f + "all", 3, f"{{a{tag}{k}}}c", f"{{a{tag}{k}}}t", f"{{a{tag}{k}}}q", t, "CHECK", 1,
                     1_000_000, w, "THROTTLE", 2, 100, 1000, 1000, "QUOTA", 3, "UTC", "DAY", 1_000_000_000)]

        def seed(k, i):
            t = t0 + i * STEP
            return [("EVALSHA", shas["check_uuid"], 1, f"{{as{k}}}c", f"m{k}-{i}", t, 1_000_000, w),
                    ("EVALSHA", shas["gcra"], 1, f"{{as{k}}}t", t, 100, 1000, 1000),
                    ("EVALSHA", shas["dayhour"], 2, f"{{as{k}}}d", f"{{as{k}}}h", 1_000_000_000, 1_000_000_000,
                     86_400_000, 3_600_000)]
        return [Contestant("module", ["rl.all"], module), *libraries(library), Contestant("seed", ["evalsha"], seed)]

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
    # the commands the request ran inside its scripts or functions
    who.inner = {name: calls / n for name, (calls, _, _) in st.items()
                 if name not in who.counted and not name.startswith(("config", "info"))}
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


BEFORE_PREFIX = "before_rl_"


def before_library(rev: str) -> str:
    """functions/ratelimit.lua at git revision rev, as library
    `ratelimit_before` with functions before_rl_*: both load side by side."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:functions/ratelimit.lua"], check=True,
                          capture_output=True, text=True).stdout
    for old, new in (("#!lua name=ratelimit\n", "#!lua name=ratelimit_before\n"),
                     ("function_name = name,", f"function_name = '{BEFORE_PREFIX[:-3]}' .. name,")):
        if old not in text:
            raise SystemExit(f"--before {rev}: the library's text has no {old!r} to rename")
        text = text.replace(old, new, 1)
    return text


# callgrind counts the whole request, as bench/profile_callgrind.py does
# (parsing, the command, the reply; not the socket reads or the idle loop).
COLLECT = ("processInputBuffer", "handleClientsWithPendingWrites", "sendReplyToClient")


def callgrind_server(out: Path) -> Server:
    """A server (not started) whose requests callgrind counts."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("callgrind.out.*"):
        old.unlink()
    wrapper = Path(tempfile.mkdtemp(prefix="rl-fbench-")) / "redis-under-callgrind"
    real = server_binary()
    toggles = " ".join(f"--toggle-collect={f}" for f in COLLECT)
    wrapper.write_text("#!/bin/sh\n"
                       f"exec valgrind --tool=callgrind --collect-atstart=no {toggles} "
                       f"--callgrind-out-file={out}/callgrind.out.%p '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    return Server(binary=str(wrapper), start_timeout=120)  # valgrind starts slowly; `with` starts it


def callgrind_phase(c, pid: str, out: Path, who: Contestant, n: int, name: str) -> float:
    """Instructions per request of n requests of who (one pipeline)."""
    pipe = c.pipeline(transaction=False)
    for j in range(n):
        k = j % who.keys
        i = who.calls[k]
        who.calls[k] += 1
        for cmd in who.request(k, i):
            pipe.execute_command(*cmd)
    subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True, timeout=300)
    pipe.execute(raise_on_error=True)
    subprocess.run(["callgrind_control", "-d", name, pid], check=True, capture_output=True, timeout=300)
    time.sleep(0.3)
    dump = max(out.glob(f"callgrind.out.{pid}.*"), key=lambda f: f.stat().st_mtime)
    target = out / f"callgrind.out.{name}"
    dump.rename(target)
    for line in target.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]) / n
    raise RuntimeError(f"{target}: no instruction total")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a short run (checks the bench works)")
    ap.add_argument("--before", metavar="REV",
                    help="also run the library as it was at git revision REV (e.g. main, HEAD~3), interleaved")
    ap.add_argument("--callgrind", action="store_true",
                    help="instructions per whole request under callgrind instead of server time (deterministic)")
    ap.add_argument("--calls", type=int, default=500, help="requests per contestant under --callgrind")
    ap.add_argument("--out", default="bench-out/functions-callgrind", help="callgrind files (--callgrind)")
    ap.add_argument("--only", metavar="WORD[,WORD...]",
                    help="only the requests whose names start with one of these words (check, throttle, lease, all)")
    args = ap.parse_args(argv)
    rounds, n = (3, 300) if args.quick else (9, 3000)
    if args.callgrind:
        rounds, n = 1, args.calls
    out = (ROOT / args.out).resolve()
    with (callgrind_server(out) if args.callgrind else Server()) as s:
        # (under valgrind a pipeline takes far longer than the harness's 10 s timeout)
        c = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=600) if args.callgrind else s.client()
        c.execute_command("FUNCTION", "LOAD", "REPLACE", LIBRARY.read_text())
        if args.before:
            c.execute_command("FUNCTION", "LOAD", "REPLACE", before_library(args.before))
        shas = {name: c.script_load((LUA / f"{name}.lua").read_text())
                for name in ("check_uuid", "gcra", "semaphore", "dayhour")}
        t0 = int(c.time()[0]) * 1000 + 86_400_000
        # Ten long leases on every lease key.
        for prefix in ("lm", "ll", "lb", "ls"):
            for k in range(4):
                c.zadd(f"{{{prefix}{k}}}", {f"long{j}": t0 + 10_000_000 for j in range(10)})
        table = scenarios(shas, t0, args.quick, bool(args.before))
        if args.only:
            words = tuple(w.strip().lower() for w in args.only.split(","))
            table = {name: cs for name, cs in table.items() if name.lower().startswith(words)}
        for name, contestants in table.items():
            fill = 200 if "skiplist" in name else 60
            prefill(c, contestants, fill)
        libs = ("l", "b") if args.before else ("l",)

        def encodings(enc):
            for k in range(4):
                for tag in libs:
                    for shape, window in (("listpack", 40 * STEP), ("skiplist", 150 * STEP)):
                        e = c.object("encoding", f"{{c{window}{tag}{k}}}")
                        if e is not None:  # (not run with --only)
                            enc.setdefault(shape, set()).add(e)
        enc = {}
        encodings(enc)
        results = {name: {who.name: [] for who in cs} for name, cs in table.items()}
        walls = {name: {who.name: [] for who in cs} for name, cs in table.items()}
        for r in range(rounds):
            for name, contestants in table.items():
                rot = r % len(contestants)
                order = contestants[rot:] + contestants[:rot]
                for who in order:
                    if args.callgrind:
                        tag = "".join(ch if ch.isalnum() else "-" for ch in name).strip("-")
                        usec = callgrind_phase(c, str(s.proc.pid), out, who, n, f"{tag}.{who.name}")
                        wall = 0.0
                    else:
                        usec, wall, _ = run_batch(c, who, n)
                    results[name][who.name].append(usec)
                    walls[name][who.name].append(wall)
        encodings(enc)
        server = c.info("server")
    unit = "instructions" if args.callgrind else "server us"
    print(f"Functions library cost, {rounds} interleaved rounds x {n} requests per contestant "
          f"({server.get('redis_version')}{', callgrind' if args.callgrind else ''}"
          f"{', before = ' + args.before if args.before else ''}); CHECK key encodings: "
          + ", ".join(f"{k}: {'/'.join(sorted(x.decode() for x in v))}" for k, v in enc.items()))
    extra = f" {'before':>9}" if args.before else ""
    extra_ratio = f" {'bef/seed':>9}" if args.before else ""
    print(f"{'request':24} {'module':>9} {'library':>9}{extra} {'seed':>9}   {'lib/seed':>9}{extra_ratio} "
          f"{'mod/lib':>8}   target   ({unit} per request"
          + ("" if args.callgrind else "; wall us: module/library/seed") + ")")
    ok = True
    for name in table:
        med = {who: statistics.median(v) for who, v in results[name].items()}
        ratio = lambda a, b: statistics.median(x / y for x, y in zip(results[name][a], results[name][b]))  # noqa: E731
        lib_seed, mod_lib = ratio("library", "seed"), ratio("module", "library")
        limit = 1.5 if name == "THROTTLE" else 1.0
        met = lib_seed <= limit and mod_lib <= 0.5
        ok = ok and met
        wall = "" if args.callgrind else "   (" + "/".join(
            f"{statistics.median(walls[name][w]):.1f}" for w in ("module", "library", "seed")) + ")"
        fmt = "9.0f" if args.callgrind else "9.2f"
        b = f" {med['before']:{fmt}}" if args.before else ""
        br = f" {ratio('before', 'seed'):9.2f}" if args.before else ""
        print(f"{name:24} {med['module']:{fmt}} {med['library']:{fmt}}{b} {med['seed']:{fmt}}   {lib_seed:9.2f}{br} "
              f"{mod_lib:8.2f}   lib/seed <= {limit}, mod/lib <= 0.5: {'met' if met else 'MISSED'}{wall}")
    print("targets: " + ("all met" if ok else "some missed (a measurement, not a test)"))
    if not args.callgrind:
        print("commands run inside per request (redis.call; the seed's ZREM is a request of its own):")
        for name, contestants in table.items():
            for who in contestants:
                if who.name != "module":
                    inner = ", ".join(f"{cmd.upper()} {v:.2g}" for cmd, v in sorted(who.inner.items()))
                    print(f"  {name:24} {who.name:8} {sum(who.inner.values()):5.2f}: {inner}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
