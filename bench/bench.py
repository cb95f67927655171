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
    memory_sizes: list[int] = field(default_factory=lambda: [100, 1000])
    memory_keys: int = 12  # keys per writer and size (skiplist node sizes are random)


# Many short rounds rather than a few long ones: the medians over rounds shrug
# off rounds disturbed by other load on the machine (a preempted server shows
# up as inflated wall-clock usec in commandstats).
FULL = Config(rounds=40, conns=4, batch=100, check_keys=1000, check_entries=40, check_calls=4000,
              counter_keys=400, counter_visits=25, scale_sizes=[10, 100, 1000, 10000, 100000],
              scale_keys=4, scale_calls=2000)
QUICK = Config(rounds=8, conns=4, batch=100, check_keys=1000, check_entries=40, check_calls=2000,
               counter_keys=400, counter_visits=25, scale_sizes=[10, 100, 1000, 10000, 100000],
               scale_keys=2, scale_calls=1000, memory_keys=3)

RULES = [(1000, 60000), (5000, 3600000)]  # (count, window ms)
MAX_WINDOW = max(w for _, w in RULES)
DAY_LIMIT, HOUR_LIMIT, DAY_TTL, HOUR_TTL = 1000, 20, 86400000, 3600000
LC_WINDOW, LC_MAX, LC_LOCKTIME = 3600000, 20, 3600000

