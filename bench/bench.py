#!/usr/bin/env python3
"""Benchmark of the ratelimit module against the Lua scripts and client flows
it replaces (the seeds in ../shared/seeds/).

One run, one redis-server (started here with the module, on a free loopback
port, stopped on exit). Contestants are interleaved: every round runs one
batch of each contestant, in a rotating order, and each batch is measured on
its own:

* server cost: `CONFIG RESETSTAT` before the batch, `INFO commandstats` after;
  cost per request = total `usec` / requests of the command(s) the contestant
  sends (for a single command that is its `usec_per_call`, computed from the
  integer totals so it keeps more digits than INFO's rounded field; for the
  native and client-flow contestants it is the sum over their commands).
* client throughput: the batch is pipelined over several connections (one
  thread each, pre-encoded RESP, replies checked after the clock stops);
  requests per second of wall time.

RL.CHECK's steady state runs on keys of two shapes in the same rounds: ~40
members (listpack-encoded) and ~150 members (skiplist-encoded, above Redis's
zset-max-listpack-entries of 128); the keys' OBJECT ENCODING is checked after
the prefill and after the run, and printed.

RL.LEASE + RL.RELEASE (a lease taken and given back: one request) runs in
the same rounds against the Lua semaphore services use today
(bench/lua/semaphore.lua, then `ZREM` with the client's id), on keys that
hold 10, 100 and 1,000 other leases all run long.

RL.ALL with three clauses (CHECK, THROTTLE, QUOTA on three keys of one
hash tag: one policy decision) runs in the same rounds against the three
commands pipelined (no atomicity; their server costs summed) and against a
Lua script that calls the three and refunds the admitted ones when one
refuses (bench/lua/all_refund.lua); 1 triple in 20 is refused by its QUOTA.

Every reply is checked against a model of the workload (admitted / rejected,
counter values), so the contestants provably did the same work. A contestant
that errors or disagrees makes the run exit non-zero; a missed target does
not (this is a measurement, not a test).

Usage: bench.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "integration"))
from servers import MODULE, Server  # noqa: E402  (the project's harness)

LUA_DIR = Path(__file__).resolve().parent / "lua"

# --------------------------------------------------------------------------
# Configuration


@dataclass
class Config:
    rounds: int  # measured rounds (a warm-up round comes first, not counted)
    conns: int  # client connections per batch
    batch: int  # requests per pipelined round trip per connection
    # RL.CHECK steady state
    check_keys: int
    check_entries: int  # in-window entries per key (longest window)
    check_calls: int  # requests per contestant per round
    # RL.DAYHOUR / RL.LOCKCOUNT: fresh keys every round, `visits` per key
    counter_keys: int
    counter_visits: int
    # scale series
    scale_sizes: list[int]
    scale_keys: int
    scale_calls: int  # per size and variant per round
    # RL.CHECK steady state on skiplist-encoded keys (more members than
    # zset-max-listpack-entries, 128 by default), in the same rounds: the
    # judged case, two rules (1000/min, 5000/h) on keys of ~150 members
    check_skiplist_keys: int = 1000
    check_skiplist_entries: int = 150
    check_skiplist_calls: int = 0  # 0: check_calls
    memory_sizes: list[int] = field(default_factory=lambda: [100, 1000])
    memory_keys: int = 12  # keys per writer and size (skiplist node sizes are random)
    # RL.THROTTLE steady state runs on the RL.CHECK schedule (check_keys keys,
    # check_calls requests); the contested variant on its own keys:
    contested_keys: int = 200
    contested_calls: int = 2000
    # memory per key at these limits: RL.THROTTLE / Lua GCRA keys per limit, and
    # RL.CHECK keys per limit (0: not measured at that limit; 1M members is ~100 MB)
    key_memory_limits: list[int] = field(default_factory=lambda: [10, 1000, 100000, 1000000])
    key_memory_throttle_keys: int = 500
    key_memory_check_keys: dict = field(default_factory=lambda: {10: 12, 1000: 12, 100000: 2, 1000000: 1})
    # RL.LEASE + RL.RELEASE vs the Lua semaphore: keys per size, each holding
    # `size` leases; requests (acquire + release pairs) per size and round
    lease_sizes: list[int] = field(default_factory=lambda: [10, 100, 1000])
    lease_keys: int = 20
    lease_calls: int = 2000
    # RL.ALL (CHECK + THROTTLE + QUOTA on three keys of one hash tag) vs the
    # three commands pipelined and vs the Lua that calls them and refunds:
    # key triples per contestant, requests per contestant and round (0:
    # check_calls); 1 triple in `all_refuse_every` has a day quota of 1 (refused
    # by its last clause after its first visit of the day)
    all_keys: int = 1000
    all_calls: int = 0
    all_refuse_every: int = 20


# Many short rounds rather than a few long ones: the medians over rounds shrug
# off rounds disturbed by other load on the machine (a preempted server shows
# up as inflated wall-clock usec in commandstats).
FULL = Config(rounds=40, conns=4, batch=100, check_keys=1000, check_entries=40, check_calls=4000,
              counter_keys=400, counter_visits=25, scale_sizes=[10, 100, 1000, 10000, 100000],
              scale_keys=4, scale_calls=2000)
QUICK = Config(rounds=8, conns=4, batch=100, check_keys=1000, check_entries=40, check_calls=2000,
               counter_keys=400, counter_visits=25, scale_sizes=[10, 100, 1000, 10000, 100000],
               scale_keys=2, scale_calls=1000, memory_keys=3, contested_calls=1000,
               key_memory_throttle_keys=100, key_memory_check_keys={10: 3, 1000: 3, 100000: 1, 1000000: 0},
               lease_calls=1000)

RULES = [(1000, 60000), (5000, 3600000)]  # (count, window ms)
MAX_WINDOW = max(w for _, w in RULES)
DAY_LIMIT, HOUR_LIMIT = 1000, 20  # TTLs: computed, to the end of the day and the hour (zone_buckets)
LC_WINDOW, LC_MAX, LC_LOCKTIME = 3600000, 20, 3600000
# RL.THROTTLE steady state: one rule, 1000 at once refilled at 1000 per hour
# (T = 3.6 s); every key is visited each `period` ms (90 s), so each call finds
# a full bucket and is admitted. RL.CHECK on the same schedule: one rule, 1000
# per hour, `check_entries` members in the window (1 trimmed + 1 added a call).
TH_RULE = (1000, 1000, 3600000)  # (burst, count, window ms)
TH_CHECK_RULE = (1000, 3600000)  # (count, window ms)
# Contested: 5 at once, 10 per second (T = 100 ms), each key visited every
# 100 ms with a COST of 1..3 (20 units a second asked, 10 allowed): about a
# third of the requests (half the units) are refused.
TH_CONTESTED_RULE, TH_CONTESTED_PERIOD = (5, 10, 1000), 100
# RL.QUOTA next to RL.DAYHOUR: the same day and hour limits, in this zone.
QUOTA_ZONE = "Asia/Shanghai"
QUOTA_GUARD_MS = 15000  # no dayhour round starts this close to an hour boundary

TARGETS = {
    # RL.CHECK steady state (issue 10), on both encodings: the module against
    # the seed-000 A script (UUID members) and against the native commands'
    # sum (the floor a client reaches without atomicity)
    "check_listpack_vs_lua": 0.30,
    "check_listpack_vs_native": 0.6,
    "check_skiplist_vs_lua": 0.30,
    "check_skiplist_vs_native": 0.6,
    "dayhour_vs_lua": 0.25,
    "lockcount_vs_lua": 0.25,
    "scale_100k_vs_10": 2.0,
    "mem_vs_ts_100": 1.0,
    "mem_vs_ts_1000": 1.0,
    "mem_vs_uuid_100": 0.6,
    "throttle_vs_lua": 0.25,
    "throttle_vs_check": 0.5,
    "throttle_key_bytes": 128,
    "throttle_key_bytes_1m_minus_10": 0,
    "quota_vs_dayhour": 1.5,
    # RL.LEASE + RL.RELEASE (issues 14, 22) against the Lua semaphore + ZREM, at
    # every size; and flat: the cost at 1,000 leases held within 1.5x at 10
    "lease_vs_lua": 0.8,
    "lease_1000_vs_10": 1.5,
    # RL.ALL with CHECK + THROTTLE + QUOTA (issue 16): against the three
    # commands' summed server cost (pipelined, not atomic) and against the
    # Lua script that calls them and refunds on a refusal
    "all_vs_singles": 1.1,
    "all_vs_lua": 0.4,
}
LEASE_TTL = 60_000  # each measured lease's ttl; the held ones never expire
# RL.ALL's clauses (and the single commands' arguments): RL.CHECK's two rules
# on keys of `check_entries` members (1 trimmed + 1 added a visit, as the
# RL.CHECK workload), RL.THROTTLE's steady-state rule (a full bucket at every
# visit), RL.QUOTA per day in QUOTA_ZONE: ALL_DAY_LIMIT (never reached), or 1
# on the refused triples
ALL_DAY_LIMIT, ALL_REFUSED_DAY_LIMIT = 10000, 1
ALL_ZONE_OFFSET_MS = 8 * 3600000  # QUOTA_ZONE (Asia/Shanghai): +08:00 all year since 1991
# RL.ALL's clock starts this far ahead of the server's and runs ahead of it
# (90 ms a request): no caller's lag enters an expiry, so the three
# contestants' expiries are equal whatever time each batch ran at
ALL_CLOCK_AHEAD_MS = 600_000


@dataclass
class CheckShape:
    """One shape of the RL.CHECK steady state: `keys` keys per contestant of
    `entries` members each, spaced `period` ms apart; the clock moves `step`
    ms a request, so each key comes back every `period` ms."""
    name: str  # the encoding it is meant to have, as OBJECT ENCODING names it
    section: str  # where its batches are recorded
    prefix: str  # key prefix
    keys: int
    entries: int
    calls: int  # requests per contestant per round
    period: int = 0
    step: int = 0
    next: dict = field(default_factory=dict)  # contestant -> next request index

    @property
    def encoding(self) -> str:
        return self.name


def check_shapes(cfg: Config) -> list[CheckShape]:
    shapes = [CheckShape("listpack", "check", "ck", cfg.check_keys, cfg.check_entries, cfg.check_calls),
              CheckShape("skiplist", "check_skiplist", "cs", cfg.check_skiplist_keys, cfg.check_skiplist_entries,
                         cfg.check_skiplist_calls or cfg.check_calls)]
    for s in shapes:
        s.period = MAX_WINDOW // s.entries  # per-key time between visits
        s.step = s.period // s.keys  # global clock step per request
        assert s.step * s.keys == s.period and s.period * s.entries == MAX_WINDOW, s
        s.next = {c: 0 for c in ("module", "lua-uuid", "lua-ts", "native")}
    return shapes


def uuid_strings(n: int) -> list[str]:
    """`n` random version-4 UUIDs as strings (str(uuid.uuid4()) is slow for
    the hundreds of thousands of members a prefill needs)."""
    h = os.urandom(16 * n).hex()
    out = []
    for i in range(0, 32 * n, 32):
        x = h[i:i + 32]
        out.append(f"{x[:8]}-{x[8:12]}-4{x[13:16]}-{'89ab'[int(x[16], 16) & 3]}{x[17:20]}-{x[20:]}")
    return out


def fmt_encodings(by_contestant: dict) -> str:
    """{contestant: {encoding: keys}} -> 'module listpack (20), ...'."""
    return ", ".join(f"{c} " + "/".join(f"{e} ({n})" for e, n in by.items()) for c, by in by_contestant.items())


class BenchError(Exception):
    """A contestant errored or answered differently from the workload model."""


# --------------------------------------------------------------------------
# RESP over raw sockets: pre-encoded pipelines, replies parsed after timing


def enc(*args) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = b"%d" % a
        elif isinstance(a, str):
            a = a.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class RespError(str):
    """An error reply (kept as a value so a batch can be checked as a whole)."""


def parse_one(buf: bytes, pos: int):
    end = buf.index(b"\r\n", pos)
    kind = buf[pos]
    line = buf[pos + 1:end]
    pos = end + 2
    if kind == 58:  # ':'
        return int(line), pos
    if kind == 36:  # '$'
        n = int(line)
        if n < 0:
            return None, pos
        return buf[pos:pos + n], pos + n + 2
    if kind == 42:  # '*'
        n = int(line)
        if n < 0:
            return None, pos
        out = []
        for _ in range(n):
            v, pos = parse_one(buf, pos)
            out.append(v)
        return out, pos
    if kind == 43:  # '+'
        return bytes(line), pos
    if kind == 45:  # '-'
        return RespError(line.decode(errors="replace")), pos
    raise BenchError(f"unexpected RESP type byte {kind!r} at {pos}")


def parse_all(buf: bytes, n: int) -> list:
    out, pos = [], 0
    for _ in range(n):
        v, pos = parse_one(buf, pos)
        out.append(v)
    if pos != len(buf):
        raise BenchError(f"{len(buf) - pos} unparsed reply bytes after {n} replies")
    return out


def find_error(v):
    if isinstance(v, RespError):
        return v
    if isinstance(v, list):
        for x in v:
            e = find_error(x)
            if e is not None:
                return e
    return None


_TOKEN = b"rl-bench-end-of-pipeline-5e1d"
_SENTINEL_CMD = enc("ECHO", _TOKEN)
_SENTINEL_REPLY = b"$%d\r\n%s\r\n" % (len(_TOKEN), _TOKEN)


class Conn:
    """One client connection; `roundtrip` sends a pipeline and returns the raw
    replies (an ECHO of a token marks the end of the pipeline)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def roundtrip(self, payload: bytes) -> bytes:
        self.sock.sendall(payload + _SENTINEL_CMD)
        buf = bytearray()
        tail = _SENTINEL_REPLY
        n = len(tail)
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise BenchError("server closed the connection")
            buf += chunk
            if len(buf) >= n and buf[-n:] == tail:
                return bytes(buf[:-n])

    def close(self):
        self.sock.close()


def run_parallel(jobs) -> tuple[float, list]:
    """Runs one callable per connection in threads; returns (wall seconds, results)."""
    results: list = [None] * len(jobs)
    errors: list = []

    def wrap(i, job):
        try:
            results[i] = job()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i, j)) for i, j in enumerate(jobs)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return wall, results


def pipelined_job(conn: Conn, payloads: list[bytes]):
    def job():
        return [conn.roundtrip(p) for p in payloads]
    return job


def pipelined_jobs(conns: list[Conn], per_conn: list[list[bytes]], batch: int) -> tuple[list, list[list[int]]]:
    """One job per connection sending its commands `batch` per round trip, and
    the number of replies each round trip brings."""
    jobs, counts = [], []
    for conn, cmds in zip(conns, per_conn):
        parts = chunks(cmds, batch)
        jobs.append(pipelined_job(conn, [b"".join(p) for p in parts]))
        counts.append([len(p) for p in parts])
    return jobs, counts


