"""A local backend: the RL commands answered in process, for tests without Redis.

``LocalRedis`` (and ``AsyncLocalRedis``) stand where a ``redis.Redis``
(``redis.asyncio.Redis``) stands: ``RateLimiter(LocalRedis())`` decides every
limit kind — windows (``RL.CHECK``), buckets (``RL.THROTTLE``), quotas
(``RL.QUOTA``), concurrency (``RL.LEASE``/``RELEASE``/``RENEW``), lockouts
(``RL.LOCKCOUNT``), several at once (``RL.ALL ... DETAILS``, ``REFUND``,
``DEBIT``) and every peek — with SPEC.md's formulas, so a test sees the
decisions, ``RateLimit`` headers and ``Retry-After`` the module gives. The
golden *sequence* cases (``clients/conformance/cases/sequences.json``) run
against this class and against the real module, in every client.

The clock is injectable (``ManualClock``): ``now = *`` is its time, and keys
expire by it. What it does not do: argument validation beyond what the
client already refuses (it trusts the client's argv), key expiries on SPEC's
grid (it keeps the exact expiry: no decision depends on the grid), Cluster,
replication. It is one process's memory: not a shared limit.

It is also what the ``local`` Redis-down mode decides on (``FAIL_LOCAL``,
module ``redis_rl.local_mode``): the same commands the limiter sends to
Redis, so the same decisions, costs, estimates, leases and ``Retry-After``.
For that its memory is bounded (``max_keys`` keys, ``max_entries`` entries:
a sorted-set member per unit of a window or lease, a hash field, a string):
a key is dropped only when it expires, as in Redis, never to make room; a
command that would grow it past the bound is undone and raises
``LocalBackendFullError`` (its ``retry_after_ms``: until the earliest key
expires), which the local mode answers as a refusal. The same bounds and
error as the Java and Node local backends.
"""

from __future__ import annotations

import itertools
import threading
import time
import zoneinfo
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import Any, Callable

import redis
import redis.asyncio

from .errors import LocalBackendFullError

__all__ = ["LocalRedis", "AsyncLocalRedis", "LocalEngine", "ManualClock", "LocalBackendFullError",
           "DEFAULT_MAX_KEYS", "DEFAULT_MAX_ENTRIES"]

DEFAULT_MAX_KEYS = 100_000  # keys held at once
DEFAULT_MAX_ENTRIES = 1_000_000  # sorted-set members (one per unit of a window or lease), hash fields, strings
_GROWING = frozenset(("RL.CHECK", "RL.THROTTLE", "RL.QUOTA", "RL.LEASE", "RL.ALL", "RL.LOCKCOUNT"))

Clock = Callable[[], int]
Row = list[int]  # [limited, rule, limit, remaining, retry_after, reset_after]

_KINDS = ("CHECK", "THROTTLE", "QUOTA", "LEASE")
_NS = 1_000_000