TARGETS = {
    "check_vs_lua": 0.25,
    "dayhour_vs_lua": 0.25,
    "lockcount_vs_lua": 0.25,
    "check_vs_native": 1.0,
    "scale_100k_vs_10": 2.0,
    "mem_vs_ts_100": 1.0,
    "mem_vs_ts_1000": 1.0,
    "mem_vs_uuid_100": 0.6,
}


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
                    for name in ("check_uuid", "check_timestamp", "dayhour", "lockcount")}
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

    def check_setup(self):
        cfg = self.cfg
        self.base = int(self.ctl.time()[0]) * 1000
        self.period = MAX_WINDOW // cfg.check_entries  # per-key time between visits
        self.step = self.period // cfg.check_keys  # global clock step per request
        assert self.step * cfg.check_keys == self.period
        self.check_next = {c: 0 for c in ("module", "lua-uuid", "lua-ts", "native")}
        # Each key holds `check_entries` members, as if it had been visited every
        # `period` ms: at its next visit one member leaves the longest window
        # (trim) and one is added, so the shape stays the same all run long.
        pipe_lines = {c: [] for c in self.check_next}
        for k in range(cfg.check_keys):
            first = self.base + (k + 1) * self.step
            scores = [first - j * self.period for j in range(cfg.check_entries, 0, -1)]
            for s in scores:
                pipe_lines["module"].append(enc("RL.CHECK", f"ck:mod:{k}", s, *flat_rules(RULES)))
            for c, prefix in (("lua-uuid", "ck:lua:"), ("native", "ck:nat:")):
                args = []
                for s in scores:
                    args += [s, str(uuid.uuid4())]
                pipe_lines[c].append(enc("ZADD", prefix + str(k), *args))
                pipe_lines[c].append(enc("PEXPIRE", prefix + str(k), MAX_WINDOW))
            args = []
            for s in scores:
                args += [s, s]
            pipe_lines["lua-ts"].append(enc("ZADD", f"ck:ts:{k}", *args))
            pipe_lines["lua-ts"].append(enc("PEXPIRE", f"ck:ts:{k}", MAX_WINDOW))
        for c, lines in pipe_lines.items():
            for part in chunks(lines, 2000):
                replies = parse_all(self.conns[0].roundtrip(b"".join(part)), len(part))
                for r in replies:
                    if find_error(r) is not None:
                        raise BenchError(f"prefill of {c}: {find_error(r)}")
                    if c == "module" and r[0] != 0:
                        raise BenchError(f"prefill of module: RL.CHECK refused: {r}")

    def check_round(self, rnd: int, measured: bool):
        cfg = self.cfg
        order = rotate(["module", "lua-uuid", "lua-ts", "native"], rnd)
        for c in order:
            i0 = self.check_next[c]
            n = cfg.check_calls
            self.check_next[c] += n
            per_conn: list[list[bytes]] = [[] for _ in self.conns]
            for i in range(i0, i0 + n):
                k = i % cfg.check_keys
                now = self.base + (i + 1) * self.step
                conn = k % len(self.conns)
                if c == "module":
                    cmd = enc("RL.CHECK", f"ck:mod:{k}", now, *flat_rules(RULES))
                elif c == "lua-uuid":
                    cmd = enc("EVALSHA", self.sha["check_uuid"], 1, f"ck:lua:{k}", str(uuid.uuid4()), now,
                              *flat_rules(RULES))
                elif c == "lua-ts":
                    cmd = enc("EVALSHA", self.sha["check_timestamp"], 1, f"ck:ts:{k}", now, *flat_rules(RULES))
                else:
                    key = f"ck:nat:{k}"
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
                            raise BenchError(f"RL.CHECK contestant {c}: {e}")
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
                self.fail(f"RL.CHECK contestant {c}: {n - admitted} of {n} requests not admitted")
            if c == "native":
                b.extra["trimmed_per_request"] = trimmed / n
                if trimmed < n * 0.9:
                    self.fail(f"RL.CHECK native: only {trimmed} members trimmed in {n} requests")
            if c == "module":
                check_count(b, "rl.check", n)
            elif c.startswith("lua"):
                check_count(b, "evalsha", n)
            self.record("check", b, rnd, measured)

    def check_shape(self):
        """Members per key after the run (the steady state keeps `check_entries`)."""
        shape = {}
        for c, prefix in (("module", "ck:mod:"), ("lua-uuid", "ck:lua:"), ("lua-ts", "ck:ts:"),
                          ("native", "ck:nat:")):
            sample = range(0, self.cfg.check_keys, max(1, self.cfg.check_keys // 50))
            pipe = self.ctl.pipeline(transaction=False)
            for k in sample:
                pipe.zcard(prefix + str(k))
            sizes = pipe.execute()
            shape[c] = {"min": min(sizes), "max": max(sizes), "mean": sum(sizes) / len(sizes)}
            if min(sizes) < self.cfg.check_entries - 1 or max(sizes) > self.cfg.check_entries + 1:
                self.fail(f"RL.CHECK {c}: keys hold {min(sizes)}..{max(sizes)} members, "
                          f"expected about {self.cfg.check_entries}")
        self.notes["check_shape_after_run"] = shape

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
        cfg = self.cfg
        sched = self.counter_schedule()
        n = cfg.counter_keys * cfg.counter_visits
        for c in rotate(["module", "lua"], rnd):
            tag = "mod" if c == "module" else "lua"
            jobs, plans = [], []
            for conn, items in zip(self.conns, sched):
                cmds = []
                for v, k in items:
                    day, hour = f"dh:{tag}:{rnd}:{k}:d", f"dh:{tag}:{rnd}:{k}:h"
                    if c == "module":
                        cmds.append(enc("RL.DAYHOUR", day, hour, DAY_LIMIT, HOUR_LIMIT, DAY_TTL, HOUR_TTL))
                    else:
                        cmds.append(enc("EVALSHA", self.sha["dayhour"], 2, day, hour, DAY_LIMIT, HOUR_LIMIT,
                                        DAY_TTL, HOUR_TTL))
                parts = chunks(cmds, cfg.batch)
                jobs.append(pipelined_job(conn, [b"".join(p) for p in parts]))
                plans.append(chunks(items, cfg.batch))
            b, results = measure(self.ctl, c, n, ["rl.dayhour" if c == "module" else "evalsha"], jobs)
            admitted = 0
            for bufs, plan in zip(results, plans):
                for buf, items in zip(bufs, plan):
                    for r, (v, _k) in zip(parse_all(buf, len(items)), items):
                        if find_error(r) is not None:
                            raise BenchError(f"RL.DAYHOUR contestant {c}: {find_error(r)}")
                        if r != self.dayhour_expected(v):
                            self.fail(f"RL.DAYHOUR {c}: visit {v} replied {r}, expected "
                                      f"{self.dayhour_expected(v)}")
                            raise BenchError("RL.DAYHOUR contestants disagree")
                        admitted += r[0] <= DAY_LIMIT and r[1] <= HOUR_LIMIT
            b.extra["admitted"] = admitted
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


def encoding(ctl, key) -> str:
    e = ctl.object("encoding", key)
    return e.decode() if isinstance(e, bytes) else str(e)


def first_member(ctl, key):
    m = ctl.zrange(key, -1, -1)
    return m[0].decode(errors="replace") if m else None


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
    ("dayhour", "module"): "RL.DAYHOUR (module)",
    ("dayhour", "lua"): "Lua, seed 001 day/hour",
    ("lockcount", "module"): "RL.LOCKCOUNT (module)",
    ("lockcount", "lua"): "Lua, seed 004 count-then-lock",
    ("lockcount", "client"): "client flow, seed 004 (GET/GET/SET|INCR|SET+DEL round trips)",
}


def build_report(bench: Bench, cfg: Config, quick: bool, meta: dict, summary: dict, memory: dict,
                 out_dir: Path) -> tuple[str, list[dict]]:
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

    cb, db_, lb = bench.batches["check"], bench.batches["dayhour"], bench.batches["lockcount"]
    ck, dh, lc, sc = S["check"], S["dayhour"], S["lockcount"], S["scale"]
    target("check_vs_lua", "RL.CHECK server cost ≤ 0.25 × Lua (seed 000 A)",
           ck["module"]["usec_per_request"] / ck["lua-uuid"]["usec_per_request"], TARGETS["check_vs_lua"],
           f"per-round {fmt_ratio_spread(round_ratios(cb, 'module', 'lua-uuid'))}")
    target("dayhour_vs_lua", "RL.DAYHOUR server cost ≤ 0.25 × Lua (seed 001)",
           dh["module"]["usec_per_request"] / dh["lua"]["usec_per_request"], TARGETS["dayhour_vs_lua"],
           f"per-round {fmt_ratio_spread(round_ratios(db_, 'module', 'lua'))}")
    target("lockcount_vs_lua", "RL.LOCKCOUNT server cost ≤ 0.25 × Lua (seed 004)",
           lc["module"]["usec_per_request"] / lc["lua"]["usec_per_request"], TARGETS["lockcount_vs_lua"],
           f"per-round {fmt_ratio_spread(round_ratios(lb, 'module', 'lua'))}")
    target("check_vs_native", "RL.CHECK server cost ≤ 1.0 × native command sum",
           ck["module"]["usec_per_request"] / ck["native"]["usec_per_request"], TARGETS["check_vs_native"],
           f"per-round {fmt_ratio_spread(round_ratios(cb, 'module', 'native'))}")
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
    workloads = [
        ("check", f"RL.CHECK, 2 rules, {cfg.check_keys} keys × {cfg.check_entries} entries, 1 trimmed + 1 added per call",
         ["module", "native", "lua-ts", "lua-uuid"]),
        ("dayhour", f"RL.DAYHOUR, {cfg.counter_keys} pairs × {cfg.counter_visits} visits "
                    f"({HOUR_LIMIT}/{cfg.counter_visits} admitted)", ["module", "lua"]),
        ("lockcount", f"RL.LOCKCOUNT, {cfg.counter_keys} pairs × {cfg.counter_visits} visits "
                      f"(max {LC_MAX}: {LC_MAX} admitted, 1 trips, rest locked)", ["module", "lua", "client"]),
    ]
    for sec, title, order in workloads:
        base = S[sec]["module"]["usec_per_request"]
        for c in order:
            s = S[sec][c]
            L.append(f"| {title if c == order[0] else ''} | {LABELS[(sec, c)]} | {s['usec_per_request']:.3f} | "
                     f"{s['usec_per_request_p25']:.2f}..{s['usec_per_request_p75']:.2f} | "
                     f"{s['usec_per_request_mean']:.2f} | "
                     f"{s['usec_per_request'] / base:.2f} | {s['server_cpu_usec_per_request']:.2f} | "
                     f"{s['ops_per_s']:,.0f} |")
    L.append("")
    L.append("Per native command (µs per call over all measured rounds, calls per request):\n")
    L.append("| contestant | command | µs/call (mean) | calls/request |")
    L.append("|---|---|---:|---:|")
    for sec, c in (("check", "native"), ("lockcount", "client")):
        for cmd, acc in S[sec][c]["commands"].items():
            if acc["calls"]:
                L.append(f"| {LABELS[(sec, c)]} | {cmd.upper()} | {acc['usec_per_call']:.3f} | "
                         f"{acc['calls_per_request']:.2f} |")
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
            bench.check_setup()
            bench.scale_setup()
            for rnd in range(cfg.rounds + 1):
                measured = rnd > 0
                t0 = time.time()
                bench.check_round(rnd, measured)
                bench.dayhour_round(rnd, measured)
                bench.lockcount_round(rnd, measured)
                bench.scale_round(rnd, measured)
                print(f"round {rnd}{'' if measured else ' (warm-up)'}: {time.time() - t0:.1f} s", flush=True)
            bench.check_shape()
            memory = bench.memory()
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
    report, targets = build_report(bench, cfg, args.quick, meta, summary, memory, out_dir)
    (out_dir / "results.md").write_text(report)
    meta["elapsed_s"] = time.time() - t_start
    (out_dir / "results.json").write_text(json.dumps({
        "meta": meta, "targets": targets, "summary": summary, "memory": memory, "notes": bench.notes,
        "errors": bench.errors,
        "batches": {k: [b.to_json() for b in v] for k, v in bench.batches.items()},
    }, indent=1))
    ck, dh, lc = summary["check"], summary["dayhour"], summary["lockcount"]
    svg_cost_chart([
        ("RL.CHECK (2 rules, steady state)", [
            ("module", ck["module"]["usec_per_request"], COLORS["module"]),
            ("native commands (sum)", ck["native"]["usec_per_request"], COLORS["native"]),
            ("Lua, timestamp members", ck["lua-ts"]["usec_per_request"], COLORS["lua-ts"]),
            ("Lua, UUID members", ck["lua-uuid"]["usec_per_request"], COLORS["lua"])]),
        ("RL.DAYHOUR", [
            ("module", dh["module"]["usec_per_request"], COLORS["module"]),
            ("Lua (seed 001)", dh["lua"]["usec_per_request"], COLORS["lua"])]),
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