def chunks(seq, n):
    return [seq[i:i + n] for i in range(0, len(seq), n)]


# --------------------------------------------------------------------------
# Measurement of one batch


def command_stats(ctl) -> dict:
    raw = ctl.info("commandstats")
    out = {}
    for k, v in raw.items():
        if k.startswith("cmdstat_"):
            out[k[len("cmdstat_"):]] = {"calls": int(v["calls"]), "usec": int(v["usec"]),
                                       "failed_calls": int(v.get("failed_calls", 0)),
                                       "rejected_calls": int(v.get("rejected_calls", 0))}
    return out


@dataclass
class Batch:
    contestant: str
    requests: int
    wall_s: float
    stats: dict  # command -> {calls, usec, ...}
    counted: list[str]  # commands whose usec is the contestant's server cost
    round: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def server_usec(self) -> float:
        return sum(self.stats.get(c, {}).get("usec", 0) for c in self.counted)

    @property
    def usec_per_request(self) -> float:
        return self.server_usec / self.requests if self.requests else float("nan")

    @property
    def ops(self) -> float:
        return self.requests / self.wall_s if self.wall_s > 0 else float("nan")

    def to_json(self) -> dict:
        return {"contestant": self.contestant, "round": self.round, "requests": self.requests,
                "wall_s": self.wall_s, "ops_per_s": self.ops, "server_usec": self.server_usec,
                "usec_per_request": self.usec_per_request, "counted": self.counted,
                "commandstats": self.stats, **self.extra}


def main_thread_cpu(ctl) -> float:
    """Seconds of CPU the server's main thread has used (user + sys); unlike
    commandstats' wall-clock usec it does not grow while the server is
    preempted. It includes reading, parsing and replying."""
    cpu = ctl.info("cpu")
    if "used_cpu_user_main_thread" in cpu:
        return float(cpu["used_cpu_user_main_thread"]) + float(cpu["used_cpu_sys_main_thread"])
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def measure(ctl, contestant: str, requests: int, counted: list[str], jobs) -> tuple[Batch, list]:
    ctl.config_resetstat()
    cpu0 = main_thread_cpu(ctl)
    wall, results = run_parallel(jobs)
    cpu1 = main_thread_cpu(ctl)
    stats = command_stats(ctl)
    for c in counted:
        st = stats.get(c)
        if st and (st["failed_calls"] or st["rejected_calls"]):
            raise BenchError(f"{contestant}: {c} had {st['failed_calls']} failed and "
                             f"{st['rejected_calls']} rejected calls")
    b = Batch(contestant, requests, wall, stats, counted)
    b.extra["server_cpu_usec_per_request"] = (cpu1 - cpu0) * 1e6 / requests
    return b, results


def check_count(batch: Batch, command: str, expected: int):
    got = batch.stats.get(command, {}).get("calls", 0)
    if got != expected:
        raise BenchError(f"{batch.contestant}: expected {expected} {command} calls, server saw {got}")


# --------------------------------------------------------------------------
# The benchmark