class ManualClock:
    """A clock a test moves by hand (ms since the epoch)."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00Z
        self.ms = start_ms

    def __call__(self) -> int:
        return self.ms

    def advance(self, ms: int | timedelta) -> None:
        self.ms += ms // timedelta(milliseconds=1) if isinstance(ms, timedelta) else int(ms)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class _Key:
    kind: str  # "zset", "hash", "string"
    value: Any
    expire_at: int | None = None


@dataclass
class _Clause:
    kind: str
    key: str
    args: list[str]
    cost: int = 1
    token: str | None = None
    rows: list[Row] = field(default_factory=list)
    admitted: bool = True
    apply: Callable[[], None] = lambda: None


def _binding(rows: list[Row], admitted: bool, per: int = 1) -> int:
    """SPEC's binding rule (0-based): refused, -1 first, then the largest retry;
    admitted, the fewest left (``remaining // per``), then the longest reset."""
    idx = range(len(rows))
    if not admitted:
        refusing = [i for i in idx if rows[i][0]]
        never = [i for i in refusing if rows[i][4] == -1]
        if never:
            return never[0]
        return min(refusing, key=lambda i: (-rows[i][4], i))
    return min(idx, key=lambda i: (rows[i][3] // per, -rows[i][5], i))


class LocalEngine:
    """The keyspace and the commands; thread-safe (one lock, as Redis is one thread)."""

    def __init__(self, clock: Clock | None = None, *, max_keys: int = DEFAULT_MAX_KEYS,
                 max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if not (isinstance(max_keys, int) and isinstance(max_entries, int) and max_keys >= 1 and max_entries >= 1):
            raise ValueError("local backend bounds must be at least 1")
        self.clock: Clock = clock or (lambda: time.time_ns() // _NS)
        self.keys: dict[str, _Key] = {}
        self.max_keys, self.max_entries = max_keys, max_entries
        self.entries = 0  # kept up to date per command from the keys it touches
        self._next_sweep = 0  # no scan for expired keys before this time (ms): the earliest expiry last seen
        self._names = itertools.count(1)
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forgets every key (the clock stays)."""
        with self._lock:
            self.keys.clear()
            self.entries = 0
            self._next_sweep = 0

    # --- keyspace ---
    def _get(self, key: str, t: int) -> _Key | None:
        k = self.keys.get(key)
        if k is not None and k.expire_at is not None and k.expire_at <= t:
            del self.keys[key]
            return None
        return k

    def _zset(self, key: str, t: int) -> dict[str, float]:
        k = self._get(key, t)
        return k.value if k is not None else {}

    def _hash(self, key: str, t: int) -> dict[str, str]:
        k = self._get(key, t)
        return k.value if k is not None else {}

    def _put(self, key: str, kind: str, value: Any, expire_at: int | None, keep_longer: bool = True) -> None:
        old = self.keys.get(key)
        if not value:
            self.keys.pop(key, None)
            return
        if keep_longer and old is not None and old.expire_at is not None and expire_at is not None:
            expire_at = max(old.expire_at, expire_at)
        self.keys[key] = _Key(kind, value, expire_at)

    def execute(self, *argv: Any) -> Any:
        args = [a.decode() if isinstance(a, bytes) else str(a) for a in argv]
        with self._lock:
            return self._bounded(args)

    # --- bounded memory ---
    def _bounded(self, args: list[str]) -> Any:
        """Runs a command keeping the count of entries; near the bound the
        keys it touches are saved first and put back when it grew past the
        bound (``LocalBackendFullError``). Only expired keys are ever dropped
        to make room."""
        name = args[0].upper()
        touched = _touched(name, args)
        grows = name in _GROWING and args[-1].upper() != "REFUND" and not (
            name == "RL.ALL" and len(args) > 1 and args[-2].upper() == "REFUND")
        t = self.clock()
        margin = _margin(args)
        saved: dict[str, _Key | None] | None = None
        if grows and (len(self.keys) + len(touched) > self.max_keys or self.entries + margin > self.max_entries):
            self._sweep(t)
            if len(self.keys) + len(touched) > self.max_keys or self.entries + margin > self.max_entries:
                saved = {}
                for k in touched:
                    old = self.keys.get(k)
                    saved[k] = None if old is None else _Key(old.kind, _copy(old.value), old.expire_at)
        before = self._weight(touched)
        try:
            reply = self._execute(args)
        finally:
            self.entries += self._weight(touched) - before
        after = self._weight(touched)
        if saved is not None and (len(self.keys) > self.max_keys or (after > before and self.entries > self.max_entries)):
            self.entries -= after - before
            for k, v in saved.items():
                if v is None:
                    self.keys.pop(k, None)
                else:
                    self.keys[k] = v
            raise LocalBackendFullError(1000 if self._next_sweep <= t else self._next_sweep - t,
                                        self.max_keys, self.max_entries)
        return reply

    def _weight(self, touched: list[str]) -> int:
        w = 0
        for k in touched:
            v = self.keys.get(k)
            if v is not None:
                w += len(v.value) if isinstance(v.value, dict) else 1
        return w

    def _sweep(self, t: int) -> None:
        """Drops every expired key (at most one scan until the earliest expiry the last one saw)."""
        if t < self._next_sweep:
            return
        earliest = None
        for k in list(self.keys):
            v = self.keys[k]
            if v.expire_at is not None and v.expire_at <= t:
                self.entries -= len(v.value) if isinstance(v.value, dict) else 1
                del self.keys[k]
            elif v.expire_at is not None:
                earliest = v.expire_at if earliest is None else min(earliest, v.expire_at)
        self._next_sweep = 0 if earliest is None else earliest  # nothing expires: scan again next time

    def _execute(self, args: list[str]) -> Any:
        name = args[0].upper()
        t = self.clock()
        if name in ("RL.CHECK", "RL.PEEK", "RL.THROTTLE", "RL.THROTTLEPEEK", "RL.QUOTA", "RL.QUOTAPEEK",
                    "RL.LEASE", "RL.LEASEPEEK"):
            kind = {"RL.CHECK": "CHECK", "RL.PEEK": "CHECK", "RL.THROTTLE": "THROTTLE",
                    "RL.THROTTLEPEEK": "THROTTLE", "RL.QUOTA": "QUOTA", "RL.QUOTAPEEK": "QUOTA",
                    "RL.LEASE": "LEASE", "RL.LEASEPEEK": "LEASE"}[name]
            peek = name.endswith("PEEK")
            now = self._now(args[2], t)
            rest = args[3:]
            mode = None
            if rest and rest[-1].upper() in ("REFUND", "DEBIT"):
                mode = rest[-1].upper()
                rest = rest[:-1]
            c = self._clause(kind, args[1], rest, now, t, peek=peek or mode is not None, ttl_counted=not peek)
            if mode == "REFUND":
                self._refund(c, now, t)
            elif mode == "DEBIT":
                self._debit(c, now, t)
            if mode is not None:
                c = self._clause(kind, args[1], self._with_cost(rest, 0), now, t, peek=True)
            elif c.admitted and not peek:
                c.apply()
            b = _binding(c.rows, c.admitted)
            row = list(c.rows[b])
            row[0] = 0 if c.admitted else 1
            row[1] = b + 1
            if name == "RL.LEASE":
                row.append(c.token if c.admitted else None)
            return row
        if name in ("RL.ALL", "RL.ALLPEEK"):
            return self._all(args, t, peek=name == "RL.ALLPEEK")
        if name == "RL.RELEASE":
            return self._release(args[1], self._now(args[2], t), t, args[3:])
        if name == "RL.RENEW":
            return self._renew(args[1], self._now(args[2], t), t, int(args[3]), args[4:])
        if name == "RL.LOCKCOUNT":
            return self._lockcount(t, *args[1:3], *(int(x) for x in args[3:6]))
        if name == "DEL":
            n = sum(1 for k in args[1:] if self._get(k, t) is not None)
            for k in args[1:]:
                self.keys.pop(k, None)
            return n
        if name == "GET":
            k = self._get(args[1], t)
            return None if k is None else str(k.value)
        if name == "PTTL":
            k = self._get(args[1], t)
            return -2 if k is None else -1 if k.expire_at is None else k.expire_at - t
        if name == "EXISTS":
            return sum(1 for k in args[1:] if self._get(k, t) is not None)
        if name == "HGETALL":
            return dict(self._hash(args[1], t))
        if name == "HSET":
            h = dict(self._hash(args[1], t))
            new = sum(1 for f in args[2::2] if f not in h)
            h.update(zip(args[2::2], args[3::2]))
            self._put(args[1], "hash", h, None, keep_longer=False)
            return new
        if name == "PING":
            return True
        if name == "COMMAND INFO" or (name == "COMMAND" and len(args) > 1 and args[1].upper() == "INFO"):
            return [["rl.all"]]  # the module is "loaded": every RL command is answered here
        raise redis.exceptions.ResponseError(f"unknown command '{args[0]}' (the local backend answers RL.* only)")

    @staticmethod
    def _now(arg: str, t: int) -> int:
        return t if arg == "*" else int(arg)

    @staticmethod
    def _with_cost(rest: list[str], cost: int) -> list[str]:
        out = list(rest)
        for i in range(len(out) - 1):
            if out[i].upper() == "COST":
                out[i + 1] = str(cost)
                return out
        return out + ["COST", str(cost)]

    # --- clauses: each computes its rows (every rule alone) and its writes ---
    def _clause(self, kind: str, key: str, rest: list[str], t: int, server: int, *, peek: bool,
                ttl_counted: bool = True) -> _Clause:
        body, cost, token = [], 1, None
        i = 0
        while i < len(rest):
            u = rest[i].upper()
            if u == "COST":
                cost = int(rest[i + 1])
                i += 2
            elif u == "TOKEN":
                token = rest[i + 1]
                i += 2
            else:
                body.append(rest[i])
                i += 1
        c = _Clause(kind, key, body, cost, token)
        getattr(self, "_" + kind.lower())(c, t, server, peek, ttl_counted)
        c.admitted = all(r[0] == 0 for r in c.rows)
        return c

    def _check(self, c: _Clause, t: int, server: int, peek: bool, _: bool) -> None:
        rules = [(int(c.args[i]), int(c.args[i + 1])) for i in range(0, len(c.args), 2)]
        z = self._zset(c.key, server)
        scores = sorted(z.values())
        for count, window in rules:
            inside = [s for s in scores if s > t - window]
            used = len(inside)
            if used + c.cost <= count:
                newest = max(inside[-1] if inside else t - window, t if c.cost else t - window)
                c.rows.append([0, 0, count, count - used - c.cost, -1, max(0, _ceil_div_f(newest + window - t))])
            else:
                k = used + c.cost - count
                retry = _ceil_div_f(inside[k - 1] + window - t)
                reset = _ceil_div_f(inside[-1] + window - t) if inside else 0
                c.rows.append([1, 0, count, max(0, count - used), retry, max(0, reset)])
        longest = max(w for _, w in rules)

        def apply(cost: int = c.cost) -> None:
            zs = dict(self._zset(c.key, server))
            for _ in range(cost):
                zs[f"l:{next(self._names)}"] = t
            x = max(max(zs.values()), server) + longest
            old = self.keys.get(c.key)
            if old is None or old.expire_at is None or old.expire_at < x:
                zs = {m: s for m, s in zs.items() if s > t - longest}
                self._put(c.key, "zset", zs, int(_ceil_div_f(x)), keep_longer=False)
            else:
                self._put(c.key, "zset", zs, old.expire_at, keep_longer=False)
        c.apply = apply

    def _throttle(self, c: _Clause, t: int, server: int, peek: bool, _: bool) -> None:
        rules = [tuple(int(x) for x in c.args[i:i + 3]) for i in range(0, len(c.args), 3)]
        h = self._hash(c.key, server)
        t_ns = t * _NS
        news = []
        for burst, count, window in rules:
            em = window * _NS // count
            tau = em * burst
            tat = int(h.get(str(window), t_ns))
            base = max(tat, t_ns)
            new = base + em * c.cost
            news.append(new)
            if new - tau <= t_ns:
                ell = new
                c.rows.append([0, 0, burst, min(burst, max(0, (tau - (ell - t_ns)) // em)), -1,
                               max(0, _ceil_div(ell - t_ns, _NS))])
            else:
                ell = base
                c.rows.append([1, 0, burst, min(burst, max(0, (tau - (ell - t_ns)) // em)),
                               _ceil_div(new - tau - t_ns, _NS), max(0, _ceil_div(ell - t_ns, _NS))])

        def apply() -> None:
            hs = dict(self._hash(c.key, server))
            for (_, _, window), new in zip(rules, news):
                hs[str(window)] = str(new)
            x = _ceil_div(max(news), _NS) + max(0, server - t)
            self._put(c.key, "hash", hs, x)
        c.apply = apply
        c.rules = rules  # type: ignore[attr-defined]

    def _quota(self, c: _Clause, t: int, server: int, peek: bool, _: bool) -> None:
        zone = _zone(c.args[0])
        periods = [(c.args[i].lower(), int(c.args[i + 1])) for i in range(1, len(c.args), 2)]
        h = self._hash(c.key, server)
        fields, ends = [], []
        for period, limit in periods:
            start, end, name = _bucket(period, zone, t)
            fields.append(name)
            ends.append(end)
            used = max(0, int(h.get(name, "0")))
            if used + c.cost <= limit:
                c.rows.append([0, 0, limit, max(0, limit - used - c.cost), -1, end - t])
            else:
                c.rows.append([1, 0, limit, max(0, limit - used), -1 if c.cost > limit else end - t, end - t])

        def apply() -> None:
            hs = dict(self._hash(c.key, server))
            for f in fields:
                hs[f] = str(max(0, int(hs.get(f, "0"))) + c.cost)
            self._put(c.key, "hash", hs, max(ends) + max(0, server - t))
        c.apply = apply
        c.fields = fields  # type: ignore[attr-defined]

    def _lease(self, c: _Clause, t: int, server: int, peek: bool, ttl_counted: bool) -> None:
        limit = int(c.args[0])
        ttl = int(c.args[1]) if len(c.args) > 1 else None
        z = self._zset(c.key, server)
        live = {m: s for m, s in z.items() if s > t}
        token = c.token if c.cost else None
        own = set(_units(z, token)) if token is not None else set()
        held = sum(1 for m in own if m in live)
        others = sorted(s for m, s in live.items() if m not in own)
        if len(live) - held + c.cost <= limit:
            after = len(others) + c.cost
            if ttl is not None and ttl_counted and c.cost:
                top = max([t + ttl, *others])
            else:
                top = max(live.values(), default=t)
            c.rows.append([0, 0, limit, max(0, limit - (after if c.cost else len(live))), -1,
                           max(0, _ceil_div_f(top - t))])
        else:
            k = len(live) - held + c.cost - limit
            c.rows.append([1, 0, limit, max(0, limit - len(live)), _ceil_div_f(others[k - 1] - t),
                           max(0, _ceil_div_f(max(live.values()) - t))])
        if c.token is None and not peek:
            c.token = f"l{next(self._names):07d}"

        def apply() -> None:
            zs = dict(self._zset(c.key, server))
            for m in _units(zs, c.token):
                del zs[m]
            for j in range(c.cost):
                zs[c.token if j == 0 else f"{c.token}#{j + 1}"] = t + ttl
            zs = {m: s for m, s in zs.items() if s > min(t, server)}
            self._put(c.key, "zset", zs, int(max(zs.values())) + max(0, server - t))
        c.apply = apply

    # --- writes without admission ---
    def _refund(self, c: _Clause, t: int, server: int) -> None:
        k = self.keys.get(c.key)
        if k is None or self._get(c.key, server) is None:
            return
        if c.kind == "CHECK":
            longest = max(int(c.args[i + 1]) for i in range(0, len(c.args), 2))
            inside = sorted(((s, m) for m, s in k.value.items() if s > t - longest), reverse=True)
            for s, m in inside[:c.cost]:
                del k.value[m]
        elif c.kind == "THROTTLE":
            for burst, count, window in c.rules:  # type: ignore[attr-defined]
                f = str(window)
                if f in k.value:
                    tat = int(k.value[f]) - (window * _NS // count) * c.cost
                    if tat <= t * _NS:
                        del k.value[f]
                    else:
                        k.value[f] = str(tat)
        elif c.kind == "QUOTA":
            for f in c.fields:  # type: ignore[attr-defined]
                if f in k.value:
                    v = int(k.value[f])
                    v -= min(c.cost, max(0, v))
                    if v <= 0:
                        del k.value[f]
                    else:
                        k.value[f] = str(v)
        elif c.kind == "LEASE" and c.token is not None:
            self._release(c.key, t, server, [c.token])
            return
        if not k.value:
            del self.keys[c.key]

    def _debit(self, c: _Clause, t: int, server: int) -> None:
        if c.kind == "THROTTLE":
            h = dict(self._hash(c.key, server))
            news = []
            for burst, count, window in c.rules:  # type: ignore[attr-defined]
                new = max(int(h.get(str(window), t * _NS)), t * _NS) + (window * _NS // count) * c.cost
                h[str(window)] = str(new)
                news.append(new)
            self._put(c.key, "hash", h, _ceil_div(max(news), _NS) + max(0, server - t))
        else:  # CHECK and QUOTA add their cost as an admission does, admitted or not
            c.apply()

    def _release(self, key: str, t: int, server: int, tokens: list[str]) -> list[int]:
        z = self._zset(key, server)
        out = []
        for tok in tokens:
            units = _units(z, tok)
            out.append(sum(1 for m in units if z[m] > t))
            for m in units:
                del z[m]
        if key in self.keys and not z:
            del self.keys[key]
        return out

    def _renew(self, key: str, t: int, server: int, ttl: int, tokens: list[str]) -> list[int]:
        z = self._zset(key, server)
        out = []
        for tok in tokens:
            units = _units(z, tok)
            if any(z[m] > t for m in units):
                for m in units:
                    z[m] = t + ttl
                out.append(len(units))
            else:
                out.append(0)
        if z and key in self.keys:
            k = self.keys[key]
            k.expire_at = max(k.expire_at or 0, int(max(z.values())) + max(0, server - t))
        return out

    def _lockcount(self, t: int, lock: str, count: str, window: int, max_: int, lock_time: int) -> list[int]:
        ck = self._get(count, t)
        c = max(0, int(ck.value)) if ck is not None else 0
        lk = self._get(lock, t)
        if lk is not None:
            return [1, c, -1 if lk.expire_at is None else lk.expire_at - t]
        if c < max_:
            exp = ck.expire_at if ck is not None and ck.expire_at is not None else t + window
            self.keys[count] = _Key("string", c + 1, exp)
            return [0, c + 1, exp - t]
        self.keys[lock] = _Key("string", 1, t + lock_time)
        self.keys.pop(count, None)
        return [1, c, lock_time]

    # --- RL.ALL / RL.ALLPEEK ---
    def _all(self, args: list[str], server: int, peek: bool) -> list[Any]:
        n = int(args[1])
        keys = args[2:2 + n]
        t = self._now(args[2 + n], server)
        rest = args[3 + n:]
        details = bool(rest) and rest[-1].upper() == "DETAILS"
        rest = rest[:-1] if details else rest
        refund = bool(rest) and rest[-1].upper() == "REFUND"
        rest = rest[:-1] if refund else rest
        parts: list[tuple[str, str, list[str]]] = []
        i = 0
        while i < len(rest):
            kind, key = rest[i].upper(), keys[int(rest[i + 1]) - 1]
            j, body = i + 2, []
            while j < len(rest) and rest[j].upper() not in _KINDS:
                body.append(rest[j])
                if rest[j].upper() in ("COST", "TOKEN"):
                    body.append(rest[j + 1])
                    j += 1
                j += 1
            parts.append((kind, key, body))
            i = j
        if refund:
            for kind, key, body in parts:
                self._refund(self._clause(kind, key, body, t, server, peek=True), t, server)
            clauses = [self._clause(kind, key, self._with_cost(body, 0), t, server, peek=True)
                       for kind, key, body in parts]
        else:
            clauses = [self._clause(kind, key, body, t, server, peek=peek) for kind, key, body in parts]
        admitted = all(c.admitted for c in clauses)
        if admitted and not peek and not refund:
            for c in clauses:
                c.apply()
            # DETAILS after the writes: each rule as the command answers with COST 0
            if details:
                for c in clauses:
                    if c.kind != "LEASE":
                        c.rows = self._clause(c.kind, c.key, self._with_cost(c.args, 0), t, server, peek=True).rows
        firsts = []
        for c in clauses:
            b = _binding(c.rows, c.admitted)
            firsts.append([0 if c.admitted else 1, b + 1, *c.rows[b][2:]])
        if admitted:
            pick = min(range(len(clauses)), key=lambda k: (firsts[k][3] // max(clauses[k].cost, 1), -firsts[k][5], k))
        else:
            pick = _binding([[r[0], 0, 0, r[3], r[4], r[5]] for r in firsts], False)
        reply: list[Any] = [0 if admitted else 1, pick + 1, *firsts[pick][1:]]
        if details:
            reply.extend([[[r[0], k + 1, *r[2:]] for k, r in enumerate(c.rows)] for c in clauses])
        return reply


def _touched(name: str, args: list[str]) -> list[str]:
    """The keys a command reads or writes."""
    if name in ("RL.ALL", "RL.ALLPEEK"):
        out = args[2:2 + int(args[1])]
    elif name == "RL.LOCKCOUNT":
        out = args[1:3]
    elif name in ("DEL", "EXISTS"):
        out = args[1:]
    elif name in ("PING", "COMMAND", "COMMAND INFO"):
        out = []
    else:
        out = args[1:2]
    return list(dict.fromkeys(out))


def _margin(args: list[str]) -> int:
    """The most entries a command can add: a member per unit of COST, a field or string per argument."""
    m = len(args)
    for i in range(len(args) - 1):
        if args[i].upper() == "COST" and args[i + 1].isdigit():
            m += int(args[i + 1])
    return m


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def _ceil_div_f(x: float) -> int:
    return int(-(-x // 1))


def _units(z: dict[str, float], token: str | None) -> list[str]:
    if token is None or token not in z:
        return []
    out, j = [token], 2
    while f"{token}#{j}" in z:
        out.append(f"{token}#{j}")
        j += 1
    return out


def _zone(text: str) -> tzinfo:
    if len(text) == 6 and text[0] in "+-" and text[3] == ":":
        minutes = int(text[1:3]) * 60 + int(text[4:6])
        return timezone(timedelta(minutes=-minutes if text[0] == "-" else minutes))
    return zoneinfo.ZoneInfo(text)


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _midnight(d: date, zone: tzinfo) -> datetime:
    # fold=0 reads a local time in a spring-forward gap with the offset before
    # it: the instant of the change, the first that exists (SPEC's rule).
    return datetime.fromtimestamp(_ms(datetime(d.year, d.month, d.day, tzinfo=zone)) / 1000, zone)


def _bucket(period: str, zone: tzinfo, t: int) -> tuple[int, int, str]:
    """(start, end, field) of the ``period`` bucket holding ``t`` in ``zone``."""
    local = datetime.fromtimestamp(t / 1000, zone)
    if period in ("minute", "hour"):
        into = local.second * 1000 + local.microsecond // 1000 + (local.minute * 60_000 if period == "hour" else 0)
        start_ms = t - into
        end_ms = start_ms + (60_000 if period == "minute" else 3_600_000)
        start = datetime.fromtimestamp(start_ms / 1000, zone)
    else:
        d = local.date()
        if period == "day":
            first, nxt = d, d + timedelta(days=1)
        elif period == "week":
            first = d - timedelta(days=d.weekday())
            nxt = first + timedelta(days=7)
        elif period == "month":
            first = d.replace(day=1)
            nxt = (first + timedelta(days=32)).replace(day=1)
        else:
            first, nxt = d.replace(month=1, day=1), d.replace(year=d.year + 1, month=1, day=1)
        start = _midnight(first, zone)
        start_ms, end_ms = _ms(start), _ms(_midnight(nxt, zone))
    off = start.utcoffset() or timedelta(0)
    sign = "-" if off < timedelta(0) else "+"
    secs = abs(int(off.total_seconds()))
    offset = f"{sign}{secs // 3600:02d}:{secs % 3600 // 60:02d}" + (f":{secs % 60:02d}" if secs % 60 else "")
    return start_ms, end_ms, f"{period}:{start:%Y-%m-%dT%H:%M}{offset}"


class _LocalPipeline:
    def __init__(self, engine: LocalEngine) -> None:
        self.engine, self.calls = engine, []

    def execute_command(self, *args: Any, **_: Any) -> "_LocalPipeline":
        self.calls.append(args)
        return self

    def _run(self, raise_on_error: bool) -> list[Any]:
        out = []
        for args in self.calls:
            try:
                out.append(self.engine.execute(*args))
            except redis.exceptions.ResponseError as e:
                if raise_on_error:
                    raise
                out.append(e)
        self.calls = []
        return out

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        return self._run(raise_on_error)

    def __enter__(self) -> "_LocalPipeline":
        return self

    def __exit__(self, *_: Any) -> None:
        self.calls = []


class _AsyncLocalPipeline(_LocalPipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:  # type: ignore[override]
        return self._run(raise_on_error)

    async def __aenter__(self) -> "_AsyncLocalPipeline":
        return self

    async def __aexit__(self, *_: Any) -> None:
        self.calls = []


def _command_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # redis-py passes some commands as one word ("COMMAND INFO"): split it as Redis would
    if args and isinstance(args[0], str) and " " in args[0]:
        return (*args[0].split(" "), *args[1:])
    return args


class LocalRedis(redis.Redis):
    """A ``redis.Redis`` that never connects: the RL commands answered by a
    ``LocalEngine`` (``clock``: ms since the epoch; ``ManualClock`` for tests)."""

    def __init__(self, clock: Clock | None = None, engine: LocalEngine | None = None) -> None:
        # No socket, so no socket timeout: redis-py 8's default (5 s) would
        # read as one to the guard (redis_rl.guard.check_socket_timeout).
        super().__init__(decode_responses=True, socket_timeout=None)
        self.engine = engine or LocalEngine(clock)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        return self.engine.execute(*_command_args(args))

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        return _LocalPipeline(self.engine)

    def close(self) -> None:
        pass


class AsyncLocalRedis(redis.asyncio.Redis):
    """The ``redis.asyncio.Redis`` of ``LocalRedis`` (for ``AsyncRateLimiter``)."""

    def __init__(self, clock: Clock | None = None, engine: LocalEngine | None = None) -> None:
        # No socket, so no socket timeout: redis-py 8's default (5 s) would
        # read as one to the guard (redis_rl.guard.check_socket_timeout).
        super().__init__(decode_responses=True, socket_timeout=None)
        self.engine = engine or LocalEngine(clock)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        return self.engine.execute(*_command_args(args))

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        return _AsyncLocalPipeline(self.engine)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        pass

    async def close(self, close_connection_pool: bool | None = None) -> None:  # type: ignore[override]
        pass
