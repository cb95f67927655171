#!/usr/bin/env python3
"""Where does a command's server time go? Instruction counts under callgrind.

Starts redis-server with the module under `valgrind --tool=callgrind`
(through the project's harness: free loopback port, stopped on exit),
counting the whole request (see COLLECT: parsing, lookup, ACL, the command,
propagation, writing the replies, the replication stream and the AOF; not
the socket reads or the idle event loop), in three settings (SETTINGS): no
replica, one replica attached, `appendonly yes` with `everysec`. redis-cell
0.2.2's CL.THROTTLE (built by scripts/build_redis_cell.sh into target/) runs
beside RL.THROTTLE with the server's clock in the no-replica setting. Each phase (one
contestant, a fixed number of requests on keys of a fixed shape) is dumped to
its own callgrind file; the summary gives instructions per request, and
`callgrind_annotate --inclusive=yes` of the module phases shows where the
module's instructions go. Each phase also prints the strings
(RedisModule_CreateString*) and heap blocks (RedisModule_Alloc, through
Rust's allocator) the module's own code makes per request.

RL.CHECK's steady state is profiled on both encodings of its keys: ~40
members (a listpack) and ~150 members (a skiplist, above Redis's
zset-max-listpack-entries of 128), against the native commands and the
seed-000 A script on keys of the same shape; the keys' OBJECT ENCODING is
checked and printed. For the module on both shapes, a breakdown of the
instructions under its command handler (from the call graph: the module's own
instructions, and every call it makes into Redis by entry point and by the
module function that makes it) is printed and written to
breakdown-check.txt.

Instruction counts are deterministic, so unlike the timing bench they do not
move with other load on the machine; they are not time (cache misses and
branch mispredictions cost nothing here).

`--only lease,throttle` runs only the phases whose names start with one of
those words (and the prefill and warm-up they need, nothing else): a quick
before/after of some commands (minutes instead of the whole run).
`--only spring` replays the Spring bench's request (RL.ALL, one CHECK
clause of three windows, DETAILS) against seed 000's script on keys of its
shape. `--counters` is `--only dayhour,quota,lockcount` (RL.DAYHOUR, RL.QUOTA and
RL.LOCKCOUNT, module and Lua).

Usage: profile_callgrind.py [--out DIR] [--calls N] [--setting none|replica|aof[,...]|all]
                            [--only WORD[,WORD...] | --counters]
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
SL_ENTRIES = 150  # members per key of the skiplist shape (zset-max-listpack-entries is 128)


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


# --------------------------------------------------------------------------
# Where RL.CHECK's instructions go: the call graph of a callgrind dump


def parse_callgrind(path: Path) -> dict:
    """A callgrind dump (positions: line, one event): self cost per function,
    per call edge (caller, callee) the calls and the inclusive cost, and each
    function's object file. Functions are named as callgrind names them
    (symbol names, without file); name compression is undone."""
    names = {"ob": {}, "fl": {}, "fn": {}}
    kind_of = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
               "fn": "fn", "cfn": "fn"}
    self_cost: dict[str, int] = {}
    edges: dict[tuple[str, str], list[int]] = {}
    obj: dict[str, str] = {}
    ob = fn = cob = cfn = None
    calls = None
    summary = 0

    def name(kind, val):
        ns = names[kind]
        if val.startswith("("):
            end = val.index(")")
            ident, rest = val[1:end], val[end + 1:].strip()
            if rest:
                ns[ident] = rest
            return ns.get(ident, ident)
        return val

    with open(path, errors="replace") as f:
        for line in f:
            c = line[:1]
            if c.isdigit() or c in "+-*":  # a cost line: position, cost
                if fn is None:
                    continue
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if calls is not None:  # the inclusive cost of the call just named
                    e = edges.setdefault((fn, cfn), [0, 0])
                    e[0] += calls
                    e[1] += cost
                    obj.setdefault(cfn, cob if cob is not None else ob)
                    calls = None
                else:
                    self_cost[fn] = self_cost.get(fn, 0) + cost
                continue
            if line.startswith(("summary:", "totals:")):
                summary = summary or int(line.split()[1])
                continue
            key, eq, val = line.rstrip("\n").partition("=")
            if not eq:
                continue
            if key == "calls":
                calls = int(val.split()[0])
            elif key in kind_of:
                v = name(kind_of[key], val)
                if key == "ob":
                    ob = v
                elif key == "fn":
                    fn, cob = v, None
                    obj[fn] = ob
                elif key == "cob":
                    cob = v
                elif key == "cfn":
                    cfn = v
    return {"self": self_cost, "edges": edges, "obj": obj, "summary": summary}


def short(fn: str) -> str:
    """redis_ratelimit::redis_api::Key::zadd_new -> Key::zadd_new;
    <redis_module::alloc::RedisAlloc as core::...::GlobalAlloc>::alloc ->
    RedisAlloc::alloc"""
    if fn.startswith("<") and " as " in fn and ">::" in fn:
        fn = fn[1:fn.index(" as ")] + "::" + fn.rsplit(">::", 1)[1]
    parts = fn.split("::")
    return "::".join(parts[-2:]) if len(parts) > 2 and parts[-2][:1].isupper() else parts[-1]


# Calls from the module into Redis, grouped. The first rule that matches a
# call (module caller, Redis callee) names its group; the module's own
# instructions are a group of their own.
CALL_GROUPS = [
    ("RedisModule_Call (ZCOUNT / ZRANGE by rank)",
     lambda a, b: b == "RM_Call" or b.startswith(("RM_CallReply", "RM_FreeCallReply"))),
    ("replication (RM_Replicate)", lambda a, b: b == "RM_Replicate"),
    ("ZADD of the new member (RM_ZsetAdd → zsetAdd)", lambda a, b: b == "RM_ZsetAdd"),
    ("allocation (Rust's allocator → RM_Alloc / RM_Free)",
     lambda a, b: b in ("RM_Alloc", "RM_Free", "RM_Realloc", "RM_Calloc", "RM_TryAlloc", "malloc", "free",
                        "realloc", "calloc")),
    ("trim (walk up from the lowest score, RM_ZsetRem)",
     lambda a, b: short(a).split("::")[-1] in ("zrem_through", "zrem", "trim") or b == "RM_ZsetRem"),
    ("reading extremes / stepping from an end (RM_Zset*Range*)",
     lambda a, b: short(a).split("::")[-1] in ("zscore_bounds", "zscore_from_end", "zcount_from_end",
                                               "walk_from", "read", "count_newer_than", "score_at_rank")
     or b.startswith("RM_Zset")),
    ("reply (RM_ReplyWith*)", lambda a, b: b.startswith("RM_ReplyWith")),
    ("opening the key (RM_OpenKey, RM_CloseKey, RM_KeyType, RM_ValueLength)",
     lambda a, b: b in ("RM_OpenKey", "RM_CloseKey", "RM_KeyType", "RM_ValueLength")),
    ("expiry (RM_GetAbsExpire / RM_SetAbsExpire)",
     lambda a, b: b in ("RM_GetAbsExpire", "RM_SetAbsExpire", "RM_GetExpire", "RM_SetExpire")),
    ("keyspace events, WATCH (RM_NotifyKeyspaceEvent, RM_SignalModifiedKey)",
     lambda a, b: b in ("RM_NotifyKeyspaceEvent", "RM_SignalModifiedKey")),
    ("strings (RM_CreateString*, RM_FreeString, RM_StringPtrLen)",
     lambda a, b: b.startswith(("RM_CreateString", "RM_FreeString", "RM_StringPtrLen", "RM_RetainString",
                                "RM_HoldString"))),
]
OWN = "the module's own instructions (parsing, decision, bookkeeping)"


def module_made(path: Path, requests: int) -> dict:
    """What the module's own code asks Redis to make per request (issue 17:
    Redis allocates inside RedisModule_OpenKey and RedisModule_Replicate
    itself, so the module's part is counted as its calls): strings
    (RedisModule_CreateString*) and heap blocks (RedisModule_Alloc and
    friends, which Rust's allocator calls)."""
    g = parse_callgrind(path)
    obj = g["obj"]
    is_mod = {f for f, o in obj.items() if o and "libredis_ratelimit" in o}
    strings = allocs = 0
    for (a, b), (n, _c) in g["edges"].items():
        if a in is_mod and b not in is_mod:
            if b.startswith("RM_CreateString"):
                strings += n
            elif b in ("RM_Alloc", "RM_Calloc", "RM_Realloc", "RM_TryAlloc"):
                allocs += n
    return {"module_strings_per_request": strings / requests, "module_allocs_per_request": allocs / requests}


def module_breakdown(path: Path, requests: int) -> dict:
    """Ir per request under the module's command handler: the handler's
    inclusive cost (calls into the module from Redis), the module's own
    instructions, every call into Redis by entry point (inclusive) and by
    group, and the module functions' inclusive costs."""
    g = parse_callgrind(path)
    edges, obj = g["edges"], g["obj"]
    is_mod = {f for f, o in obj.items() if o and "libredis_ratelimit" in o}
    per = 1.0 / requests
    handler = {b: c * per for (a, b), (_n, c) in edges.items() if b in is_mod and a not in is_mod}
    own = sum(c for f, c in g["self"].items() if f in is_mod) * per
    groups = {name: 0.0 for name, _ in CALL_GROUPS}
    groups[OWN] = own
    groups["other calls into Redis"] = 0.0
    entry: dict[str, dict] = {}  # Redis entry point -> cost, calls, callers
    for (a, b), (n, c) in edges.items():
        if a in is_mod and b not in is_mod:
            for name, rule in CALL_GROUPS:
                if rule(a, b):
                    groups[name] += c * per
                    break
            else:
                groups["other calls into Redis"] += c * per
            e = entry.setdefault(b, {"Ir": 0.0, "calls": 0.0, "callers": {}})
            e["Ir"] += c * per
            e["calls"] += n * per
            e["callers"][short(a)] = e["callers"].get(short(a), 0.0) + c * per
    inclusive: dict[str, float] = {}
    for (a, b), (_n, c) in edges.items():
        if b in is_mod and a != b:
            inclusive[short(b)] = inclusive.get(short(b), 0.0) + c * per
    self_mod = {short(f): c * per for f, c in g["self"].items() if f in is_mod}

    incoming: dict[str, float] = {}
    for (a, b), (_n, c) in edges.items():
        if a != b:
            incoming[b] = incoming.get(b, 0.0) + c * per

    def inside(fn: str, depth: int, share: float = 1.0) -> list:
        """The biggest calls `fn` makes (Ir per request), `depth` levels
        down. Callgrind keeps one level of context: below the first level, a
        function that is also called from elsewhere has its calls scaled by
        the share of its cost that comes from here (`approx`)."""
        kids = sorted(((b, c * per * share) for (a, b), (_n, c) in edges.items() if a == fn and b != fn),
                      key=lambda x: -x[1])
        out = []
        for b, c in kids[:4]:
            sub_share = min(1.0, c / incoming[b]) if incoming.get(b) else 1.0
            out.append({"fn": b, "Ir": c, "approx": share < 0.95,
                        "inside": inside(b, depth - 1, sub_share) if depth > 1 else []})
        return out

    for b, e in entry.items():
        e["inside"] = inside(b, 2)
    return {"total": g["summary"] * per, "handler": sum(handler.values()), "handler_entries": handler,
            "groups": groups, "entry_points": entry, "module_inclusive": inclusive, "module_self": self_mod}


def check_breakdown(cols: list[tuple[str, Path, int]], title: str | None = None) -> tuple[str, dict]:
    """The text printed by bench-profile: groups side by side for each column
    (label, dump, requests); the first column in detail."""
    data = {label: module_breakdown(path, reqs) for label, path, reqs in cols}
    labels = [label for label, _, _ in cols]
    first = data[labels[0]]
    w = 74
    L = [title or "RL.CHECK, 2 rules, 1 trimmed + 1 added a call: where the instructions go "
         "(Ir per request, from the call graph)", ""]
    L.append(f"{'':{w}}" + "".join(f"{x:>18}" for x in labels))
    L.append(f"{'the whole request (the Ir/request of the phase)':{w}}"
             + "".join(f"{data[x]['total']:>18,.0f}" for x in labels))
    L.append(f"{'  outside the handler (parsing, lookup, ACL, reply writing)':{w}}"
             + "".join(f"{data[x]['total'] - data[x]['handler']:>18,.0f}" for x in labels))
    L.append(f"{'  the handler (' + ', '.join(short(f) for f in first['handler_entries']) + '), inclusive':{w}}"
             + "".join(f"{data[x]['handler']:>18,.0f}" for x in labels))
    names = sorted(first["groups"], key=lambda k: -first["groups"][k])
    for name in names:  # every group, 0 too (RedisModule_Call off the path shows as 0)
        L.append(f"{'    ' + name:{w}}" + "".join(
            f"{data[x]['groups'].get(name, 0):>11,.0f} {100 * data[x]['groups'].get(name, 0) / data[x]['handler']:5.1f}%"
            for x in labels))
    L.append("")
    L.append(f"{labels[0]}: calls from the module into Redis, by entry point (inclusive Ir per request, calls "
             f"per request, the module functions that call it; below: its biggest calls, and in brackets theirs, "
             f"≈ where a function called from elsewhere too is scaled by the share of its cost from here)")
    for b, e in sorted(first["entry_points"].items(), key=lambda x: -x[1]["Ir"]):
        if e["Ir"] < 0.005 * first["handler"]:
            continue
        callers = ", ".join(f"{a} {c:,.0f}" for a, c in sorted(e["callers"].items(), key=lambda x: -x[1])[:3])
        L.append(f"  {b:34s} {e['Ir']:>9,.0f} {100 * e['Ir'] / first['handler']:5.1f}%  {e['calls']:4.1f}/req  "
                 f"from {callers}")
        for k in e["inside"]:
            if k["Ir"] < 0.1 * e["Ir"]:
                continue
            sub = "; ".join(f"{kk['fn']} {'≈' if kk['approx'] else ''}{kk['Ir']:,.0f}" for kk in k["inside"]
                            if kk["Ir"] >= 0.1 * k["Ir"])
            L.append(f"      {k['fn']:30s} {k['Ir']:>9,.0f}" + (f"  [{sub}]" if sub else ""))
    L.append("")
    L.append(f"{labels[0]}: top inclusive costs of the module's functions (Ir per request; self = own "
             f"instructions)")
    for f, c in sorted(first["module_inclusive"].items(), key=lambda x: -x[1])[:16]:
        L.append(f"  {f:58s} {c:>9,.0f} {100 * c / first['handler']:5.1f}%   self {first['module_self'].get(f, 0):>7,.0f}")
    return "\n".join(L) + "\n", data


def all_beyond_singles(a: dict, s: dict, top: int = 10) -> str:
    """Where RL.ALL spends more than the three commands (two module_breakdown
    results, Ir per request): the whole request outside the handler, then the
    `top` largest differences by the module's own instructions per function
    (self) and by call from the module into Redis (inclusive, by entry point)."""
    L = ["RL.ALL minus the three commands (Ir per request; + = RL.ALL spends more)", ""]
    L.append(f"  whole request {a['total'] - s['total']:+,.0f}: outside the handler "
             f"{(a['total'] - a['handler']) - (s['total'] - s['handler']):+,.0f}, inside "
             f"{a['handler'] - s['handler']:+,.0f}")
    rows = []
    for f in set(a["module_self"]) | set(s["module_self"]):
        rows.append((a["module_self"].get(f, 0) - s["module_self"].get(f, 0), f"module self    {f}",
                     a["module_self"].get(f, 0), s["module_self"].get(f, 0)))
    for b in set(a["entry_points"]) | set(s["entry_points"]):
        ea, es = a["entry_points"].get(b, {}), s["entry_points"].get(b, {})
        rows.append((ea.get("Ir", 0) - es.get("Ir", 0),
                     f"into Redis     {b} ({ea.get('calls', 0):.1f} vs {es.get('calls', 0):.1f} calls/req)",
                     ea.get("Ir", 0), es.get("Ir", 0)))
    rows.sort(key=lambda r: -r[0])
    L.append(f"  top {top} (difference, RL.ALL, the 3 commands):")
    for d, what, x, y in rows[:top]:
        L.append(f"  {d:>+9,.0f}  {x:>9,.0f} {y:>9,.0f}  {what}")
    L.append("  largest savings:")
    for d, what, x, y in sorted(rows, key=lambda r: r[0])[:5]:
        if d < 0:
            L.append(f"  {d:>+9,.0f}  {x:>9,.0f} {y:>9,.0f}  {what}")
    return "\n".join(L) + "\n"


SETTINGS = {
    "none": "no replica, no AOF",
    "replica": "one replica attached (with the module)",
    "aof": "appendonly yes, appendfsync everysec",
}

# What callgrind counts: the whole request — reading it out of the query
# buffer (parsing, the command, propagation to replicas and the AOF buffer:
# processInputBuffer), writing the replies and the replication stream
# (handleClientsWithPendingWrites, sendReplyToClient) and the AOF
# (flushAppendOnlyFile). None of these runs inside another, so toggling on
# each one's entry and exit never nests. A pipeline of native commands pays
# the parsing and the reply once per command it sends.
COLLECT = ("processInputBuffer", "handleClientsWithPendingWrites", "sendReplyToClient", "flushAppendOnlyFile")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench-out/profile", help="output directory (default bench-out/profile/)")
    ap.add_argument("--calls", type=int, default=4000, help="requests per phase (default 4000)")
    ap.add_argument("--setting", default="all",
                    help="none, replica, aof, several of them comma-separated (none,replica), or all three in "
                         "turn (default)")
    ap.add_argument("--counters", action="store_true",
                    help="only the RL.DAYHOUR, RL.QUOTA and RL.LOCKCOUNT phases (and their Lua)")
    ap.add_argument("--only", default=None,
                    help="only the phases whose names start with one of these comma-separated words "
                         "(check, throttle, scale, dayhour, quota, lockcount, lease, all, spring; "
                         "lease-100 for one size)")
    args = ap.parse_args(argv)
    only = tuple(w for w in (args.only or "").split(",") if w) or None
    if args.counters:
        only = ("dayhour", "quota", "lockcount")
    if not shutil.which("valgrind"):
        print("valgrind not found (apt-get install valgrind)", file=sys.stderr)
        return 2
    # redis-cell's CL.THROTTLE, a contestant with no replica (0.2.2 replicates nothing)
    cell = None if only and not any("throttle-cell".startswith(w) for w in only) else subprocess.run([str(B.ROOT / "scripts" / "build_redis_cell.sh")],
                                                     capture_output=True, text=True)
    cell_so = cell.stdout.strip() if cell is not None and cell.returncode == 0 else None
    if cell is not None and cell_so is None:
        print(f"redis-cell not built, CL.THROTTLE left out: {cell.stderr.strip()[-400:]}", file=sys.stderr)
    settings = list(SETTINGS) if args.setting == "all" else args.setting.split(",")
    if not settings or any(x not in SETTINGS for x in settings):
        ap.error(f"--setting: {args.setting!r}: expected all or names from {', '.join(SETTINGS)}")
    out = Path(args.out).resolve()
    summary = {}
    for setting in settings:
        print(f"\n== setting: {SETTINGS[setting]}", flush=True)
        summary[setting] = profile(setting, out / setting, args.calls, cell_so if setting == "none" else None,
                                   only=only)
    if len(summary) > 1:
        print("\n" + side_by_side(summary))
        (out / "settings.txt").write_text(side_by_side(summary))
    return 0


def side_by_side(summary: dict) -> str:
    """Ir per whole request, per phase, one column per setting."""
    settings = list(summary)
    phases = [p for p, r in summary[settings[0]].items() if isinstance(r, dict) and "Ir_per_request" in r]
    for s in settings[1:]:
        phases += [p for p, r in summary[s].items()
                   if isinstance(r, dict) and "Ir_per_request" in r and p not in phases]
    w = max(len(p) for p in phases) + 2
    L = ["Instructions per whole request (callgrind), by setting:",
         f"{'phase':{w}}" + "".join(f"{s:>12}" for s in settings)]
    for p in phases:
        row = [summary[s].get(p, {}).get("Ir_per_request") for s in settings]
        L.append(f"{p:{w}}" + "".join(f"{v:>12,.0f}" if v else f"{'-':>12}" for v in row))
    L.append("")
    for label in summary[settings[0]].get("ratios", {}):
        vals = [summary[s].get("ratios", {}).get(label) for s in settings]
        L.append(f"{label}: " + ", ".join(f"{s} {v:.3f}" for s, v in zip(settings, vals) if v is not None))
    return "\n".join(L) + "\n"


def profile(setting: str, out: Path, n: int, cell_so: str | None, only: tuple[str, ...] | None = None) -> dict:
    """One run of every phase under callgrind in `setting` (only those whose
    names start with a word of `only`, when given); returns the results."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("callgrind.out.*"):
        old.unlink()
    tmp = Path(tempfile.mkdtemp(prefix="rl-prof-"))
    wrapper = tmp / "redis-under-callgrind"
    real = shutil.which("redis-server") or "/usr/bin/redis-server"
    libstd = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True).stdout.strip() + "/lib"
    toggles = " ".join(f"--toggle-collect={f}" for f in COLLECT)
    wrapper.write_text(
        "#!/bin/sh\n"
        f"export LD_LIBRARY_PATH='{libstd}'\n"  # redis-cell 0.2.2 is a dylib linked to libstd
        f"exec valgrind --tool=callgrind --collect-atstart=no {toggles} "
        f"--callgrind-out-file={out}/callgrind.out.%p '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    server_args = []
    if setting == "aof":
        server_args = ["--appendonly", "yes", "--appendfsync", "everysec"]
    if cell_so:
        server_args += ["--loadmodule", cell_so]
    keys = 200
    entries = 40
    period = B.MAX_WINDOW // entries
    step = period // keys
    results = {}
    server = B.Server(module=True, binary=str(wrapper), args=server_args)
    # valgrind needs more than the harness's 10 s on a slow start: retry once
    try:
        server.start()
    except RuntimeError:
        server = B.Server(module=True, binary=str(wrapper), args=server_args)
        server.start()
    replica = None
    try:
        if setting == "replica":
            replica = B.Server(module=True, args=["--replicaof", "127.0.0.1", str(server.port)]).start()
            rc = replica.client()
            deadline = time.time() + 120
            while rc.info("replication").get("master_link_status") != "up":
                if time.time() > deadline:
                    raise RuntimeError("the replica did not sync")
                time.sleep(0.2)
        pid = str(server.proc.pid)
        import redis
        ctl = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=600)
        conn = B.Conn(server.port)
        sha = {name: ctl.script_load((B.LUA_DIR / f"{name}.lua").read_text())
               for name in ("check_uuid", "dayhour", "lockcount", "gcra", "semaphore", "all_refund")}
        base = int(ctl.time()[0]) * 1000

        def wanted(name):
            return only is None or any(name.startswith(w) for w in only)

        def any_wanted(*names):
            return any(wanted(x) for x in names)

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
        # the skiplist shape: 200 keys x 150 entries per contestant, the same
        # steady state on its own clock (each key visited every 24 s)
        sl_period = B.MAX_WINDOW // SL_ENTRIES
        sl_step = sl_period // keys
        for k in range(keys):
            first = base + (k + 1) * sl_step
            scores = [first - j * sl_period for j in range(SL_ENTRIES, 0, -1)]
            for s in scores:
                pre.append(B.enc("RL.CHECK", f"mods:{k}", s, *B.flat_rules(RULES)))
            for prefix in ("luas:", "nats:"):
                a = []
                for s in scores:
                    a += [s, str(uuid.uuid4())]
                pre.append(B.enc("ZADD", prefix + str(k), *a))
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
        if any_wanted("check-", "throttle-check-1rule", "scale-"):
            send(pre)

        def phase(name, cmds, per=1, requests=None):
            if not wanted(name):
                return
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
            made = module_made(target, reqs)
            results[name].update(made)
            extra = (f"   module: {made['module_strings_per_request']:.1f} strings created,"
                     f" {made['module_allocs_per_request']:.1f} allocations per request"
                     if made["module_strings_per_request"] or made["module_allocs_per_request"] else "")
            print(f"{name:28s} {ir / reqs:10,.0f} Ir/request{extra}", flush=True)

        def check_cmds(kind, start=0, count=n, skiplist=False):
            cmds = []
            sfx, st = ("s", sl_step) if skiplist else ("", step)
            for i in range(start, start + count):
                k = i % keys
                now = base + (i + 1) * st
                if kind == "module":
                    cmds.append(B.enc("RL.CHECK", f"mod{sfx}:{k}", now, *B.flat_rules(RULES)))
                elif kind == "lua":
                    cmds.append(B.enc("EVALSHA", sha["check_uuid"], 1, f"lua{sfx}:{k}", str(uuid.uuid4()), now,
                                      *B.flat_rules(RULES)))
                else:
                    key = f"nat{sfx}:{k}"
                    cmds.append(b"".join([B.enc("ZCOUNT", key, now - w, now) for _, w in RULES]
                                         + [B.enc("ZADD", key, now, str(uuid.uuid4())),
                                            B.enc("PEXPIRE", key, B.MAX_WINDOW),
                                            B.enc("ZREMRANGEBYSCORE", key, 0, now - B.MAX_WINDOW)]))
            return cmds

        # warm-up (allocations, script cache), not collected
        warm = keys  # one visit per key; the phases continue the clock from there
        if any_wanted("check-module", "check-lua-uuid", "check-native"):
            send(check_cmds("module", 0, warm))
            send(check_cmds("lua", 0, warm))
            send(check_cmds("native", 0, warm), per=len(RULES) + 3)
        phase("check-module", check_cmds("module", warm))
        phase("check-lua-uuid", check_cmds("lua", warm))
        phase("check-native", check_cmds("native", warm), per=len(RULES) + 3, requests=n)
        # the same on skiplist-encoded keys of ~150 members
        if any_wanted("check-skiplist-"):
            send(check_cmds("module", 0, warm, True))
            send(check_cmds("lua", 0, warm, True))
            send(check_cmds("native", 0, warm, True), per=len(RULES) + 3)
        phase("check-skiplist-module", check_cmds("module", warm, skiplist=True))
        phase("check-skiplist-lua-uuid", check_cmds("lua", warm, skiplist=True))
        phase("check-skiplist-native", check_cmds("native", warm, skiplist=True), per=len(RULES) + 3,
              requests=n)
        encodings = {}
        for shape, prefixes, want, entries in (("listpack", ("mod:", "lua:", "nat:"), "listpack", 40),
                                               ("skiplist", ("mods:", "luas:", "nats:"), "skiplist", SL_ENTRIES)
                                               )[:2 if any_wanted("check-") else 0]:
            row = {}
            for prefix in prefixes:
                pipe = ctl.pipeline(transaction=False)
                for k in range(keys):
                    pipe.object("encoding", prefix + str(k))
                    pipe.zcard(prefix + str(k))
                    pipe.memory_usage(prefix + str(k), samples=0)
                got = pipe.execute()
                encs, cards, mem = got[0::3], got[1::3], got[2::3]
                seen = {}
                for e in encs:
                    e = e.decode() if isinstance(e, bytes) else str(e)
                    seen[e] = seen.get(e, 0) + 1
                # Live keys and their memory: a key the grid keeps a little
                # longer (members past the window until the expiry moves)
                # costs memory, so it is counted here, per contestant.
                row[prefix.rstrip(":")] = {"encoding": seen, "members_min": min(cards), "members_max": max(cards),
                                           "live_keys": sum(1 for c in cards if c),
                                           "memory_per_key": sum(m or 0 for m in mem) / max(1, len(mem))}
                if set(seen) != {want} or min(cards) < entries - 1 or max(cards) > entries + 1:
                    print(f"WARNING: {prefix}* keys: OBJECT ENCODING {seen}, {min(cards)}..{max(cards)} members; "
                          f"expected {want}, about {entries}", file=sys.stderr)
            encodings[shape] = row
            print(f"RL.CHECK {shape} keys after the phases: " + ", ".join(
                f"{p}* {'/'.join(f'{e} ({c})' for e, c in r['encoding'].items())}, "
                f"{r['members_min']}..{r['members_max']} members, {r['live_keys']} live keys, "
                f"{r['memory_per_key']:,.0f} B/key (MEMORY USAGE)" for p, r in row.items()), flush=True)
        results["check_key_encodings"] = encodings

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

        # RL.THROTTLE on the server's clock (`*`) and redis-cell's CL.THROTTLE
        # (always the server's clock): the same rule — a bucket of 1000,
        # 1000 an hour (redis-cell's max_burst 999 is a bucket of 1000) —
        # on 200 keys each, every call admitted.
        def clock_cmds(kind, count):
            burst, count_, window = B.TH_RULE
            if kind == "cell":
                return [B.enc("CL.THROTTLE", f"cl:{i % keys}", burst - 1, count_, window // 1000, 1)
                        for i in range(count)]
            return [B.enc("RL.THROTTLE", f"ths:{i % keys}", "*", *B.TH_RULE) for i in range(count)]

        for kind, name in (("module", "throttle-module"), ("lua", "throttle-lua"),
                           ("check", "throttle-check-1rule")):
            if wanted(name):
                send(throttle_cmds(kind, 0, warm))
        phase("throttle-module", throttle_cmds("module", warm, n))
        phase("throttle-lua", throttle_cmds("lua", warm, n))
        phase("throttle-check-1rule", throttle_cmds("check", warm, n))
        if wanted("throttle-module-star"):
            send(clock_cmds("module", warm))
        phase("throttle-module-star", clock_cmds("module", n))
        if cell_so:
            send(clock_cmds("cell", warm))
            phase("throttle-cell", clock_cmds("cell", n))
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

        # RL.LEASE + RL.RELEASE vs the Lua semaphore + ZREM (one request: a
        # lease taken and given back) on keys holding 10, 100, 1000 leases
        held = int(ctl.time()[0]) * 1000 + 100 * 3_600_000
        # (An older build without leases — to compare with it — skips them.)
        try:
            ctl.execute_command("RL.LEASEPEEK", "no-such-key", "*", 1)
            has_leases = True
        except redis.ResponseError:  # unknown command
            has_leases = False
        lease_sizes = B.Config.__dataclass_fields__["lease_sizes"].default_factory() \
            if has_leases and any_wanted("lease-") else []
        for size in lease_sizes:
            if not any_wanted(f"lease-{size}-module", f"lease-{size}-lua"):
                continue
            pre = []
            for c in ("module", "lua"):
                for k in range(20):
                    a = []
                    for j in range(size):
                        a += [held, "holder-%d" % j]
                    pre.append(B.enc("ZADD", f"ls:{c}:{size}:{k}", *a))
                    pre.append(B.enc("PEXPIREAT", f"ls:{c}:{size}:{k}", held))
            send(pre)
            for c in ("module", "lua"):
                now = int(time.time() * 1000)
                cmds = []
                for i in range(n // 2):
                    key, tok = f"ls:{c}:{size}:{i % 20}", f"req-{i}"
                    if c == "module":
                        cmds += [B.enc("RL.LEASE", key, now, size + 10, B.LEASE_TTL, "TOKEN", tok),
                                 B.enc("RL.RELEASE", key, now, tok)]
                    else:
                        cmds += [B.enc("EVALSHA", sha["semaphore"], 1, key, tok, now, size + 10, B.LEASE_TTL),
                                 B.enc("ZREM", key, tok)]
                phase(f"lease-{size}-{c}", cmds, requests=n // 2)

        # RL.ALL, 3 clauses (CHECK 2 rules on keys of 40 entries, THROTTLE's
        # steady-state rule, QUOTA DAY in the bench's zone) on 200 triples of
        # one hash tag each, against the three commands pipelined (a request:
        # the three together) and the Lua that calls them and refunds on a
        # refusal; as the timing bench, 1 triple in 20 has a day quota of 1
        # (refused by its last clause after the warm-up's visit); a clock
        # ahead of the server's (no lag in the expiries)
        # (a build without RL.ALL, such as an earlier release: left out)
        try:
            ctl.execute_command("RL.ALLPEEK", 1, "probe:all", "*", "CHECK", 1, 1, 1000)
            has_all = True
        except redis.ResponseError:  # unknown command
            has_all = False
        # The same RL.ALL ending with DETAILS (every rule's state in the
        # reply), on the same keys, the schedule going on after the RL.ALL
        # phase: what DETAILS costs (a build without it: left out)
        try:
            has_details = has_all and len(ctl.execute_command("RL.ALLPEEK", 1, "probe:all", "*", "CHECK", 1, 1,
                                                              1000, "DETAILS")) > 7
        except redis.ResponseError:  # an argument error: no DETAILS
            has_details = False
        if has_all and any_wanted("all-"):
            a_keys, a_every = 200, 20
            a_step = period // a_keys
            a_base = base + B.ALL_CLOCK_AHEAD_MS
            pre = []
            for c in ("all", "singles", "lua"):
                for k in range(a_keys):
                    first = a_base + (k + 1) * a_step
                    a = []
                    for j in range(entries, 0, -1):
                        a += [first - j * period, "q%07d" % j]
                    pre.append(B.enc("ZADD", B.Bench.all_key_names(c, k)[0], *a))
                    pre.append(B.enc("PEXPIRE", B.Bench.all_key_names(c, k)[0], B.MAX_WINDOW))
            send(pre)

            def all_cmds(c, start, count, keys_of=None):
                return [B.all_request(c, B.Bench.all_key_names(keys_of or c, i % a_keys), a_base + (i + 1) * a_step,
                                      B.ALL_REFUSED_DAY_LIMIT if i % a_keys % a_every == 0 else B.ALL_DAY_LIMIT,
                                      sha["all_refund"]) for i in range(start, start + count)]

            for c in ("all", "singles", "lua"):
                send(all_cmds(c, 0, a_keys), per=3 if c == "singles" else 1)
            phase("all-module", all_cmds("all", a_keys, n))
            if has_details:
                phase("all-module-details", all_cmds("details", a_keys + n, n, keys_of="all"))
            phase("all-singles", all_cmds("singles", a_keys, n), per=3, requests=n)
            phase("all-lua", all_cmds("lua", a_keys, n))
        # The Spring bench's request (bench/spring): the starter's RL.ALL of
        # one CHECK clause with three windows (50 / 10 s, 500 / 60 s, 5000 /
        # 1 h) ending with DETAILS, against seed 000's script (its
        # @RateLimiter aspect's EVALSHA, bench/spring's copy) on keys of the
        # same shape: 200 users, each with a request every 1.6 s for the last
        # 160 s (100 members, a listpack: 6 in the 10 s window, 37 in the
        # 60 s one, all in the hour), and one more every 1.6 s.
        if has_details and any_wanted("spring-"):
            s_keys, s_gap, s_members = 200, 1600, 100
            s_rules = (50, 10000, 500, 60000, 5000, 3600000)
            s_base = base - s_members * s_gap
            seed_lua = (B.ROOT / "bench" / "spring" / "src" / "main" / "resources" / "seed000_limit.lua").read_text()
            seed_sha = ctl.script_load(seed_lua)
            pre = []
            for k in range(s_keys):
                for j in range(s_members):
                    now = s_base + j * s_gap + k * (s_gap // s_keys)
                    pre.append(B.enc("RL.ALL", 1, f"spr:{k}", now, "CHECK", 1, *s_rules, "DETAILS"))
                    pre.append(B.enc("EVALSHA", seed_sha, 2, f"sps:{k}", now, *s_rules))
            send(pre)

            def spring_cmds(c, start, count):
                cmds = []
                for i in range(start, start + count):
                    k = i % s_keys
                    now = s_base + (s_members + i // s_keys) * s_gap + k * (s_gap // s_keys)
                    if c == "module":
                        cmds.append(B.enc("RL.ALL", 1, f"spr:{k}", now, "CHECK", 1, *s_rules, "DETAILS"))
                    else:
                        cmds.append(B.enc("EVALSHA", seed_sha, 2, f"sps:{k}", now, *s_rules))
                return cmds

            phase("spring-module-details", spring_cmds("module", 0, n))
            phase("spring-seed-lua", spring_cmds("lua", 0, n))
        conn.close()
        ctl.close()
    finally:
        if replica is not None:
            replica.stop()
        server.stop()

    for name in ("check-module", "check-skiplist-module", "scale-100-admitted", "dayhour-module", "lockcount-module", "throttle-module",
                 "throttle-lua", "quota-module", "lease-1000-module", "all-module", "all-module-details", "all-singles",
                 "all-lua", "spring-module-details"):
        f = out / f"callgrind.out.{name}"
        if f.exists():
            ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=99.5", str(f)],
                                 capture_output=True, text=True, timeout=300).stdout
            (out / f"annotate-{name}.txt").write_text(ann)
    ratios = {}
    for label, num, den in (("RL.CHECK / Lua seed 000 A, listpack keys (40 entries; target 0.35)", "check-module",
                             "check-lua-uuid"),
                            ("RL.CHECK / native commands, listpack keys (target 0.65; 0.75 with a replica)", "check-module",
                             "check-native"),
                            ("RL.CHECK / Lua seed 000 A, skiplist keys (150 entries; target 0.25)",
                             "check-skiplist-module", "check-skiplist-lua-uuid"),
                            ("RL.CHECK / native commands, skiplist keys (target 0.65; 0.75 with a replica)", "check-skiplist-module",
                             "check-skiplist-native"),
                            ("RL.CHECK skiplist / listpack (module)", "check-skiplist-module", "check-module"),
                            ("RL.THROTTLE / its Lua (target 0.25)", "throttle-module", "throttle-lua"),
                            ("RL.THROTTLE / RL.CHECK 1 rule, same schedule (target 0.5)", "throttle-module",
                             "throttle-check-1rule"),
                            ("RL.THROTTLE / RL.CHECK 2 rules (the check workload)", "throttle-module", "check-module"),
                            ("RL.QUOTA / RL.DAYHOUR (target 1.3)", "quota-module", "dayhour-module"),
                            ("RL.QUOTA / Lua seed 001", "quota-module", "dayhour-lua"),
                            ("RL.THROTTLE * / redis-cell CL.THROTTLE 0.2.2 (target 0.90)", "throttle-module-star",
                             "throttle-cell"),
                            ("RL.LEASE + RL.RELEASE / Lua semaphore + ZREM, 10 held (target 0.8)",
                             "lease-10-module", "lease-10-lua"),
                            ("RL.LEASE + RL.RELEASE / Lua semaphore + ZREM, 100 held (target 0.8)",
                             "lease-100-module", "lease-100-lua"),
                            ("RL.LEASE + RL.RELEASE / Lua semaphore + ZREM, 1000 held (target 0.8)",
                             "lease-1000-module", "lease-1000-lua"),
                            ("RL.LEASE + RL.RELEASE 1000 / 10 held (target 1.5)",
                             "lease-1000-module", "lease-10-module"),
                            ("RL.ALL 3 clauses / RL.CHECK + RL.THROTTLE + RL.QUOTA pipelined (target 1.1)",
                             "all-module", "all-singles"),
                            ("RL.ALL 3 clauses / Lua: the 3 commands + REFUND on a refusal (target 0.4)",
                             "all-module", "all-lua"),
                            ("RL.ALL 3 clauses with DETAILS / without (target at most 1.10)",
                             "all-module-details", "all-module"),
                            ("Spring bench: RL.ALL CHECK 3 windows DETAILS / seed 000 EVALSHA (target 0.5)",
                             "spring-module-details", "spring-seed-lua")):
        if num in results and den in results:
            ratios[label] = results[num]["Ir_per_request"] / results[den]["Ir_per_request"]
            print(f"{label}: {ratios[label]:.3f} (instructions per request)")
    results["ratios"] = ratios
    # where RL.CHECK's instructions go, on both shapes (the skiplist case first)
    cols = [(label, out / f"callgrind.out.{name}", results[name]["requests"])
            for label, name in (("skiplist (150)", "check-skiplist-module"), ("listpack (40)", "check-module"))
            if name in results]
    if cols:
        text, data = check_breakdown(cols)
        print()
        print(text)
        (out / "breakdown-check.txt").write_text(text)
        results["check_breakdown"] = data
    # where RL.ALL's instructions go beyond the three commands'
    cols = [(label, out / f"callgrind.out.{name}", results[name]["requests"])
            for label, name in (("RL.ALL", "all-module"), ("3 commands", "all-singles")) if name in results]
    if len(cols) == 2:
        text, data = check_breakdown(cols, title="RL.ALL (CHECK + THROTTLE + QUOTA) and the three commands "
                                                 "pipelined: where the instructions go (Ir per request = one "
                                                 "decision, from the call graph)")
        text += "\n" + all_beyond_singles(data["RL.ALL"], data["3 commands"])
        print()
        print(text)
        (out / "breakdown-all.txt").write_text(text)
        results["all_breakdown"] = data
    (out / "profile.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out}/profile.json, callgrind.out.* and annotate-*.txt")
    shutil.rmtree(tmp, ignore_errors=True)
    return results


if __name__ == "__main__":
    sys.exit(main())