class Bench:
    def __init__(self, cfg: Config, server: Server):
        self.cfg = cfg
        self.server = server
        self.ctl = server.client()
        self.conns = [Conn(server.port) for _ in range(cfg.conns)]
        self.sha = {name: self.ctl.script_load((LUA_DIR / f"{name}.lua").read_text())
                    for name in ("check_uuid", "check_timestamp", "dayhour", "lockcount", "gcra",
                                 "semaphore", "all_refund")}
        self.batches: dict[str, list[Batch]] = {}
        self.errors: list[str] = []
        self.notes: dict = {}

    def record(self, section: str, b: Batch, rnd: int, measured: bool):
        b.round = rnd
        b.extra["warmup"] = not measured
        self.batches.setdefault(section, []).append(b)

    def fail(self, msg: str):
        self.errors.append(msg)
        print(f"ERROR: {msg}", file=sys.stderr)

    # ---------------- RL.CHECK, steady state --------------------------------
    #
    # Two shapes of the same steady state, in the same interleaved rounds:
    # keys of `check_entries` members (40: a listpack, under Redis's
    # zset-max-listpack-entries of 128) and keys of `check_skiplist_entries`
    # (150: a skiplist). Each key's members are spaced `period` ms apart, as
    # if the key were visited every `period` ms, and each call comes one
    # `period` after the key's previous one: one member leaves the longest
    # window (trim) and one is added, so the shape stays the same all run long.

    CHECK_CONTESTANTS = ("module", "lua-uuid", "lua-ts", "native")
    CHECK_PREFIXES = {"module": "mod:", "lua-uuid": "lua:", "lua-ts": "ts:", "native": "nat:"}

    def check_key(self, shape: CheckShape, c: str, k: int) -> str:
        return f"{shape.prefix}:{self.CHECK_PREFIXES[c]}{k}"

    def check_setup(self):
        cfg = self.cfg
        self.base = int(self.ctl.time()[0]) * 1000
        self.check_shapes = check_shapes(cfg)
        lp = self.check_shapes[0]
        # the RL.THROTTLE workload runs on the listpack shape's schedule
        self.period, self.step = lp.period, lp.step
        try:
            lp_max = int(self.ctl.config_get("zset-max-listpack-entries").get("zset-max-listpack-entries"))
        except (TypeError, ValueError):
            lp_max = int(self.ctl.config_get("zset-max-ziplist-entries").get("zset-max-ziplist-entries"))
        self.notes["zset_max_listpack_entries"] = lp_max
        rules_tail = b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in (b"%d" % v for v in flat_rules(RULES)))
        check_head = b"*%d\r\n$8\r\nRL.CHECK\r\n" % (3 + 2 * len(RULES))
        for shape in self.check_shapes:
            t0 = time.time()
            pipe_lines = {c: [] for c in self.CHECK_CONTESTANTS}
            members = iter(uuid_strings(2 * shape.keys * shape.entries))
            for k in range(shape.keys):
                first = self.base + (k + 1) * shape.step
                scores = [first - j * shape.period for j in range(shape.entries, 0, -1)]
                key = self.check_key(shape, "module", k).encode()
                key_bulk = b"$%d\r\n%s\r\n" % (len(key), key)
                for s in scores:  # enc("RL.CHECK", key, s, *flat_rules(RULES)), encoded faster
                    pipe_lines["module"].append(b"%s%s$%d\r\n%d\r\n%s" % (check_head, key_bulk, len(b"%d" % s), s,
                                                                          rules_tail))
                for c in ("lua-uuid", "native"):
                    args = []
                    for s in scores:
                        args += [s, next(members)]
                    pipe_lines[c].append(enc("ZADD", self.check_key(shape, c, k), *args))
                    pipe_lines[c].append(enc("PEXPIRE", self.check_key(shape, c, k), MAX_WINDOW))
                args = []
                for s in scores:
                    args += [s, s]
                pipe_lines["lua-ts"].append(enc("ZADD", self.check_key(shape, "lua-ts", k), *args))
                pipe_lines["lua-ts"].append(enc("PEXPIRE", self.check_key(shape, "lua-ts", k), MAX_WINDOW))
            # the module's keys are written by RL.CHECK itself (its own member
            # names); spread over the connections, the server does the work
            per_conn: list[list[bytes]] = [[] for _ in self.conns]
            for i, line in enumerate(pipe_lines.pop("module")):
                per_conn[(i // shape.entries) % len(self.conns)].append(line)
            for i, lines in enumerate(pipe_lines.values()):
                per_conn[i % len(self.conns)].extend(lines)
            jobs, counts = pipelined_jobs(self.conns, per_conn, 2000)
            _, results = run_parallel(jobs)
            # Replies hold integers only, so an error reply is the only line
            # that starts with '-': parse a batch only when one is there. A
            # refused RL.CHECK adds no member: the ZCARD check below sees it.
            for bufs, cnts in zip(results, counts):
                for buf, cnt in zip(bufs, cnts):
                    if buf.startswith(b"-") or b"\r\n-" in buf:
                        for r in parse_all(buf, cnt):
                            if find_error(r) is not None:
                                raise BenchError(f"prefill of RL.CHECK {shape.name} keys: {find_error(r)}")
            for c in self.CHECK_CONTESTANTS:
                pipe = self.ctl.pipeline(transaction=False)
                for k in range(shape.keys):
                    pipe.zcard(self.check_key(shape, c, k))
                short = [k for k, n in enumerate(pipe.execute()) if n != shape.entries]
                if short:
                    raise BenchError(f"prefill of RL.CHECK {shape.name} keys: {len(short)} {c} keys do not hold "
                                     f"{shape.entries} members (first: {self.check_key(shape, c, short[0])})")
            self.notes.setdefault("check_encoding_after_prefill", {})[shape.name] = self.check_encodings(shape)
            print(f"  RL.CHECK {shape.name} keys: {shape.keys} × {shape.entries} entries per contestant, "
                  f"prefilled in {time.time() - t0:.1f} s; OBJECT ENCODING "
                  f"{fmt_encodings(self.notes['check_encoding_after_prefill'][shape.name])}", flush=True)

    def check_encodings(self, shape: CheckShape) -> dict:
        """OBJECT ENCODING of a sample of each contestant's keys: {contestant:
        {encoding: keys}}."""
        out = {}
        sample = range(0, shape.keys, max(1, shape.keys // 50))
        for c in self.CHECK_CONTESTANTS:
            pipe = self.ctl.pipeline(transaction=False)
            for k in sample:
                pipe.object("encoding", self.check_key(shape, c, k))
            seen: dict = {}
            for e in pipe.execute():
                e = e.decode() if isinstance(e, bytes) else str(e)
                seen[e] = seen.get(e, 0) + 1
            out[c] = seen
        return out

    def check_round(self, rnd: int, measured: bool):
        # both shapes in one rotation: each contestant's listpack and skiplist
        # batches side by side, the order rotated every round
        order = [(shape, c) for c in self.CHECK_CONTESTANTS for shape in self.check_shapes]
        for shape, c in rotate(order, rnd):
            self.check_batch(shape, c, rnd, measured)

    def check_batch(self, shape: CheckShape, c: str, rnd: int, measured: bool):
        cfg = self.cfg
        i0 = shape.next[c]
        n = shape.calls
        shape.next[c] += n
        per_conn: list[list[bytes]] = [[] for _ in self.conns]
        for i in range(i0, i0 + n):
            k = i % shape.keys
            now = self.base + (i + 1) * shape.step
            conn = k % len(self.conns)
            key = self.check_key(shape, c, k)
            if c == "module":
                cmd = enc("RL.CHECK", key, now, *flat_rules(RULES))
            elif c == "lua-uuid":
                cmd = enc("EVALSHA", self.sha["check_uuid"], 1, key, str(uuid.uuid4()), now, *flat_rules(RULES))
            elif c == "lua-ts":
                cmd = enc("EVALSHA", self.sha["check_timestamp"], 1, key, now, *flat_rules(RULES))
            else:
                cmd = b"".join(
                    [enc("ZCOUNT", key, now - w, now) for _, w in RULES]
                    + [enc("ZADD", key, now, str(uuid.uuid4())),
                       enc("PEXPIRE", key, MAX_WINDOW),
                       enc("ZREMRANGEBYSCORE", key, 0, now - MAX_WINDOW)])
            per_conn[conn].append(cmd)
        per_req = len(RULES) + 3 if c == "native" else 1
        jobs, counts = [], []
        for conn, cmds in zip(self.conns, per_conn):
            parts = chunks(cmds, cfg.batch)
            jobs.append(pipelined_job(conn, [b"".join(p) for p in parts]))
            counts.append([len(p) * per_req for p in parts])
        counted = {"module": ["rl.check"], "lua-uuid": ["evalsha"], "lua-ts": ["evalsha"],
                   "native": ["zcount", "zadd", "pexpire", "zremrangebyscore"]}[c]
        b, results = measure(self.ctl, c, n, counted, jobs)
        # Every request must be admitted (limits far above the in-window counts).
        admitted = trimmed = 0
        for bufs, cnts in zip(results, counts):
            for buf, cnt in zip(bufs, cnts):
                replies = parse_all(buf, cnt)
                for r in replies:
                    e = find_error(r)
                    if e is not None:
                        raise BenchError(f"RL.CHECK ({shape.name}) contestant {c}: {e}")
                if c == "module":
                    admitted += sum(1 for r in replies if r[0] == 0)
                elif c in ("lua-uuid", "lua-ts"):
                    admitted += sum(1 for r in replies if r is None)
                else:
                    for j in range(0, len(replies), per_req):
                        zadd, trim = replies[j + len(RULES)], replies[j + len(RULES) + 2]
                        admitted += zadd == 1
                        trimmed += trim
        if admitted != n:
            self.fail(f"RL.CHECK ({shape.name}) contestant {c}: {n - admitted} of {n} requests not admitted")
        if c == "native":
            b.extra["trimmed_per_request"] = trimmed / n
            if trimmed < n * 0.9:
                self.fail(f"RL.CHECK ({shape.name}) native: only {trimmed} members trimmed in {n} requests")
        if c == "module":
            check_count(b, "rl.check", n)
        elif c.startswith("lua"):
            check_count(b, "evalsha", n)
        b.extra["shape"] = shape.name
        self.record(shape.section, b, rnd, measured)

    def check_shape(self):
        """Members per key and OBJECT ENCODING after the run (the steady state
        keeps each shape's entries, and so its encoding)."""
        shapes, encodings = {}, {}
        for shape in self.check_shapes:
            sizes_by = {}
            for c in self.CHECK_CONTESTANTS:
                sample = range(0, shape.keys, max(1, shape.keys // 50))
                pipe = self.ctl.pipeline(transaction=False)
                for k in sample:
                    pipe.zcard(self.check_key(shape, c, k))
                sizes = pipe.execute()
                sizes_by[c] = {"min": min(sizes), "max": max(sizes), "mean": sum(sizes) / len(sizes)}
                # The module trims only when its expiry moves on the key's grid
                # (an eighth of the longest window): up to an eighth more
                # members, and a step's worth of calls, older than the window.
                extra = shape.entries // 8 + 2 if c == "module" else 1
                if min(sizes) < shape.entries - 1 or max(sizes) > shape.entries + extra:
                    self.fail(f"RL.CHECK ({shape.name}) {c}: keys hold {min(sizes)}..{max(sizes)} members, "
                              f"expected about {shape.entries}")
            shapes[shape.name] = sizes_by
            enc_after = self.check_encodings(shape)
            encodings[shape.name] = enc_after
            for when, seen in (("after the prefill", self.notes["check_encoding_after_prefill"][shape.name]),
                               ("after the run", enc_after)):
                for c, by in seen.items():
                    if set(by) != {shape.encoding}:
                        self.fail(f"RL.CHECK ({shape.name}) {c}: OBJECT ENCODING {by} {when}, "
                                  f"expected {shape.encoding} (zset-max-listpack-entries "
                                  f"{self.notes.get('zset_max_listpack_entries')})")
            print(f"  RL.CHECK {shape.name} keys after the run: "
                  + ", ".join(f"{c} {v['min']}..{v['max']} members" for c, v in sizes_by.items())
                  + f"; OBJECT ENCODING {fmt_encodings(enc_after)}", flush=True)
        self.notes["check_shape_after_run"] = shapes
        self.notes["check_encoding_after_run"] = encodings

    # ---------------- RL.THROTTLE, steady state and contested -----------------

    def throttle_setup(self):
        """The RL.CHECK contestant's keys hold `check_entries` members as in
        check_setup (ZADD, names shaped like the module's: 8 characters, a
        letter first; its own calls replace them within 40 visits). The GCRA
        keys start empty: the warm-up round's first visit creates them."""
        cfg = self.cfg
        self.th_next = {c: 0 for c in ("module", "lua", "check")}
        lines = []
        for k in range(cfg.check_keys):
            first = self.base + (k + 1) * self.step
            args = []
            for j in range(cfg.check_entries, 0, -1):
                args += [first - j * self.period, "q%07d" % j]
            lines.append(enc("ZADD", f"th:ck:{k}", *args))
            lines.append(enc("PEXPIRE", f"th:ck:{k}", MAX_WINDOW))
        for part in chunks(lines, 2000):
            for r in parse_all(self.conns[0].roundtrip(b"".join(part)), len(part)):
                if find_error(r) is not None:
                    raise BenchError(f"prefill of RL.THROTTLE's RL.CHECK keys: {find_error(r)}")
        # the contested variant: a model of every key's TAT (ns), None = full
        self.tc_base = self.base + 7 * 86400000  # its own clock, a week ahead
        self.tc_next = {c: 0 for c in ("module", "lua")}
        self.tc_model = {c: [None] * cfg.contested_keys for c in ("module", "lua")}

    def throttle_round(self, rnd: int, measured: bool):
        """One rule on `check_keys` keys, each visited every `period` ms: every
        call is admitted; RL.THROTTLE, the same GCRA in Lua (bench/lua/gcra.lua)
        and RL.CHECK (one rule, 1000 per hour) on the same schedule."""
        cfg = self.cfg
        burst, count, window = TH_RULE
        expected = gcra_reply(None, 0, TH_RULE, 1)[0]  # a full bucket every visit
        for c in rotate(["module", "lua", "check"], rnd):
            i0 = self.th_next[c]
            n = cfg.check_calls
            self.th_next[c] += n
            per_conn: list[list[bytes]] = [[] for _ in self.conns]
            for i in range(i0, i0 + n):
                k = i % cfg.check_keys
                now = self.base + (i + 1) * self.step
                if c == "module":
                    cmd = enc("RL.THROTTLE", f"th:mod:{k}", now, burst, count, window)
                elif c == "lua":
                    cmd = enc("EVALSHA", self.sha["gcra"], 1, f"th:lua:{k}", now, burst, count, window)
                else:
                    cmd = enc("RL.CHECK", f"th:ck:{k}", now, *TH_CHECK_RULE)
                per_conn[k % len(self.conns)].append(cmd)
            jobs, counts = pipelined_jobs(self.conns, per_conn, cfg.batch)
            counted = {"module": ["rl.throttle"], "lua": ["evalsha"], "check": ["rl.check"]}[c]
            b, results = measure(self.ctl, c, n, counted, jobs)
            check_count(b, counted[0], n)
            admitted = 0
            for bufs, cnts in zip(results, counts):
                for buf, cnt in zip(bufs, cnts):
                    for r in parse_all(buf, cnt):
                        if find_error(r) is not None:
                            raise BenchError(f"RL.THROTTLE contestant {c}: {find_error(r)}")
                        if c != "check" and r != expected:
                            self.fail(f"RL.THROTTLE {c}: replied {r}, expected {expected}")
                            raise BenchError("RL.THROTTLE contestants disagree")
                        admitted += r[0] == 0
            b.extra["admitted"] = admitted
            if admitted != n:
                self.fail(f"RL.THROTTLE contestant {c}: {n - admitted} of {n} requests not admitted")
            self.record("throttle", b, rnd, measured)

    def throttle_contested_round(self, rnd: int, measured: bool):
        """The decisions: `contested_keys` keys visited every 100 ms with COST
        1..3 against 5 at once, 10 per second; each reply of RL.THROTTLE and of
        the Lua GCRA is checked against an exact-integer model of SPEC.md's
        arithmetic, and their admitted counts are compared."""
        cfg = self.cfg
        nk = cfg.contested_keys
        for c in rotate(["module", "lua"], rnd):
            i0 = self.tc_next[c]
            n = cfg.contested_calls
            self.tc_next[c] += n
            model = self.tc_model[c]
            per_conn: list[list[bytes]] = [[] for _ in self.conns]
            want: list[list] = [[] for _ in self.conns]
            for i in range(i0, i0 + n):
                k = i % nk
                now = self.tc_base + (i // nk) * TH_CONTESTED_PERIOD
                cost = 1 + (i * 7 + k) % 3
                reply, model[k] = gcra_reply(model[k], now, TH_CONTESTED_RULE, cost)
                if c == "module":
                    cmd = enc("RL.THROTTLE", f"tc:mod:{k}", now, *TH_CONTESTED_RULE, "COST", cost)
                else:
                    cmd = enc("EVALSHA", self.sha["gcra"], 1, f"tc:lua:{k}", now, *TH_CONTESTED_RULE, cost)
                per_conn[k % len(self.conns)].append(cmd)
                want[k % len(self.conns)].append(reply)
            jobs, counts = pipelined_jobs(self.conns, per_conn, cfg.batch)
            counted = ["rl.throttle" if c == "module" else "evalsha"]
            b, results = measure(self.ctl, c, n, counted, jobs)
            check_count(b, counted[0], n)
            admitted = 0
            for bufs, cnts, exp in zip(results, counts, want):
                got = [r for buf, cnt in zip(bufs, cnts) for r in parse_all(buf, cnt)]
                for r, e in zip(got, exp):
                    if find_error(r) is not None:
                        raise BenchError(f"RL.THROTTLE contested {c}: {find_error(r)}")
                    if r != e:
                        self.fail(f"RL.THROTTLE contested {c}: replied {r}, the model says {e}")
                        raise BenchError("RL.THROTTLE contested: a contestant disagrees with the model")
                    admitted += r[0] == 0
            b.extra["admitted"] = admitted
            self.record("throttle_contested", b, rnd, measured)

    def throttle_agreement(self):
        """After the run: the admitted counts of RL.THROTTLE and its Lua, per
        workload, and the state they left (the Lua's TAT in us x 1000 is the
        module's in ns; the same absolute expiry) on a sample of keys."""
        out = {}
        for sec in ("throttle", "throttle_contested"):
            adm = {}
            for b in self.batches.get(sec, []):
                adm[b.contestant] = adm.get(b.contestant, 0) + b.extra["admitted"]
            out[sec] = adm
            if adm.get("module") != adm.get("lua"):
                self.fail(f"{sec}: RL.THROTTLE admitted {adm.get('module')}, its Lua {adm.get('lua')}")
        state_diffs = 0
        samples = 0
        for prefix, nkeys, rule in (("th", self.cfg.check_keys, TH_RULE),
                                    ("tc", self.cfg.contested_keys, TH_CONTESTED_RULE)):
            window = rule[2]
            for k in range(0, nkeys, max(1, nkeys // 50)):
                m, lu = f"{prefix}:mod:{k}", f"{prefix}:lua:{k}"
                tm, tl = self.ctl.hget(m, str(window)), self.ctl.hget(lu, str(window))
                em, el = (self.ctl.execute_command("PEXPIRETIME", x) for x in (m, lu))
                samples += 1
                # The module's expiry: the Lua's (when every bucket is full
                # again) or a later point of the key's grid, an eighth of the
                # bucket's depth at most (SPEC "Expiries on a grid").
                step = max(1, bucket_depth_ms(rule) // 8)
                if tm is None or tl is None or int(tm) != int(tl) * 1000 or not el <= em < el + step:
                    state_diffs += 1
                    if state_diffs <= 3:
                        self.fail(f"RL.THROTTLE vs Lua state differs: {m}={tm} (expires {em}), "
                                  f"{lu}={tl} us (expires {el})")
        out["state_keys_compared"] = samples
        out["state_keys_differing"] = state_diffs
        self.notes["throttle_agreement"] = out

    # ---------------- RL.DAYHOUR ---------------------------------------------

    @staticmethod
    def dayhour_expected(v: int) -> list[int]:
        # Visit v (0-based) of a fresh pair: admitted while the hour counter is
        # below its limit; afterwards the hour refuses and the day stays.
        if v < HOUR_LIMIT:
            return [v + 1, v + 1]
        return [HOUR_LIMIT, HOUR_LIMIT + 1]

    def counter_schedule(self):
        """(visit, key index, connection) in sending order: per connection,
        each pipeline of `batch` requests names distinct keys."""
        cfg = self.cfg
        per_conn = [[] for _ in self.conns]
        for v in range(cfg.counter_visits):
            for k in range(cfg.counter_keys):
                per_conn[k % len(self.conns)].append((v, k))
        return per_conn

    def dayhour_round(self, rnd: int, measured: bool):
        """Seed 001's day and hour counters, three ways: RL.DAYHOUR and the
        seed's Lua with the keys and TTLs the client computes (the date and
        the hour in QUOTA_ZONE in the key names; TTL = ms until that day or
        hour ends, computed when the batch is encoded), and RL.QUOTA (DAY +
        HOUR in the same zone, now `*`: the server computes the buckets)."""
        cfg = self.cfg
        zone_wait_for_hour(self)  # a round within one hour: the replies follow the model
        sched = self.counter_schedule()
        n = cfg.counter_keys * cfg.counter_visits
        for c in rotate(["module", "lua", "quota"], rnd):
            tag = {"module": "mod", "lua": "lua", "quota": "qt"}[c]
            zb = zone_buckets(int(time.time() * 1000))
            day_ttl, hour_ttl = zb["day_end"] - zb["now"], zb["hour_end"] - zb["now"]
            jobs, plans = [], []
            for conn, items in zip(self.conns, sched):
                cmds = []
                for v, k in items:
                    day, hour = f"dh:{tag}:{rnd}:{k}:{zb['day']}", f"dh:{tag}:{rnd}:{k}:{zb['hour']}"
                    if c == "module":
                        cmds.append(enc("RL.DAYHOUR", day, hour, DAY_LIMIT, HOUR_LIMIT, day_ttl, hour_ttl))
                    elif c == "lua":
                        cmds.append(enc("EVALSHA", self.sha["dayhour"], 2, day, hour, DAY_LIMIT, HOUR_LIMIT,
                                        day_ttl, hour_ttl))
                    else:
                        cmds.append(enc("RL.QUOTA", f"qt:{rnd}:{k}", "*", QUOTA_ZONE, "DAY", DAY_LIMIT,
                                        "HOUR", HOUR_LIMIT))
                parts = chunks(cmds, cfg.batch)
                jobs.append(pipelined_job(conn, [b"".join(p) for p in parts]))
                plans.append(chunks(items, cfg.batch))
            counted = {"module": ["rl.dayhour"], "lua": ["evalsha"], "quota": ["rl.quota"]}[c]
            b, results = measure(self.ctl, c, n, counted, jobs)
            check_count(b, counted[0], n)
            admitted = 0
            for bufs, plan in zip(results, plans):
                for buf, items in zip(bufs, plan):
                    for r, (v, _k) in zip(parse_all(buf, len(items)), items):
                        if find_error(r) is not None:
                            raise BenchError(f"RL.DAYHOUR contestant {c}: {find_error(r)}")
                        ok = quota_reply_ok(r, v) if c == "quota" else r == self.dayhour_expected(v)
                        if not ok:
                            want = "RL.QUOTA's reply for" if c == "quota" else self.dayhour_expected(v)
                            self.fail(f"RL.DAYHOUR {c}: visit {v} replied {r}, expected {want} visit {v}")
                            raise BenchError("RL.DAYHOUR contestants disagree")
                        admitted += (r[0] == 0) if c == "quota" else (r[0] <= DAY_LIMIT and r[1] <= HOUR_LIMIT)
            if admitted != cfg.counter_keys * HOUR_LIMIT:
                self.fail(f"RL.DAYHOUR {c}: {admitted} admitted, expected {cfg.counter_keys * HOUR_LIMIT}")
            b.extra.update({"admitted": admitted, "day_ttl": day_ttl, "hour_ttl": hour_ttl})
            if c == "quota":
                # the server's buckets are the ones the client named its keys after
                got = {f.decode(): int(x) for f, x in self.ctl.hgetall(f"qt:{rnd}:0").items()}
                want = {zb["day_field"]: HOUR_LIMIT, zb["hour_field"]: HOUR_LIMIT}
                if got != want:
                    self.fail(f"RL.QUOTA: key qt:{rnd}:0 holds {got}, expected {want}")
                expires = self.ctl.execute_command("PEXPIRETIME", f"qt:{rnd}:0")
                if expires != zb["day_end"]:  # the longest current bucket's end (now `*`: no lag)
                    self.fail(f"RL.QUOTA: key qt:{rnd}:0 expires at {expires}, expected {zb['day_end']}")
            self.record("dayhour", b, rnd, measured)

    # ---------------- RL.LOCKCOUNT -------------------------------------------

    @staticmethod
    def lockcount_expected(v: int) -> list[int]:
        if v < LC_MAX:
            return [0, v + 1]  # admitted, counter after the increment
        if v == LC_MAX:
            return [1, LC_MAX]  # trips: lock set, counter deleted
        return [1, 0]  # locked

    def lockcount_round(self, rnd: int, measured: bool):
        cfg = self.cfg
        sched = self.counter_schedule()
        n = cfg.counter_keys * cfg.counter_visits
        for c in rotate(["module", "lua", "client"], rnd):
            tag = {"module": "mod", "lua": "lua", "client": "cli"}[c]
            names = lambda k: (f"lc:{tag}:{rnd}:{k}:lock", f"lc:{tag}:{rnd}:{k}:count")  # noqa: E731
            plans = [chunks(items, cfg.batch) for items in sched]
            if c == "client":
                jobs = [self.client_flow_job(conn, plan, names) for conn, plan in zip(self.conns, plans)]
                counted = ["get", "set", "incr", "del"]
            else:
                jobs = []
                for conn, plan in zip(self.conns, plans):
                    payloads = []
                    for items in plan:
                        cmds = []
                        for _v, k in items:
                            lock, count = names(k)
                            if c == "module":
                                cmds.append(enc("RL.LOCKCOUNT", lock, count, LC_WINDOW, LC_MAX, LC_LOCKTIME))
                            else:
                                cmds.append(enc("EVALSHA", self.sha["lockcount"], 2, lock, count, LC_WINDOW,
                                                LC_MAX, LC_LOCKTIME))
                        payloads.append(b"".join(cmds))
                    jobs.append(pipelined_job(conn, payloads))
                counted = ["rl.lockcount" if c == "module" else "evalsha"]
            b, results = measure(self.ctl, c, n, counted, jobs)
            admitted = 0
            for res, plan in zip(results, plans):
                for out, items in zip(res, plan):
                    replies = out if c == "client" else parse_all(out, len(items))
                    for r, (v, _k) in zip(replies, items):
                        if find_error(r) is not None:
                            raise BenchError(f"RL.LOCKCOUNT contestant {c}: {find_error(r)}")
                        if r[:2] != self.lockcount_expected(v):
                            self.fail(f"RL.LOCKCOUNT {c}: visit {v} replied {r}, expected "
                                      f"{self.lockcount_expected(v)}")
                            raise BenchError("RL.LOCKCOUNT contestants disagree")
                        admitted += r[0] == 0
            b.extra["admitted"] = admitted
            if c == "client":
                b.extra["commands_per_request"] = sum(b.stats.get(x, {}).get("calls", 0) for x in counted) / n
            self.record("lockcount", b, rnd, measured)

    @staticmethod
    def client_flow_job(conn: Conn, plan, names):
        """Seed 004's interceptor: GET lock; if none, GET count; then SET, INCR,
        or SET lock + DEL count, each step a round trip. Requests of a pipeline
        name distinct keys, so running them step by step side by side is the
        same as running them one after another."""

        def job():
            out = []
            for items in plan:
                keys = [names(k) for _v, k in items]
                locks = parse_all(conn.roundtrip(b"".join(enc("GET", lk) for lk, _ in keys)), len(keys))
                free = [i for i, lv in enumerate(locks) if lv is None]
                counts = parse_all(conn.roundtrip(b"".join(enc("GET", keys[i][1]) for i in free)), len(free))
                replies: list = [[1, 0] for _ in items]
                writes, nwrites = [], 0
                for i, cv in zip(free, counts):
                    lk, ck = keys[i]
                    if isinstance(cv, RespError):
                        replies[i] = cv
                    elif cv is None:
                        writes.append(enc("SET", ck, 1, "PX", LC_WINDOW))
                        nwrites += 1
                        replies[i] = [0, 1]
                    elif int(cv) < LC_MAX:
                        writes.append(enc("INCR", ck))
                        nwrites += 1
                        replies[i] = [0, None]  # filled from the INCR reply
                    else:
                        writes.append(enc("SET", lk, 1, "PX", LC_LOCKTIME) + enc("DEL", ck))
                        nwrites += 2
                        replies[i] = [1, int(cv)]
                done = parse_all(conn.roundtrip(b"".join(writes)), nwrites) if writes else []
                it = iter(done)
                for i in free:
                    r = replies[i]
                    if isinstance(r, RespError):
                        continue
                    first = next(it)
                    if isinstance(first, RespError):
                        replies[i] = first
                    elif r[0] == 0 and r[1] is None:
                        replies[i] = [0, first]
                    elif r[0] == 1:
                        second = next(it)
                        if isinstance(second, RespError):
                            replies[i] = second
                for lv, i in zip(locks, range(len(items))):
                    if isinstance(lv, RespError):
                        replies[i] = lv
                out.append(replies)
            return out

        return job

    # ---------------- Scale series -------------------------------------------

    def scale_setup(self):
        cfg = self.cfg
        self.scale_state = {}
        for size in cfg.scale_sizes:
            period = MAX_WINDOW / size  # per-key time between visits (and between members)
            for s in range(cfg.scale_keys):
                key = f"sc:{size}:{s}"
                # Members as if visited every `period` ms up to now0; names shaped
                # like the module's own (8 characters, a letter first).
                now0 = self.base + 1000 * (s + 1)
                scores = [now0 - int(j * period) for j in range(size - 1, -1, -1)]
                lines = []
                for part in chunks(list(enumerate(scores)), 5000):
                    args = []
                    for j, sc in part:
                        args += [sc, "p%07d" % j]
                    lines.append(enc("ZADD", key, *args))
                lines.append(enc("PEXPIRE", key, MAX_WINDOW * 100))
                for r in parse_all(self.conns[0].roundtrip(b"".join(lines)), len(lines)):
                    if find_error(r) is not None:
                        raise BenchError(f"scale prefill: {find_error(r)}")
                if self.ctl.zcard(key) != size:
                    raise BenchError(f"scale prefill: {key} holds {self.ctl.zcard(key)} members")
                self.scale_state[key] = {"last": scores[-1], "period": period}
        self.notes["scale_encoding"] = {str(size): encoding(self.ctl, f"sc:{size}:0") for size in cfg.scale_sizes}

    @staticmethod
    def scale_rules(size: int, admitted: bool) -> list[tuple[int, int]]:
        # Limits above the fill (admitted), or the long rule at half the fill
        # (rejected: the reply then needs the retry-after member by rank).
        high = 2 * size + 10
        return [(high, RULES[0][1]), (high if admitted else max(1, size // 2), RULES[1][1])]

    def scale_round(self, rnd: int, measured: bool):
        cfg = self.cfg
        nconn = min(len(self.conns), cfg.scale_keys)
        variants = [(size, adm) for size in cfg.scale_sizes for adm in (True, False)]
        for size, adm in rotate(variants, rnd):
            per_conn = [[] for _ in range(nconn)]
            rules = flat_rules(self.scale_rules(size, adm))
            for i in range(cfg.scale_calls):
                s = i % cfg.scale_keys
                key = f"sc:{size}:{s}"
                st = self.scale_state[key]
                if adm:  # one member leaves the longest window, one arrives
                    now = int(st["last"] + st["period"])
                    st["last"] = now
                else:  # no writes: stay at the key's latest admission time
                    now = int(st["last"])
                per_conn[s % nconn].append(enc("RL.CHECK", key, now, *rules))
            jobs, counts = [], []
            for conn, cmds in zip(self.conns[:nconn], per_conn):
                parts = chunks(cmds, cfg.batch)
                jobs.append(pipelined_job(conn, [b"".join(p) for p in parts]))
                counts.append([len(p) for p in parts])
            name = f"{size}:{'admitted' if adm else 'rejected'}"
            b, results = measure(self.ctl, name, cfg.scale_calls, ["rl.check"], jobs)
            check_count(b, "rl.check", cfg.scale_calls)
            want = 0 if adm else 1
            bad = 0
            for bufs, cnts in zip(results, counts):
                for buf, cnt in zip(bufs, cnts):
                    for r in parse_all(buf, cnt):
                        if find_error(r) is not None:
                            raise BenchError(f"scale {name}: {find_error(r)}")
                        bad += r[0] != want
            if bad:
                self.fail(f"scale {name}: {bad} of {cfg.scale_calls} replies were not "
                          f"{'admitted' if adm else 'rejected'}")
            b.extra.update({"size": size, "variant": "admitted" if adm else "rejected"})
            self.record("scale", b, rnd, measured)
        if measured and rnd == cfg.rounds:
            self.notes["scale_sizes_after_run"] = {
                k: self.ctl.zcard(k) for k in self.scale_state}

    # ---------------- RL.LEASE + RL.RELEASE vs the Lua semaphore ------------
    #
    # Each key holds `size` leases of other holders that run all bench long;
    # a request takes one more lease (limit size + 10: always admitted) and
    # gives it back, so every key keeps its size. The module: RL.LEASE with
    # the request's TOKEN, then RL.RELEASE of it; Lua: the semaphore script
    # (ZREMRANGEBYSCORE, ZCARD, ZADD), then ZREM of the client's id.

    def lease_key(self, c: str, size: int, k: int) -> str:
        return f"ls:{'mod' if c == 'module' else 'lua'}:{size}:{k}"

    def lease_setup(self):
        cfg = self.cfg
        self.lease_next = 0
        held_until = self.base + 100 * 3_600_000
        lines = []
        for size in cfg.lease_sizes:
            for k in range(cfg.lease_keys):
                for c in ("module", "lua"):
                    key = self.lease_key(c, size, k)
                    for part in chunks(list(range(size)), 1000):
                        args = []
                        for j in part:
                            args += [held_until, "holder-%d" % j]
                        lines.append(enc("ZADD", key, *args))
                    lines.append(enc("PEXPIREAT", key, held_until))
        for r in parse_all(self.conns[0].roundtrip(b"".join(lines)), len(lines)):
            if find_error(r) is not None:
                raise BenchError(f"lease prefill: {find_error(r)}")

    def lease_round(self, rnd: int, measured: bool):
        cfg = self.cfg
        variants = [(size, c) for size in cfg.lease_sizes for c in ("module", "lua")]
        for size, c in rotate(variants, rnd):
            per_conn: list[list[bytes]] = [[] for _ in self.conns]
            # The client's clock, which the server shares: no lag to add.
            now = int(time.time() * 1000)
            for i in range(cfg.lease_calls):
                k = i % cfg.lease_keys
                key = self.lease_key(c, size, k)
                token = "req-%d" % (self.lease_next + i)
                limit = size + 10
                if c == "module":
                    cmd = (enc("RL.LEASE", key, now, limit, LEASE_TTL, "TOKEN", token)
                           + enc("RL.RELEASE", key, now, token))
                else:
                    cmd = (enc("EVALSHA", self.sha["semaphore"], 1, key, token, now, limit, LEASE_TTL)
                           + enc("ZREM", key, token))
                per_conn[k % len(self.conns)].append(cmd)
            jobs, counts = [], []
            for conn, cmds in zip(self.conns, per_conn):
                parts = chunks(cmds, cfg.batch)
                jobs.append(pipelined_job(conn, [b"".join(p) for p in parts]))
                counts.append([2 * len(p) for p in parts])
            counted = ["rl.lease", "rl.release"] if c == "module" else ["evalsha", "zrem"]
            name = f"{size}:{c}"
            b, results = measure(self.ctl, name, cfg.lease_calls, counted, jobs)
            for cmd in counted:
                check_count(b, cmd, cfg.lease_calls)
            admitted = released = 0
            for bufs, cnts in zip(results, counts):
                for buf, cnt in zip(bufs, cnts):
                    replies = parse_all(buf, cnt)
                    for r in replies:
                        if find_error(r) is not None:
                            raise BenchError(f"lease {name}: {find_error(r)}")
                    for acq, rel in zip(replies[::2], replies[1::2]):
                        if c == "module":
                            admitted += acq[0] == 0 and acq[3] == 9
                            released += rel == [1]
                        else:
                            admitted += acq == 1
                            released += rel == 1
            if admitted != cfg.lease_calls or released != cfg.lease_calls:
                self.fail(f"lease {name}: {admitted} acquired, {released} released of {cfg.lease_calls}")
            b.extra.update({"size": size})
            self.record("lease", b, rnd, measured)
        self.lease_next += cfg.lease_calls
        if measured and rnd == cfg.rounds:
            sizes = {self.lease_key(c, size, 0): self.ctl.zcard(self.lease_key(c, size, 0))
                     for size in cfg.lease_sizes for c in ("module", "lua")}
            self.notes["lease_sizes_after_run"] = sizes
            for key, n in sizes.items():
                if n != int(key.split(":")[2]):
                    self.fail(f"lease: {key} holds {n} members after the run")

    # ---------------- RL.ALL vs the three commands and their Lua -------------
    #
    # A request is one policy decision over three keys of one hash tag
    # ({al:<contestant>:<k>}:c, :t, :q): RL.CHECK's two rules (keys of
    # `check_entries` members, 1 trimmed + 1 added a visit), RL.THROTTLE's
    # steady-state rule (a full bucket at every visit) and RL.QUOTA DAY in
    # QUOTA_ZONE, each triple visited every `period` ms at an explicit `now`.
    # Three contestants on their own triples, on the same clock: RL.ALL with
    # the three clauses; the three commands pipelined (no atomicity: when the
    # QUOTA refuses, the request's CHECK and THROTTLE stay charged); the Lua
    # that calls them and refunds the admitted ones on a refusal
    # (bench/lua/all_refund.lua). One triple in `all_refuse_every` has a day
    # quota of 1: after its first visit of the day, its last clause refuses.

    ALL_CONTESTANTS = ("all", "singles", "lua")

    @staticmethod
    def all_key_names(c: str, k: int) -> tuple[str, str, str]:
        tag = "{al:%s:%d}" % (c, k)
        return tag + ":c", tag + ":t", tag + ":q"

    def all_day_limit(self, k: int) -> int:
        return ALL_REFUSED_DAY_LIMIT if k % self.cfg.all_refuse_every == 0 else ALL_DAY_LIMIT

    def all_setup(self):
        cfg = self.cfg
        self.all_period = MAX_WINDOW // cfg.check_entries
        self.all_step = self.all_period // cfg.all_keys
        assert self.all_step * cfg.all_keys == self.all_period, (cfg.all_keys, self.all_period)
        self.all_base = self.base + ALL_CLOCK_AHEAD_MS
        self.all_next = {c: 0 for c in self.ALL_CONTESTANTS}
        self.all_model = {c: {} for c in self.ALL_CONTESTANTS}  # (key index, local day) -> admitted
        lines = []
        for c in self.ALL_CONTESTANTS:
            for k in range(cfg.all_keys):
                first = self.all_base + (k + 1) * self.all_step
                args = []
                for j in range(cfg.check_entries, 0, -1):
                    args += [first - j * self.all_period, "q%07d" % j]
                ck = self.all_key_names(c, k)[0]
                lines.append(enc("ZADD", ck, *args))
                lines.append(enc("PEXPIRE", ck, MAX_WINDOW))
        for part in chunks(lines, 2000):
            for r in parse_all(self.conns[0].roundtrip(b"".join(part)), len(part)):
                if find_error(r) is not None:
                    raise BenchError(f"prefill of RL.ALL's CHECK keys: {find_error(r)}")

    def all_cmd(self, c: str, k: int, now: int) -> bytes:
        return all_request(c, self.all_key_names(c, k), now, self.all_day_limit(k), self.sha["all_refund"])

    def all_round(self, rnd: int, measured: bool):
        """Each contestant's replies are checked against a model of the day
        quota (admitted iff the triple's day bucket has room; refused by
        clause 3), the three commands' replies are combined as RL.ALL
        chooses its binding clause, and the three contestants' replies to
        the same request (same triple index, same `now`) must be equal."""
        cfg = self.cfg
        n = cfg.all_calls or cfg.check_calls
        got_by: dict[str, dict[int, list]] = {}
        for c in rotate(list(self.ALL_CONTESTANTS), rnd):
            i0 = self.all_next[c]
            self.all_next[c] += n
            per_conn: list[list[bytes]] = [[] for _ in self.conns]
            plans: list[list[tuple[int, int, int]]] = [[] for _ in self.conns]
            for i in range(i0, i0 + n):
                k = i % cfg.all_keys
                now = self.all_base + (i + 1) * self.all_step
                per_conn[k % len(self.conns)].append(self.all_cmd(c, k, now))
                plans[k % len(self.conns)].append((i, k, now))
            per_req = 3 if c == "singles" else 1
            jobs, counts = [], []
            for conn, cmds in zip(self.conns, per_conn):
                parts = chunks(cmds, cfg.batch)
                jobs.append(pipelined_job(conn, [b"".join(p) for p in parts]))
                counts.append([len(p) * per_req for p in parts])
            counted = {"all": ["rl.all"], "singles": ["rl.check", "rl.throttle", "rl.quota"],
                       "lua": ["evalsha"]}[c]
            b, results = measure(self.ctl, c, n, counted, jobs)
            for cmd in counted:
                check_count(b, cmd, n)
            model = self.all_model[c]
            got: dict[int, list] = {}
            admitted = 0
            for bufs, cnts, plan in zip(results, counts, plans):
                replies = [r for buf, cnt in zip(bufs, cnts) for r in parse_all(buf, cnt)]
                if c == "singles":
                    replies = [replies[j:j + 3] for j in range(0, len(replies), 3)]
                for r, (i, k, now) in zip(replies, plan):
                    if find_error(r) is not None:
                        raise BenchError(f"RL.ALL contestant {c}: {find_error(r)}")
                    if c == "singles":
                        if not all(int_list(x, 6) for x in r):
                            raise BenchError(f"RL.ALL contestant singles: malformed replies {r}")
                        r = all_composite(r, [1, 1, 1])
                    elif not int_list(r, 7):
                        raise BenchError(f"RL.ALL contestant {c}: malformed reply {r}")
                    bucket = (k, (now + ALL_ZONE_OFFSET_MS) // 86400000)
                    used = model.get(bucket, 0)
                    want = 0 if used < self.all_day_limit(k) else 1
                    if r[0] != want or (want and r[1] != 3):
                        self.fail(f"RL.ALL {c}: triple {k} at {now} replied {r}; the model says "
                                  f"{'admitted' if want == 0 else 'refused by clause 3'} ({used} used today)")
                        raise BenchError("RL.ALL: a contestant disagrees with the model")
                    if want == 0:
                        model[bucket] = used + 1
                        admitted += 1
                    got[i] = r
            got_by[c] = got
            b.extra.update({"admitted": admitted, "refused_share": (n - admitted) / n})
            self.record("all", b, rnd, measured)
        ref = got_by["all"]
        for c in ("singles", "lua"):
            diff = [i for i, r in ref.items() if got_by[c].get(i) != r]
            if diff:
                i = diff[0]
                self.fail(f"RL.ALL vs {c}: {len(diff)} of {len(ref)} replies differ (first: request {i}, "
                          f"RL.ALL {ref[i]}, {c} {got_by[c].get(i)})")
                raise BenchError(f"RL.ALL and {c} disagree")

    def all_agreement(self):
        """After the run, on a sample of triples: RL.ALL and the Lua leave the
        same state (CHECK scores, THROTTLE fields, QUOTA fields, expiries) on
        the triples that are always admitted, and the same QUOTA fields on the
        refused ones (there RL.ALL writes nothing, while the Lua's admission
        and refund trims the CHECK key and empties the THROTTLE one, and the
        pipelined commands charge CHECK and THROTTLE)."""
        cfg = self.cfg
        compared = differing = 0
        for k in range(0, cfg.all_keys, max(1, cfg.all_keys // 50)):
            refused = self.all_day_limit(k) == ALL_REFUSED_DAY_LIMIT
            state = {}
            for c in self.ALL_CONTESTANTS:
                ck, tk, qk = self.all_key_names(c, k)
                st = {"q": self.ctl.hgetall(qk), "qx": self.ctl.execute_command("PEXPIRETIME", qk)}
                if not refused:
                    st.update({"c": [s for _m, s in self.ctl.zrange(ck, 0, -1, withscores=True)],
                               "t": self.ctl.hgetall(tk),
                               "cx": self.ctl.execute_command("PEXPIRETIME", ck),
                               "tx": self.ctl.execute_command("PEXPIRETIME", tk)})
                state[c] = st
            compared += 1
            others = ("lua", "singles") if not refused else ("lua",)
            bad = [c for c in others if state[c] != state["all"]]
            if refused and state["singles"]["q"] != state["all"]["q"]:
                bad.append("singles")
            if bad:
                differing += 1
                if differing <= 3:
                    self.fail(f"RL.ALL state differs on triple {k} from {', '.join(bad)}: "
                              + "; ".join(f"{c} {state[c]}" for c in ("all", *bad)))
        self.notes["all_agreement"] = {"triples_compared": compared, "triples_differing": differing,
                                       "admitted": {c: sum(b.extra["admitted"] for b in self.batches["all"]
                                                           if b.contestant == c)
                                                    for c in self.ALL_CONTESTANTS}}

    # ---------------- Memory -------------------------------------------------

    def memory(self) -> dict:
        """`memory_keys` keys per writer and size, each written by `n` calls of
        the writer itself at distinct times; bytes per entry averaged over keys."""
        out = {}
        t0 = self.base + 10_000_000
        nk = self.cfg.memory_keys
        for n in self.cfg.memory_sizes:
            keys = {c: [f"mem:{c}:{n}:{j}" for j in range(nk)] for c in ("module", "lua-uuid", "lua-ts")}
            cmds = []
            for i in range(n):
                now = t0 + 1000 * i  # n <= 3600 keeps every member in the longest window
                for j in range(nk):
                    cmds.append(enc("RL.CHECK", keys["module"][j], now, *flat_rules(RULES)))
                    cmds.append(enc("EVALSHA", self.sha["check_uuid"], 1, keys["lua-uuid"][j], str(uuid.uuid4()),
                                    now, *flat_rules(RULES)))
                    cmds.append(enc("EVALSHA", self.sha["check_timestamp"], 1, keys["lua-ts"][j], now,
                                    *flat_rules(RULES)))
            for part in chunks(cmds, 3000):
                for r in parse_all(self.conns[0].roundtrip(b"".join(part)), len(part)):
                    if find_error(r) is not None:
                        raise BenchError(f"memory: {find_error(r)}")
            row = {}
            for c, names in keys.items():
                usages = []
                for key in names:
                    card = self.ctl.zcard(key)
                    if card != n:
                        self.fail(f"memory: {c} key {key} holds {card} members, expected {n}")
                    usages.append(int(self.ctl.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")))
                mean = sum(usages) / len(usages)
                sd = (sum((u - mean) ** 2 for u in usages) / max(len(usages) - 1, 1)) ** 0.5
                row[c] = {"entries": n, "keys": len(names), "bytes": mean, "bytes_sd": sd,
                          "bytes_min": min(usages), "bytes_max": max(usages),
                          "bytes_per_entry": mean / n, "encoding": encoding(self.ctl, names[0]),
                          "sample_member": first_member(self.ctl, names[0])}
            out[str(n)] = row
        return out


    def key_memory(self) -> dict:
        """Bytes per key for one rule at each limit L in `key_memory_limits`,
        each key filled to its limit: RL.THROTTLE (burst L, L per hour) and the
        Lua GCRA by min(L, 10) calls of COST L/min(L, 10) at one instant (the
        bucket is then empty); RL.CHECK (L per hour) by max(10, L/10000) calls
        of COST L/calls at distinct times in the window (L members). Per writer
        and limit: the mean `MEMORY USAGE key SAMPLES 0`, and what FLUSHDB of
        the writer's keys gives back (INFO `used_memory` before − after) / keys:
        each writer and limit in a database of its own, so that includes the
        keyspace's and the expiry table's entries and buckets, which MEMORY
        USAGE leaves out (measured around the FLUSHDB alone, less
        `mem_clients_normal`, so the pipelines' client buffers do not enter
        it). Key names have the same length at every limit."""
        cfg = self.cfg
        t0 = self.base + 20_000_000
        window = 3600000
        out = {}
        db = 0
        conn = self.conns[0]

        def used() -> int:  # client buffers left out: cron may shrink a pipeline's query buffer meanwhile
            m = self.ctl.info("memory")
            return int(m["used_memory"]) - int(m.get("mem_clients_normal", 0))

        used()  # the first INFO of a server allocates for good: not inside a measurement

        for lim in cfg.key_memory_limits:
            row = {}
            for c in ("module", "lua", "check"):
                nkeys = cfg.key_memory_throttle_keys if c != "check" else cfg.key_memory_check_keys.get(lim, 0)
                if nkeys == 0:
                    continue
                db = db % 15 + 1  # databases 1..15, each flushed before use
                keys = [f"km:{c[:3]}:{lim:07d}:{j:05d}" for j in range(nkeys)]
                if c == "check":
                    calls = max(10, lim // 10000)
                    steps = [(t0 + i * (window // 2 // calls), lim // calls) for i in range(calls)]
                else:
                    calls = min(lim, 10)
                    steps = [(t0, lim // calls)] * calls
                dbc = self.server.client(db=db)
                dbc.flushdb()
                parse_all(conn.roundtrip(enc("SELECT", db)), 1)
                lines = []
                for key in keys:
                    for now, cost in steps:
                        if c == "module":
                            lines.append(enc("RL.THROTTLE", key, now, lim, lim, window, "COST", cost))
                        elif c == "lua":
                            lines.append(enc("EVALSHA", self.sha["gcra"], 1, key, now, lim, lim, window, cost))
                        else:
                            lines.append(enc("RL.CHECK", key, now, lim, window, "COST", cost))
                for part in chunks(lines, 200):
                    for r in parse_all(conn.roundtrip(b"".join(part)), len(part)):
                        if find_error(r) is not None or r[0] != 0:
                            raise BenchError(f"key memory, {c} at limit {lim}: {r}")
                parse_all(conn.roundtrip(enc("SELECT", 0)), 1)
                sample = keys[:: max(1, nkeys // 20)]
                usages = [int(dbc.execute_command("MEMORY", "USAGE", k, "SAMPLES", "0")) for k in sample]
                if c == "check":
                    held = dbc.zcard(keys[0])
                    if held != lim:
                        self.fail(f"key memory: RL.CHECK key {keys[0]} holds {held} members, expected {lim}")
                else:
                    # empty bucket: TAT = t0 + tau = t0 + window (ns for the module, us for the Lua)
                    held = int(dbc.hget(keys[0], str(window)) or 0)
                    want = (t0 + window) * (10**6 if c == "module" else 1000)
                    if held != want:
                        self.fail(f"key memory: {c} key {keys[0]} at limit {lim} holds TAT {held}, expected {want}")
                mean = sum(usages) / len(usages)
                enc_name = encoding(dbc, keys[0])
                mem1 = used()
                dbc.flushdb()  # also: a 1M-member key is ~100 MB, do not keep it
                mem2 = used()
                dbc.close()
                row[c] = {"keys": nkeys, "calls_per_key": calls, "bytes": mean, "bytes_min": min(usages),
                          "bytes_max": max(usages), "used_memory_delta_per_key": (mem1 - mem2) / nkeys,
                          "encoding": enc_name, "db": db}
            out[str(lim)] = row
        return out


def encoding(ctl, key) -> str:
    e = ctl.object("encoding", key)
    return e.decode() if isinstance(e, bytes) else str(e)


def first_member(ctl, key):
    m = ctl.zrange(key, -1, -1)
    return m[0].decode(errors="replace") if m else None


def zone_buckets(now_ms: int) -> dict:
    """The day and the hour containing `now_ms` in QUOTA_ZONE, as a client
    names its RL.DAYHOUR keys and computes their TTLs; and RL.QUOTA's field
    names for them (SPEC.md: period, local start, UTC offset)."""
    from zoneinfo import ZoneInfo
    tz = ZoneInfo(QUOTA_ZONE)
    lt = _dt.datetime.fromtimestamp(now_ms / 1000, tz)
    day0 = lt.replace(hour=0, minute=0, second=0, microsecond=0)
    next_day = _dt.datetime.combine(day0.date() + _dt.timedelta(days=1), _dt.time(0), tzinfo=tz)
    hour0 = lt.replace(minute=0, second=0, microsecond=0)
    # The next hour's first instant, in UTC (Asia/Shanghai has had no DST since
    # 1991; in a zone with DST, an hour can end sooner where the offset moves).
    hour_end = hour0.astimezone(_dt.timezone.utc) + _dt.timedelta(hours=1)

    def off(d):
        z = d.strftime("%z")
        return z[:3] + ":" + z[3:]

    return {"now": now_ms, "day": day0.strftime("%Y-%m-%d"), "hour": hour0.strftime("%Y-%m-%dT%H"),
            "day_end": int(next_day.timestamp() * 1000), "hour_end": int(hour_end.timestamp() * 1000),
            "day_field": f"day:{day0.strftime('%Y-%m-%dT%H:%M')}{off(day0)}",
            "hour_field": f"hour:{hour0.strftime('%Y-%m-%dT%H:%M')}{off(hour0)}"}


def zone_wait_for_hour(bench) -> None:
    """RL.QUOTA's hour bucket (now `*`) and the client's hour keys change at
    the hour: a round that straddles it would not follow the model. Wait the
    boundary out when it is less than QUOTA_GUARD_MS away."""
    now = int(time.time() * 1000)
    left = zone_buckets(now)["hour_end"] - now
    if left < QUOTA_GUARD_MS:
        print(f"  waiting {left / 1000:.1f} s for the hour boundary in {QUOTA_ZONE}", flush=True)
        time.sleep(left / 1000 + 0.5)
        bench.notes["hour_boundary_waits"] = bench.notes.get("hour_boundary_waits", 0) + 1


def quota_reply_ok(r, v: int) -> bool:
    """RL.QUOTA DAY 1000 HOUR 20, visit v (0-based) of a fresh key within one
    hour: admitted while the hour allows, bound by the hour (rule 2); retry and
    reset are the ms until the hour ends."""
    if not isinstance(r, list) or len(r) != 6 or not 0 < r[5] <= 3600000:
        return False
    if v < HOUR_LIMIT:
        return r[:5] == [0, 2, HOUR_LIMIT, HOUR_LIMIT - v - 1, -1]
    return r[:4] == [1, 2, HOUR_LIMIT, 0] and r[4] == r[5]


def bucket_depth_ms(rule) -> int:
    """A (burst, count, window) rule's bucket depth in ms, ceil(tau / 10^6):
    the W of RL.THROTTLE's expiry grid."""
    burst, count, window = rule
    return ceil_div(burst * (window * 10**6 // count), 10**6)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def gcra_reply(tat, now: int, rule, cost: int):
    """RL.THROTTLE's reply for one rule by SPEC.md (exact integers, ns) and the
    TAT it leaves: (reply, new TAT); `tat` None is a full bucket."""
    burst, count, window = rule
    t = now * 10**6
    T = window * 10**6 // count
    tau = T * burst
    base = t if tat is None else max(tat, t)
    new = base + T * cost
    if new - tau <= t:
        limited, retry, left, state = 0, -1, new, new
    else:
        limited, retry, left, state = 1, ceil_div(new - tau - t, 10**6), base, tat
    remaining = min(max((tau - (left - t)) // T, 0), burst)
    return [limited, 1, burst, remaining, retry, ceil_div(left - t, 10**6)], state


def all_request(c: str, keys: tuple[str, str, str], now: int, day_limit: int, sha: str) -> bytes:
    """One request of the RL.ALL workload, encoded: `c` "all" (RL.ALL, three
    clauses), "details" (the same RL.ALL ending with DETAILS: every rule's
    state in the reply), "singles" (RL.CHECK, RL.THROTTLE, RL.QUOTA: three
    commands) or "lua" (EVALSHA of bench/lua/all_refund.lua, whose SHA is
    `sha`)."""
    ck, tk, qk = keys
    if c in ("all", "details"):
        return enc("RL.ALL", 3, ck, tk, qk, now, "CHECK", 1, *flat_rules(RULES), "THROTTLE", 2, *TH_RULE,
                   "QUOTA", 3, QUOTA_ZONE, "DAY", day_limit, *(("DETAILS",) if c == "details" else ()))
    if c == "singles":
        return (enc("RL.CHECK", ck, now, *flat_rules(RULES)) + enc("RL.THROTTLE", tk, now, *TH_RULE)
                + enc("RL.QUOTA", qk, now, QUOTA_ZONE, "DAY", day_limit))
    return enc("EVALSHA", sha, 3, ck, tk, qk, now, 1, 2 * len(RULES), *flat_rules(RULES),
               len(TH_RULE), *TH_RULE, 3, QUOTA_ZONE, "DAY", day_limit)


def int_list(r, n: int) -> bool:
    return isinstance(r, list) and len(r) == n and all(isinstance(x, int) for x in r)


def all_composite(replies: list[list[int]], costs: list[int]) -> list[int]:
    """RL.ALL's reply from its clauses' own replies (six integers each), by
    SPEC.md's binding clause: refused, among the refusing clauses one whose
    retry_after is -1 first, else the largest retry_after, ties to the lower
    index; admitted, the fewest requests of this shape left,
    floor(remaining / max(cost, 1)), ties to the larger reset_after, then to
    the lower index."""
    refused = [j for j, r in enumerate(replies) if r[0] != 0]
    if refused:
        never = [j for j in refused if replies[j][4] == -1]
        b = never[0] if never else min(refused, key=lambda j: (-replies[j][4], j))
        return [1, b + 1, *replies[b][1:]]
    b = min(range(len(replies)), key=lambda j: (replies[j][3] // max(costs[j], 1), -replies[j][5], j))
    r = replies[b]
    return [0, b + 1, r[1], r[2], r[3], -1, r[5]]


def flat_rules(rules):
    out = []
    for c, w in rules:
        out += [c, w]
    return out


def rotate(items: list, r: int) -> list:
    r %= len(items)
    return items[r:] + items[:r]


# --------------------------------------------------------------------------
# Summaries


def summarize(batches: list[Batch]) -> dict:
    """Per contestant over the measured rounds: server cost from the summed
    integer totals, the per-round spread, and throughput."""
    by: dict[str, list[Batch]] = {}
    for b in batches:
        if not b.extra.get("warmup"):
            by.setdefault(b.contestant, []).append(b)
    out = {}
    for c, bs in by.items():
        per_round = sorted(b.usec_per_request for b in bs)
        ops_round = sorted(b.ops for b in bs)
        cpu_round = sorted(b.extra["server_cpu_usec_per_request"] for b in bs)
        reqs = sum(b.requests for b in bs)
        per_cmd = {}
        for b in bs:
            for cmd in b.counted:
                st = b.stats.get(cmd, {"calls": 0, "usec": 0})
                acc = per_cmd.setdefault(cmd, {"calls": 0, "usec": 0})
                acc["calls"] += st["calls"]
                acc["usec"] += st["usec"]
        for acc in per_cmd.values():
            acc["usec_per_call"] = acc["usec"] / acc["calls"] if acc["calls"] else None
            acc["calls_per_request"] = acc["calls"] / reqs
        out[c] = {
            "requests": reqs,
            # the headline figure: median over rounds of Σusec/requests
            "usec_per_request": median(per_round),
            "usec_per_request_mean": sum(b.server_usec for b in bs) / reqs,
            "usec_per_request_p25": quantile(per_round, 0.25),
            "usec_per_request_p75": quantile(per_round, 0.75),
            "usec_per_request_min_round": per_round[0],
            "usec_per_request_max_round": per_round[-1],
            "ops_per_s": median(ops_round),
            "server_cpu_usec_per_request": median(cpu_round),
            "ops_per_s_overall": reqs / sum(b.wall_s for b in bs),
            "commands": per_cmd,
            "rounds": len(bs),
        }
    return out


def median(xs: list[float]) -> float:
    return quantile(sorted(xs), 0.5)


def quantile(xs: list[float], q: float) -> float:
    """Linear interpolation on sorted xs."""
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def round_ratios(batches: list[Batch], num: str, den: str) -> list[float]:
    """num/den for each measured round (both ran in the same round)."""
    rounds: dict[int, dict[str, float]] = {}
    for b in batches:
        if not b.extra.get("warmup"):
            rounds.setdefault(b.round, {})[b.contestant] = b.usec_per_request
    return sorted(r[num] / r[den] for r in rounds.values() if num in r and den in r and r[den] > 0)


def fmt_ratio_spread(rs: list[float]) -> str:
    if not rs:
        return "n/a"
    return (f"paired per-round ratio: median {median(rs):.3f}, "
            f"p25..p75 {quantile(rs, 0.25):.3f}..{quantile(rs, 0.75):.3f}")


# --------------------------------------------------------------------------
# SVG charts (hand-written, no dependencies)

COLORS = {"module": "#2f9e44", "lua": "#e8590c", "lua-ts": "#f59f00", "native": "#1971c2",
          "client": "#862e9c", "admitted": "#2f9e44", "rejected": "#c92a2a"}


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_cost_chart(groups: list[tuple[str, list[tuple[str, float, str]]]], path: Path, title: str):
    bar_h, gap, group_gap, left, right, top = 22, 4, 26, 250, 120, 56
    width = 960
    rows = sum(len(bars) for _, bars in groups)
    height = top + rows * (bar_h + gap) + len(groups) * group_gap + 40
    vmax = max((v for _, bars in groups for _, v, _ in bars), default=1.0) or 1.0
    scale = (width - left - right) / vmax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="16" font-weight="bold">{esc(title)}</text>',
           f'<text x="{width / 2}" y="42" text-anchor="middle" fill="#555">server µs per request '
           f'(INFO commandstats, shorter is better)</text>']
    y = top
    # vertical grid
    step = nice_step(vmax)
    g = 0.0
    while g <= vmax * 1.0001:
        x = left + g * scale
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 30}" stroke="#e9ecef"/>')
        out.append(f'<text x="{x:.1f}" y="{height - 14}" text-anchor="middle" fill="#868e96">{g:g}</text>')
        g += step
    for gname, bars in groups:
        out.append(f'<text x="10" y="{y + 14}" font-weight="bold">{esc(gname)}</text>')
        y += group_gap - 6
        for label, v, color in bars:
            w = max(v * scale, 1)
            out.append(f'<text x="{left - 8}" y="{y + bar_h - 6}" text-anchor="end">{esc(label)}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>')
            out.append(f'<text x="{left + w + 6:.1f}" y="{y + bar_h - 6}">{v:.2f} µs</text>')
            y += bar_h + gap
        y += 6
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def nice_step(vmax: float) -> float:
    raw = vmax / 8
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def svg_scale_chart(series: dict[str, list[tuple[int, float]]], path: Path):
    import math
    width, height, left, right, top, bottom = 760, 420, 70, 150, 50, 60
    xs = sorted({x for pts in series.values() for x, _ in pts})
    vmax = max(v for pts in series.values() for _, v in pts) * 1.15
    lx0, lx1 = math.log10(xs[0]), math.log10(xs[-1])

    def px(x):
        return left + (math.log10(x) - lx0) / (lx1 - lx0 or 1) * (width - left - right)

    def py(v):
        return top + (1 - v / vmax) * (height - top - bottom)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{(width - right + left) / 2}" y="24" text-anchor="middle" font-size="16" font-weight="bold">'
           f'RL.CHECK server cost vs members in the window</text>']
    step = nice_step(vmax)
    g = 0.0
    while g <= vmax:
        out.append(f'<line x1="{left}" y1="{py(g):.1f}" x2="{width - right}" y2="{py(g):.1f}" stroke="#e9ecef"/>')
        out.append(f'<text x="{left - 8}" y="{py(g) + 4:.1f}" text-anchor="end" fill="#868e96">{g:g}</text>')
        g += step
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{height - bottom + 20}" text-anchor="middle">{x:,}</text>')
    out.append(f'<text x="{(width - right + left) / 2}" y="{height - 16}" text-anchor="middle" fill="#555">'
               f'members per key (log scale)</text>')
    out.append(f'<text x="18" y="{(height) / 2}" text-anchor="middle" fill="#555" '
               f'transform="rotate(-90 18 {height / 2})">server µs per call</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS.get(name, "#333")
        d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(v):.1f}" for j, (x, v) in enumerate(pts))
        out.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2.5"/>')
        for x, v in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(v):.1f}" r="4" fill="{color}"/>')
            out.append(f'<text x="{px(x):.1f}" y="{py(v) - 9:.1f}" text-anchor="middle" font-size="11" '
                       f'fill="{color}">{v:.2f}</text>')
        out.append(f'<rect x="{width - right + 16}" y="{top + 20 * i}" width="14" height="14" fill="{color}"/>')
        out.append(f'<text x="{width - right + 36}" y="{top + 20 * i + 12}">{esc(name)}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


# --------------------------------------------------------------------------
# Report


LABELS = {
    ("check", "module"): "RL.CHECK (module)",
    ("check", "lua-uuid"): "Lua, seed 000 A (UUID members)",
    ("check", "lua-ts"): "Lua, seed 000 B (timestamp members)",
    ("check", "native"): "native pipeline (2×ZCOUNT, ZADD, PEXPIRE, ZREMRANGEBYSCORE)",
    ("check_skiplist", "module"): "RL.CHECK (module)",
    ("check_skiplist", "lua-uuid"): "Lua, seed 000 A (UUID members)",
    ("check_skiplist", "lua-ts"): "Lua, seed 000 B (timestamp members)",
    ("check_skiplist", "native"): "native pipeline (2×ZCOUNT, ZADD, PEXPIRE, ZREMRANGEBYSCORE)",
    ("dayhour", "module"): "RL.DAYHOUR (module)",
    ("dayhour", "lua"): "Lua, seed 001 day/hour",
    ("dayhour", "quota"): f"RL.QUOTA DAY + HOUR ({QUOTA_ZONE}, now *)",
    ("throttle", "module"): "RL.THROTTLE (module)",
    ("throttle", "lua"): "Lua GCRA (bench/lua/gcra.lua)",
    ("throttle", "check"): "RL.CHECK, 1 rule, same keys and schedule",
    ("throttle_contested", "module"): "RL.THROTTLE (module)",
    ("throttle_contested", "lua"): "Lua GCRA (bench/lua/gcra.lua)",
    ("lockcount", "module"): "RL.LOCKCOUNT (module)",
    ("lockcount", "lua"): "Lua, seed 004 count-then-lock",
    ("lockcount", "client"): "client flow, seed 004 (GET/GET/SET|INCR|SET+DEL round trips)",
    ("all", "all"): "RL.ALL, 3 clauses (CHECK + THROTTLE + QUOTA)",
    ("all", "singles"): "RL.CHECK + RL.THROTTLE + RL.QUOTA pipelined (sum, not atomic)",
    ("all", "lua"): "Lua: the three commands, REFUND on a refusal (bench/lua/all_refund.lua)",
}


def build_report(bench: Bench, cfg: Config, quick: bool, meta: dict, summary: dict, memory: dict,
                 key_memory: dict, out_dir: Path) -> tuple[str, list[dict]]:
    S = summary
    targets = []

    def target(name, label, value, limit, detail="", verdict=None):
        ok = value is not None and value <= limit
        targets.append({"name": name, "label": label, "value": value, "limit": limit,
                        "pass": bool(ok), "verdict": verdict or ("PASS" if ok else "FAIL"), "detail": detail})

    def memory_target(name, label, n, other, limit):
        """Mean bytes per key over several keys. Skiplist node heights are
        random, so two layouts with the same allocation sizes differ by noise;
        a difference within two standard errors is reported as a tie (and
        passes), with the numbers."""
        m, o = memory[str(n)]["module"], memory[str(n)][other]
        ratio = m["bytes"] / o["bytes"]
        k = m["keys"]
        se = ((m["bytes_sd"] ** 2 + (limit * o["bytes_sd"]) ** 2) / k) ** 0.5
        excess = m["bytes"] - limit * o["bytes"]
        detail = (f"{m['bytes_per_entry']:.2f} vs {o['bytes_per_entry']:.2f} B/entry; module − limit×other = "
                  f"{excess:+.0f} B per key, 2·SE {2 * se:.0f} B over {k} keys per writer")
        if ratio <= limit:
            target(name, label, ratio, limit, detail)
        elif excess <= 2 * se:
            target(name, label, ratio, limit, detail + " (tie within noise)", verdict="PASS (tie)")
            targets[-1]["pass"] = True
        else:
            target(name, label, ratio, limit, detail)

    db_, lb = bench.batches["dayhour"], bench.batches["lockcount"]
    ck, dh, lc, sc = S["check"], S["dayhour"], S["lockcount"], S["scale"]
    enc_after = bench.notes.get("check_encoding_after_run", {})
    for shape in bench.check_shapes:
        cs, cb = S[shape.section], bench.batches[shape.section]
        seen = "/".join(sorted({e for by in enc_after.get(shape.name, {}).values() for e in by})) or "?"
        what = f"{shape.keys} keys × {shape.entries} entries, OBJECT ENCODING {seen}"
        for other, tname, tlabel in (("lua-uuid", "lua", "Lua (seed 000 A, UUID members)"),
                                     ("native", "native", "native command sum")):
            name = f"check_{shape.name}_vs_{tname}"
            lim = TARGETS[name]
            target(name, f"RL.CHECK ({shape.name}) server cost ≤ {lim} × {tlabel}",
                   cs["module"]["usec_per_request"] / cs[other]["usec_per_request"], lim,
                   f"{what}; per-round {fmt_ratio_spread(round_ratios(cb, 'module', other))}")
    target("dayhour_vs_lua", "RL.DAYHOUR server cost ≤ 0.25 × Lua (seed 001)",
           dh["module"]["usec_per_request"] / dh["lua"]["usec_per_request"], TARGETS["dayhour_vs_lua"],
           f"per-round {fmt_ratio_spread(round_ratios(db_, 'module', 'lua'))}")
    target("lockcount_vs_lua", "RL.LOCKCOUNT server cost ≤ 0.25 × Lua (seed 004)",
           lc["module"]["usec_per_request"] / lc["lua"]["usec_per_request"], TARGETS["lockcount_vs_lua"],
           f"per-round {fmt_ratio_spread(round_ratios(lb, 'module', 'lua'))}")
    lo, hi = min(cfg.scale_sizes), max(cfg.scale_sizes)
    a_lo, a_hi = sc.get(f"{lo}:admitted"), sc.get(f"{hi}:admitted")
    r_lo, r_hi = sc.get(f"{lo}:rejected"), sc.get(f"{hi}:rejected")
    target("scale_100k_vs_10", f"RL.CHECK at {hi:,} entries ≤ 2 × at {lo} (admitted calls)",
           a_hi["usec_per_request"] / a_lo["usec_per_request"], TARGETS["scale_100k_vs_10"],
           f"per-round {fmt_ratio_spread(round_ratios(bench.batches['scale'], f'{hi}:admitted', f'{lo}:admitted'))}; "
           f"rejected calls: {r_hi['usec_per_request'] / r_lo['usec_per_request']:.3f}")
    if "100" in memory:
        memory_target("mem_vs_ts_100", "memory/entry at 100 ≤ timestamp-member Lua layout", 100, "lua-ts",
                      TARGETS["mem_vs_ts_100"])
    if "1000" in memory:
        memory_target("mem_vs_ts_1000", "memory/entry at 1,000 ≤ timestamp-member Lua layout", 1000, "lua-ts",
                      TARGETS["mem_vs_ts_1000"])
    if "100" in memory:
        memory_target("mem_vs_uuid_100", "memory/entry at 100 ≤ 0.6 × UUID-member Lua layout", 100, "lua-uuid",
                      TARGETS["mem_vs_uuid_100"])
    thb, tcb = bench.batches["throttle"], bench.batches["throttle_contested"]
    th, tc = S["throttle"], S["throttle_contested"]
    agree = bench.notes.get("throttle_agreement", {})
    target("throttle_vs_lua", "RL.THROTTLE server cost ≤ 0.25 × the same GCRA in Lua (steady state)",
           th["module"]["usec_per_request"] / th["lua"]["usec_per_request"], TARGETS["throttle_vs_lua"],
           f"per-round {fmt_ratio_spread(round_ratios(thb, 'module', 'lua'))}; contested (a third refused): "
           f"{tc['module']['usec_per_request'] / tc['lua']['usec_per_request']:.3f}; admitted module/Lua: "
           f"{agree.get('throttle', {}).get('module')}/{agree.get('throttle', {}).get('lua')} steady, "
           f"{agree.get('throttle_contested', {}).get('module')}/{agree.get('throttle_contested', {}).get('lua')} "
           f"contested")
    target("throttle_vs_check", "RL.THROTTLE server cost ≤ 0.5 × RL.CHECK on the same keys (steady state)",
           th["module"]["usec_per_request"] / th["check"]["usec_per_request"], TARGETS["throttle_vs_check"],
           f"per-round {fmt_ratio_spread(round_ratios(thb, 'module', 'check'))}; vs the 2-rule RL.CHECK "
           f"workload above: {th['module']['usec_per_request'] / ck['module']['usec_per_request']:.3f}")
    tk = {lim: row["module"] for lim, row in key_memory.items() if "module" in row}
    if tk:
        worst = max(tk, key=lambda lim: tk[lim]["bytes"])
        target("throttle_key_bytes", "RL.THROTTLE bytes per key (MEMORY USAGE) ≤ 128 at every limit",
               max(m["bytes"] for m in tk.values()), TARGETS["throttle_key_bytes"],
               f"largest at limit {int(worst):,}; " + ", ".join(
                   f"{int(lim):,}: {m['bytes']:.0f} B" for lim, m in tk.items()))
    lims = [str(x) for x in (min(cfg.key_memory_limits), max(cfg.key_memory_limits))]
    if all(x in tk for x in lims):
        lo_m, hi_m = tk[lims[0]], tk[lims[1]]
        target("throttle_key_bytes_1m_minus_10",
               f"RL.THROTTLE bytes per key the same at limit {int(lims[1]):,} as at {int(lims[0]):,} "
               "(|difference| ≤ 0 B)", abs(hi_m["bytes"] - lo_m["bytes"]),
               TARGETS["throttle_key_bytes_1m_minus_10"],
               f"{hi_m['bytes']:.0f} vs {lo_m['bytes']:.0f} B (MEMORY USAGE); freed by FLUSHDB "
               f"{hi_m['used_memory_delta_per_key']:.0f} vs {lo_m['used_memory_delta_per_key']:.0f} B per key")
    target("quota_vs_dayhour", "RL.QUOTA (DAY + HOUR, zone, now *) server cost ≤ 1.5 × RL.DAYHOUR",
           dh["quota"]["usec_per_request"] / dh["module"]["usec_per_request"], TARGETS["quota_vs_dayhour"],
           f"per-round {fmt_ratio_spread(round_ratios(db_, 'quota', 'module'))}; RL.QUOTA / Lua seed 001: "
           f"{dh['quota']['usec_per_request'] / dh['lua']['usec_per_request']:.3f}")

    ls, lsb = S["lease"], bench.batches["lease"]
    for size in cfg.lease_sizes:
        target(f"lease_vs_lua_{size}",
               f"RL.LEASE + RL.RELEASE server cost ≤ {TARGETS['lease_vs_lua']} × Lua semaphore + ZREM "
               f"({size:,} leases held)",
               ls[f"{size}:module"]["usec_per_request"] / ls[f"{size}:lua"]["usec_per_request"],
               TARGETS["lease_vs_lua"],
               f"{ls[f'{size}:module']['usec_per_request']:.2f} vs {ls[f'{size}:lua']['usec_per_request']:.2f} "
               f"usec per pair; per-round {fmt_ratio_spread(round_ratios(lsb, f'{size}:module', f'{size}:lua'))}")
    lo, hi = min(cfg.lease_sizes), max(cfg.lease_sizes)
    target("lease_1000_vs_10", f"RL.LEASE + RL.RELEASE at {hi:,} leases held ≤ 1.5 × at {lo}",
           ls[f"{hi}:module"]["usec_per_request"] / ls[f"{lo}:module"]["usec_per_request"],
           TARGETS["lease_1000_vs_10"],
           f"per-round {fmt_ratio_spread(round_ratios(lsb, f'{hi}:module', f'{lo}:module'))}; Lua: "
           f"{ls[f'{hi}:lua']['usec_per_request'] / ls[f'{lo}:lua']['usec_per_request']:.3f}")

    al, alb = S["all"], bench.batches["all"]
    refused = 1 - sum(b.extra["admitted"] for b in alb if b.contestant == "all" and not b.extra["warmup"]) / max(
        1, al["all"]["requests"])
    def per_call(contestant: str, cmd: str) -> float:
        calls = usec = 0
        for b in alb:
            if b.contestant == contestant and not b.extra["warmup"]:
                calls += b.stats.get(cmd, {}).get("calls", 0)
                usec += b.stats.get(cmd, {}).get("usec", 0)
        return usec / calls if calls else float("nan")

    # each command's cost inside the script against the same command sent
    # alone (on Redis 7.0, a module command in a script reads INFO's server
    # section for the frozen clock: SPEC.md "Conventions")
    inside = "; inside the Lua vs alone, µs per call: " + ", ".join(
        f"{cmd.upper()} {per_call('lua', cmd):.2f} vs {per_call('singles', cmd):.2f}"
        for cmd in ("rl.check", "rl.throttle", "rl.quota"))
    for other, name, what in (("singles", "all_vs_singles", "the three single commands' summed server cost "
                                                            "(pipelined, not atomic)"),
                              ("lua", "all_vs_lua", "the Lua that calls them and refunds on a refusal")):
        target(name, f"RL.ALL (CHECK + THROTTLE + QUOTA) server cost ≤ {TARGETS[name]} × {what}",
               al["all"]["usec_per_request"] / al[other]["usec_per_request"], TARGETS[name],
               f"{al['all']['usec_per_request']:.2f} vs {al[other]['usec_per_request']:.2f} usec per request; "
               f"{100 * refused:.1f}% refused by the QUOTA clause; "
               f"per-round {fmt_ratio_spread(round_ratios(alb, 'all', other))}"
               + (inside if other == "lua" else ""))

    L = []
    L.append(f"# redis-ratelimit benchmark{' (quick)' if quick else ''}\n")
    L.append(f"- date: {meta['date']}; host: {meta['host']}, {meta['cpus']} CPUs; {meta['server_version']}")
    L.append(f"- module: `{meta['module']}` (sha256 {meta['module_sha256']}…, file mtime {meta['module_mtime']}; "
             f"git {meta['git']})")
    L.append(f"- {cfg.rounds} measured rounds after 1 warm-up round; contestants interleaved, order rotated "
             f"every round; {cfg.conns} connections, {cfg.batch} requests per pipeline")
    L.append("- server cost: `CONFIG RESETSTAT` before each batch, `INFO commandstats` after; "
             "µs per request = Σ usec / requests of the contestant's command(s) (EVALSHA for Lua; "
             "the sum over the native commands for native and client-flow contestants). "
             "Headline figure: the median over rounds (p25..p75 and the mean over all rounds beside it); "
             "ratios are ratios of these medians, with the median of the paired per-round ratios as a check.")
    L.append("- ops/s: requests per wall second (median over rounds), pipelined over all connections from one "
             "Python client process (pre-encoded RESP) sharing the machine with the server")
    L.append("- server CPU µs/request: main-thread CPU time (INFO cpu) over the batch / requests (median over "
             "rounds): includes reading, parsing and replying, but not time the server sat preempted")
    L.append(f"- CPU pinning: {meta['pinning']}; load average at start {meta['loadavg_start']}, "
             f"at end {meta.get('loadavg_end')}\n")

    L.append("## Server cost and throughput\n")
    L.append("| workload | contestant | server µs/request (median) | p25..p75 | mean | × module | "
             "server CPU µs/request incl. I/O | ops/s (median) |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|")
    enc_seen = {sh.name: "/".join(sorted({e for by in bench.notes.get("check_encoding_after_run", {})
                                           .get(sh.name, {}).values() for e in by})) or "?"
                for sh in bench.check_shapes}
    workloads = [
        (sh.section, f"RL.CHECK, 2 rules, {sh.keys} keys × {sh.entries} entries ({enc_seen[sh.name]}), "
                     f"1 trimmed + 1 added per call", ["module", "native", "lua-ts", "lua-uuid"])
        for sh in bench.check_shapes
    ] + [
        ("throttle", f"RL.THROTTLE, 1 rule ({TH_RULE[0]} at once, {TH_RULE[1]} per hour), {cfg.check_keys} keys "
                     f"each visited every {MAX_WINDOW // cfg.check_entries // 1000} s, all admitted; RL.CHECK: "
                     f"1 rule ({TH_CHECK_RULE[0]} per hour), {cfg.check_entries} entries, 1 trimmed + 1 added "
                     f"per call", ["module", "check", "lua"]),
        ("throttle_contested", f"RL.THROTTLE contested, {cfg.contested_keys} keys, 1 rule "
                               f"({TH_CONTESTED_RULE[0]} at once, {TH_CONTESTED_RULE[1]} per "
                               f"{TH_CONTESTED_RULE[2]} ms), a visit per key every {TH_CONTESTED_PERIOD} ms "
                               f"of COST 1..3", ["module", "lua"]),
        ("dayhour", f"RL.DAYHOUR, {cfg.counter_keys} pairs × {cfg.counter_visits} visits "
                    f"({HOUR_LIMIT}/{cfg.counter_visits} admitted); keys named by the date and hour in "
                    f"{QUOTA_ZONE}, TTLs to the end of that day and hour; RL.QUOTA: one hash, the server "
                    f"computes the buckets", ["module", "quota", "lua"]),
        ("lockcount", f"RL.LOCKCOUNT, {cfg.counter_keys} pairs × {cfg.counter_visits} visits "
                      f"(max {LC_MAX}: {LC_MAX} admitted, 1 trips, rest locked)", ["module", "lua", "client"]),
        ("all", f"RL.ALL over 3 keys of one hash tag, {cfg.all_keys} triples each visited every "
                f"{MAX_WINDOW // cfg.check_entries // 1000} s: CHECK 2 rules ({cfg.check_entries} entries), "
                f"THROTTLE 1 rule (a full bucket), QUOTA {QUOTA_ZONE} DAY {ALL_DAY_LIMIT}; 1 triple in "
                f"{cfg.all_refuse_every} DAY {ALL_REFUSED_DAY_LIMIT} (refused by QUOTA after its first visit "
                f"of the day: {100 * refused:.1f}% of the requests); × column: × RL.ALL",
         ["all", "singles", "lua"]),
    ]
    for sec, title, order in workloads:
        base = S[sec][order[0]]["usec_per_request"]
        for c in order:
            s = S[sec][c]
            L.append(f"| {title if c == order[0] else ''} | {LABELS[(sec, c)]} | {s['usec_per_request']:.3f} | "
                     f"{s['usec_per_request_p25']:.2f}..{s['usec_per_request_p75']:.2f} | "
                     f"{s['usec_per_request_mean']:.2f} | "
                     f"{s['usec_per_request'] / base:.2f} | {s['server_cpu_usec_per_request']:.2f} | "
                     f"{s['ops_per_s']:,.0f} |")
    L.append("")
    ag = bench.notes.get("throttle_agreement", {})
    st, co = ag.get("throttle", {}), ag.get("throttle_contested", {})
    L.append(f"RL.THROTTLE and its Lua decide alike: every reply of both equals an exact-integer model of "
             f"SPEC.md's GCRA; admitted (warm-up included) {st.get('module')} / {st.get('lua')} steady, "
             f"{co.get('module')} / {co.get('lua')} contested (of {cfg.contested_calls * (cfg.rounds + 1)}); "
             f"stored TAT and expiry identical on {ag.get('state_keys_compared', 0) - ag.get('state_keys_differing', 0)} "
             f"of {ag.get('state_keys_compared', 0)} sampled keys (the Lua's µs × 1000 = the module's ns). "
             f"RL.QUOTA's buckets: each round, its fields and expiry are checked against the day and hour "
             f"the client computed for RL.DAYHOUR's keys.\n")
    aa = bench.notes.get("all_agreement", {})
    L.append(f"RL.ALL, the three commands and their Lua decide alike: every reply follows a model of the day "
             f"quota (refused by clause 3 exactly when the triple's day bucket is full), the three commands' "
             f"replies combined by RL.ALL's binding-clause rule and the Lua's reply equal RL.ALL's for every "
             f"request; admitted (warm-up included) "
             + " / ".join(f"{c} {v}" for c, v in aa.get("admitted", {}).items())
             + f"; state (CHECK scores, THROTTLE and QUOTA fields, expiries) identical on "
             f"{aa.get('triples_compared', 0) - aa.get('triples_differing', 0)} of {aa.get('triples_compared', 0)} "
             f"sampled triples (QUOTA only on the refused ones, where the pipelined commands still charge "
             f"CHECK and THROTTLE).\n")
    L.append("Per native command (µs per call over all measured rounds, calls per request):\n")
    L.append("| contestant | command | µs/call (mean) | calls/request |")
    L.append("|---|---|---:|---:|")
    for sec, c in (("check", "native"), ("check_skiplist", "native"), ("lockcount", "client"), ("all", "singles")):
        where = {sh.section: f", {sh.name} keys ({sh.entries} entries)" for sh in bench.check_shapes}.get(sec, "")
        for cmd, acc in S[sec][c]["commands"].items():
            if acc["calls"]:
                L.append(f"| {LABELS[(sec, c)]}{where} | {cmd.upper()} | {acc['usec_per_call']:.3f} | "
                         f"{acc['calls_per_request']:.2f} |")
    L.append("")

    L.append("## RL.CHECK steady state by encoding\n")
    L.append(f"Two rules ({RULES[0][0]}/{RULES[0][1] // 1000} s, {RULES[1][0]}/{RULES[1][1] // 3600000} h); each "
             f"key visited once every `period` ms, so it keeps `entries` members (1 trimmed + 1 added per call). "
             f"Both shapes run in the same rounds, interleaved with each other (order rotated every round). "
             f"zset-max-listpack-entries on this server: {bench.notes.get('zset_max_listpack_entries')}; "
             f"OBJECT ENCODING of 1 key in {max(1, bench.check_shapes[0].keys // 50)} per contestant, after the "
             f"prefill and after the run.\n")
    L.append("| keys × entries | period | encoding (module, Lua A, Lua B, native) | module µs | native µs | "
             "Lua A µs | Lua B µs | module / Lua A | module / native | module / Lua B |")
    L.append("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for sh in bench.check_shapes:
        cs = S[sh.section]
        u = {c: cs[c]["usec_per_request"] for c in cs}
        encs = bench.notes.get("check_encoding_after_run", {}).get(sh.name, {})
        e = ", ".join("/".join(encs.get(c, {}) or ["?"]) for c in ("module", "lua-uuid", "lua-ts", "native"))
        L.append(f"| {sh.keys:,} × {sh.entries} | {sh.period / 1000:g} s | {e} | {u['module']:.3f} | "
                 f"{u['native']:.3f} | {u['lua-uuid']:.3f} | {u['lua-ts']:.3f} | "
                 f"{u['module'] / u['lua-uuid']:.3f} | {u['module'] / u['native']:.3f} | "
                 f"{u['module'] / u['lua-ts']:.3f} |")
    L.append("")

    L.append("## Scale: RL.CHECK vs members in the window\n")
    L.append(f"{cfg.scale_keys} keys per size, prefilled by ZADD with in-window scores; admitted: limits "
             f"2×size+10 (each call adds one member and trims one); rejected: long rule at size/2 "
             f"(reply needs the retry-after member by rank; nothing written).\n")
    L.append("| members | encoding | admitted µs/call (median) | p25..p75 | rejected µs/call (median) | p25..p75 | admitted × size 10 |")
    L.append("|---:|---|---:|---:|---:|---:|---:|")
    for size in cfg.scale_sizes:
        a, r = sc[f"{size}:admitted"], sc[f"{size}:rejected"]
        L.append(f"| {size:,} | {bench.notes['scale_encoding'].get(str(size), '?')} | {a['usec_per_request']:.3f} | "
                 f"{a['usec_per_request_p25']:.2f}..{a['usec_per_request_p75']:.2f} | "
                 f"{r['usec_per_request']:.3f} | "
                 f"{r['usec_per_request_p25']:.2f}..{r['usec_per_request_p75']:.2f} | "
                 f"{a['usec_per_request'] / a_lo['usec_per_request']:.2f} |")
    L.append("")

    L.append("## Memory per entry (`MEMORY USAGE key SAMPLES 0` / members)\n")
    L.append(f"{cfg.memory_keys} keys per writer and size, each written by its own script or command; "
             "mean over the keys (skiplist nodes have random heights, hence the spread).\n")
    L.append("| members | writer | encoding | bytes (mean) | min..max | bytes/entry | example member |")
    L.append("|---:|---|---|---:|---:|---:|---|")
    names = {"module": "RL.CHECK (module)", "lua-uuid": "Lua seed 000 A (UUID)", "lua-ts": "Lua seed 000 B (timestamp)"}
    for n, row in memory.items():
        for c, m in row.items():
            L.append(f"| {int(n):,} | {names[c]} | {m['encoding']} | {m['bytes']:,.0f} | "
                     f"{m['bytes_min']:,}..{m['bytes_max']:,} | {m['bytes_per_entry']:.2f} | "
                     f"`{m['sample_member']}` |")
    L.append("")

    L.append("## Memory per key, one rule, filled to its limit\n")
    L.append("RL.THROTTLE (burst = limit, limit per hour) and the Lua GCRA: "
             f"{cfg.key_memory_throttle_keys} keys per limit, each drained by min(limit, 10) calls of "
             "COST limit/calls at one instant; RL.CHECK (limit per hour): max(10, limit/10000) calls of "
             "COST limit/calls at distinct times, so the key holds `limit` members ("
             + ", ".join(f"{n} key{'' if n == 1 else 's'} at {lim:,}" if n else f"none at {lim:,} in this run"
                         for lim, n in cfg.key_memory_check_keys.items())
             + "). bytes: mean `MEMORY USAGE key SAMPLES 0`; freed by FLUSHDB: INFO `used_memory` before − after "
             "FLUSHDB of the writer's own database / keys (adds the keyspace's and the expiry table's "
             "entries and buckets).\n")
    L.append("| limit | writer | keys | encoding | bytes (mean) | min..max | freed by FLUSHDB per key |")
    L.append("|---:|---|---:|---|---:|---:|---:|")
    kw = {"module": "RL.THROTTLE", "lua": "Lua GCRA (µs TAT)", "check": "RL.CHECK"}
    for lim in cfg.key_memory_limits:
        row = key_memory.get(str(lim), {})
        for c in ("module", "lua", "check"):
            m = row.get(c)
            if m is None:
                L.append(f"| {lim:,} | {kw[c]} | 0 | — | not measured in this run | | |")
                continue
            L.append(f"| {lim:,} | {kw[c]} | {m['keys']} | {m['encoding']} | {m['bytes']:,.0f} | "
                     f"{m['bytes_min']:,}..{m['bytes_max']:,} | {m['used_memory_delta_per_key']:,.0f} |")
    L.append("")

    L.append("## Targets (ratios from this run)\n")
    L.append("| target | ratio | limit | result | detail |")
    L.append("|---|---:|---:|---|---|")
    for t in targets:
        L.append(f"| {t['label']} | {t['value']:.3f} | {t['limit']} | {t['verdict']} | "
                 f"{t['detail']} |")
    L.append("")
    L.append("![server cost](server-cost.svg)\n")
    L.append("![scale](scale.svg)\n")
    if bench.errors:
        L.append("## Errors\n")
        L.extend(f"- {e}" for e in bench.errors)
    return "\n".join(L) + "\n", targets


def pin(server: Server) -> str:
    """Server main thread on the first CPU, this client on the others, so the
    client's threads do not preempt the server (other load still can)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2 or server.proc is None:
            return "off (one CPU)"
        os.sched_setaffinity(server.proc.pid, {cpus[0]})
        os.sched_setaffinity(0, set(cpus[1:]))  # threads started later inherit it
        return f"server on CPU {cpus[0]}, client on CPU {','.join(map(str, cpus[1:]))}"
    except (AttributeError, OSError) as e:
        return f"off ({e})"


def file_sha256(path: str) -> str:
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def git_rev() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + ("+dirty src" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a short run (under a minute) to check the bench works")
    ap.add_argument("--out", default="bench-out", help="output directory (default: bench-out/)")
    ap.add_argument("--rounds", type=int, help="override the number of measured rounds")
    ap.add_argument("--pin", action="store_true",
                    help="pin the server to one CPU and the client to the others (off by default: under "
                         "other load, a pinned server cannot move to a free CPU)")
    args = ap.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.rounds:
        cfg.rounds = args.rounds
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not Path(MODULE).exists():
        print(f"module not found: {MODULE} (run `make build`)", file=sys.stderr)
        return 2

    t_start = time.time()
    loadavg_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with Server(module=True) as server:
        pinning = pin(server) if args.pin else "off"
        try:
            bench = Bench(cfg, server)
        except Exception as e:  # noqa: BLE001 - e.g. a Lua contestant that does not compile
            print(f"benchmark aborted: could not set up the contestants: {e}", file=sys.stderr)
            return 1
        info = bench.ctl.info("server")
        meta = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "host": platform.node(), "cpus": os.cpu_count(),
                "server_version": f"{'valkey' if 'valkey_version' in info else 'redis'} "
                                  f"{info.get('redis_version')}",
                "module": MODULE, "module_sha256": file_sha256(MODULE),
                "module_mtime": _dt.datetime.fromtimestamp(os.path.getmtime(MODULE)).isoformat(timespec="seconds"),
                "git": git_rev(), "quick": args.quick, "config": cfg.__dict__,
                "port": server.port, "pinning": pinning, "loadavg_start": loadavg_start}
        print(f"redis-server on 127.0.0.1:{server.port}, module {MODULE}", flush=True)
        try:
            t1 = time.time()
            bench.check_setup()
            bench.throttle_setup()
            bench.scale_setup()
            bench.lease_setup()
            bench.all_setup()
            print(f"setup: {time.time() - t1:.1f} s", flush=True)
            for rnd in range(cfg.rounds + 1):
                measured = rnd > 0
                t0 = time.time()
                spent = []
                for name, section in (("check", bench.check_round), ("throttle", bench.throttle_round),
                                      ("contested", bench.throttle_contested_round),
                                      ("dayhour", bench.dayhour_round), ("lockcount", bench.lockcount_round),
                                      ("scale", bench.scale_round), ("lease", bench.lease_round),
                                      ("all", bench.all_round)):
                    t1 = time.time()
                    section(rnd, measured)
                    spent.append(f"{name} {time.time() - t1:.1f}")
                print(f"round {rnd}{'' if measured else ' (warm-up)'}: {time.time() - t0:.1f} s "
                      f"({', '.join(spent)})", flush=True)
            bench.check_shape()
            bench.throttle_agreement()
            bench.all_agreement()
            t1 = time.time()
            memory = bench.memory()
            key_memory = bench.key_memory()
            print(f"memory: {time.time() - t1:.1f} s", flush=True)
        except (BenchError, Exception) as e:  # noqa: BLE001 - any contestant failure ends the run
            bench.fail(f"{type(e).__name__}: {e}")
            print(f"benchmark aborted: {e}", file=sys.stderr)
            (out_dir / "results.json").write_text(json.dumps(
                {"meta": meta, "errors": bench.errors,
                 "batches": {k: [b.to_json() for b in v] for k, v in bench.batches.items()}}, indent=1))
            return 1
        finally:
            for c in bench.conns:
                c.close()
            bench.ctl.close()

    meta["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    summary = {sec: summarize(bs) for sec, bs in bench.batches.items()}
    report, targets = build_report(bench, cfg, args.quick, meta, summary, memory, key_memory, out_dir)
    (out_dir / "results.md").write_text(report)
    meta["elapsed_s"] = time.time() - t_start
    (out_dir / "results.json").write_text(json.dumps({
        "meta": meta, "targets": targets, "summary": summary, "memory": memory, "key_memory": key_memory,
        "notes": bench.notes,
        "errors": bench.errors,
        "batches": {k: [b.to_json() for b in v] for k, v in bench.batches.items()},
    }, indent=1))
    ck, dh, lc = summary["check"], summary["dayhour"], summary["lockcount"]
    th, tc = summary["throttle"], summary["throttle_contested"]
    al = summary["all"]
    svg_cost_chart([
        *[(f"RL.CHECK (2 rules, steady state, {sh.entries} entries: {sh.name})", [
            ("module", summary[sh.section]["module"]["usec_per_request"], COLORS["module"]),
            ("native commands (sum)", summary[sh.section]["native"]["usec_per_request"], COLORS["native"]),
            ("Lua, timestamp members", summary[sh.section]["lua-ts"]["usec_per_request"], COLORS["lua-ts"]),
            ("Lua, UUID members", summary[sh.section]["lua-uuid"]["usec_per_request"], COLORS["lua"])])
          for sh in bench.check_shapes],
        ("RL.THROTTLE (1 rule, steady state)", [
            ("RL.THROTTLE", th["module"]["usec_per_request"], COLORS["module"]),
            ("RL.CHECK, same schedule", th["check"]["usec_per_request"], COLORS["native"]),
            ("Lua GCRA", th["lua"]["usec_per_request"], COLORS["lua"])]),
        ("RL.THROTTLE (contested, a third refused)", [
            ("RL.THROTTLE", tc["module"]["usec_per_request"], COLORS["module"]),
            ("Lua GCRA", tc["lua"]["usec_per_request"], COLORS["lua"])]),
        ("RL.DAYHOUR / RL.QUOTA (day + hour)", [
            ("RL.DAYHOUR", dh["module"]["usec_per_request"], COLORS["module"]),
            ("RL.QUOTA (Asia/Shanghai, now *)", dh["quota"]["usec_per_request"], COLORS["lua-ts"]),
            ("Lua (seed 001)", dh["lua"]["usec_per_request"], COLORS["lua"])]),
        ("RL.ALL, CHECK + THROTTLE + QUOTA (one decision)", [
            ("RL.ALL", al["all"]["usec_per_request"], COLORS["module"]),
            ("the 3 commands (sum, not atomic)", al["singles"]["usec_per_request"], COLORS["native"]),
            ("Lua, 3 commands + refunds", al["lua"]["usec_per_request"], COLORS["lua"])]),
        ("RL.LOCKCOUNT", [
            ("module", lc["module"]["usec_per_request"], COLORS["module"]),
            ("client flow (native sum)", lc["client"]["usec_per_request"], COLORS["client"]),
            ("Lua (seed 004)", lc["lua"]["usec_per_request"], COLORS["lua"])]),
    ], out_dir / "server-cost.svg", "redis-ratelimit: server cost per request")
    svg_scale_chart({v: [(size, summary["scale"][f"{size}:{v}"]["usec_per_request"]) for size in cfg.scale_sizes]
                     for v in ("admitted", "rejected")}, out_dir / "scale.svg")

    print()
    print(report)
    print("Ratios:")
    for t in targets:
        print(f"  {t['verdict']}  {t['label']}: {t['value']:.3f} (limit {t['limit']})"
              f"{'  [' + t['detail'] + ']' if t['detail'] else ''}")
    print(f"\nwrote {out_dir}/results.md, results.json, server-cost.svg, scale.svg "
          f"in {time.time() - t_start:.0f} s")
    if bench.errors:
        print(f"{len(bench.errors)} contestant error(s); see above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
