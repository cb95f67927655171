"""Each RL command as a ``Call``: the routing key, the arguments and the reply
parser, built and checked without any I/O so the sync and asyncio clients
share them (and a bad argument never reaches Redis)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Mapping, NamedTuple, Sequence

from . import args as a
from .decisions import AllDecision, DayHourDecision, Decision, LeaseDecision, LockDecision

Key = str | bytes
Rule = tuple[int, a.Duration]  # (count, window): a sliding-window rule
Bucket = tuple[int, int, a.Duration]  # (burst, count, window): a token-bucket rule
Mode = Literal["refund", "debit"] | None


class Period(str, enum.Enum):
    """RL.QUOTA's calendar periods."""

    MINUTE = "MINUTE"
    HOUR = "HOUR"
    DAY = "DAY"
    WEEK = "WEEK"
    MONTH = "MONTH"
    YEAR = "YEAR"

    @classmethod
    def of(cls, value: "Period | str") -> "Period":
        try:
            return value if isinstance(value, Period) else cls(str(value).upper())
        except ValueError:
            raise a.invalid("period", f"invalid period {value!r}: one of minute, hour, day, week, month, year") from None


class Call(NamedTuple):
    """One command ready to send (a NamedTuple: immutable and cheap to make
    on the decision hot path)."""

    key: Key  # the key the call is routed by under Cluster
    args: tuple[Any, ...]
    parse: Callable[[Any], Any]


def _ints(values: Iterable[Any]) -> list[int]:
    return [int(v) for v in values]


def _mode(mode: Mode) -> tuple[str, ...]:
    if mode is None:
        return ()
    if mode in ("refund", "debit"):
        return (mode.upper(),)
    raise ValueError(f"invalid mode {mode!r}: 'refund', 'debit' or None")


# --- per-command argument lists (after `now`), shared with RL.ALL's clauses ---

def check_rules(rules: Sequence[Rule]) -> tuple[list[int], int]:
    """Flattened (count, window) pairs, and the smallest count."""
    a.rule_count(len(rules))
    out: list[int] = []
    for i, rule in enumerate(rules, 1):
        count, window = _pair(rule, i)
        out += [a.integer(count, f"count of rule {i}", 1), a.millis(window, f"window of rule {i}")]
    return out, min(out[0::2])


def _pair(rule: Any, i: int) -> tuple[Any, Any]:
    if not isinstance(rule, (tuple, list)) or len(rule) != 2:
        raise TypeError(f"rule {i} must be (count, window), not {rule!r}")
    return rule[0], rule[1]


def check_cost(cost: int, smallest: int, mode: Mode, peek: bool = False) -> int:
    if mode is not None:
        return a.integer(cost, "cost", 1, a.MAX_COST)
    return a.integer(cost, "cost", 0 if peek else 1, min(smallest, a.MAX_COST))


def throttle_rules(buckets: Sequence[Bucket]) -> tuple[list[int], int]:
    """Flattened (burst, count, window) triples, and the smallest burst."""
    a.rule_count(len(buckets))
    out: list[int] = []
    windows: set[int] = set()
    for i, bucket in enumerate(buckets, 1):
        if not isinstance(bucket, (tuple, list)) or len(bucket) != 3:
            raise TypeError(f"bucket {i} must be (burst, count, window), not {bucket!r}")
        burst = a.integer(bucket[0], f"burst of rule {i}", 1)
        count = a.integer(bucket[1], f"count of rule {i}", 1)
        window = a.millis(bucket[2], f"window of rule {i}")
        interval = window * 1_000_000 // count
        if interval < 1:
            raise a.invalid("rate", f"rule {i}: {count} per {window} ms is more than one per nanosecond")
        if interval * burst > a.MAX_INT * 1_000_000:
            raise a.invalid("burst", f"rule {i}: burst {burst} makes the bucket deeper than 2^53-1 ms")
        if window in windows:
            raise a.invalid("limits", f"rule {i}: two rules with the window {window} ms (state is kept per window)")
        windows.add(window)
        out += [burst, count, window]
    return out, min(out[0::3])


def throttle_cost(cost: int, smallest: int, mode: Mode, peek: bool = False) -> int:
    if mode is not None:
        return a.integer(cost, "cost", 1)
    return a.integer(cost, "cost", 0 if peek else 1, smallest)


def quota_periods(zone: a.Zone, periods: Mapping[Period | str, int]) -> list[Any]:
    out: list[Any] = [a.zone_arg(zone)]
    if not periods:
        raise ValueError("at least one period is needed")
    seen: set[Period] = set()
    for name, limit in periods.items():
        period = Period.of(name)
        if period in seen:
            raise ValueError(f"period {period.value} given twice")
        seen.add(period)
        out += [period.value, a.integer(limit, f"limit of {period.value}", 0)]
    return out


def quota_cost(cost: int, peek: bool = False) -> int:
    return a.integer(cost, "cost", 0 if peek else 1)


def lease_cost(cost: int, limit: int, peek: bool = False) -> int:
    return a.integer(cost, "cost", 0 if peek else 1, min(limit, a.MAX_COST))


def _cost_opt(cost: int, default: int = 1) -> list[Any]:
    return [] if cost == default else ["COST", cost]


# --- the commands ---

def check(key: Key, rules: Sequence[Rule], *, cost: int = 1, mode: Mode = None, now: a.Now = None) -> Call:
    flat, smallest = check_rules(rules)
    cost = check_cost(cost, smallest, mode)
    args = ("RL.CHECK", a.key_arg(key), a.now_arg(now), *flat, *_cost_opt(cost), *_mode(mode))
    return Call(key, args, Decision.from_reply)


def peek(key: Key, rules: Sequence[Rule], *, cost: int = 1, now: a.Now = None) -> Call:
    flat, smallest = check_rules(rules)
    cost = check_cost(cost, smallest, None, peek=True)
    return Call(key, ("RL.PEEK", a.key_arg(key), a.now_arg(now), *flat, *_cost_opt(cost)), Decision.from_reply)


def throttle(key: Key, buckets: Sequence[Bucket], *, cost: int = 1, mode: Mode = None,
             reserve: a.Duration | None = None, now: a.Now = None, peek: bool = False) -> Call:
    flat, smallest = throttle_rules(buckets)
    cost = throttle_cost(cost, smallest, mode, peek)
    opts: list[Any] = _cost_opt(cost) + list(_mode(mode))
    if reserve is not None:
        if mode is not None:
            raise ValueError("reserve excludes refund and debit")
        opts += ["RESERVE", a.millis(reserve, "reserve", 0)]
    name = "RL.THROTTLEPEEK" if peek else "RL.THROTTLE"
    return Call(key, (name, a.key_arg(key), a.now_arg(now), *flat, *opts), Decision.from_reply)


def quota(key: Key, zone: a.Zone, periods: Mapping[Period | str, int], *, cost: int = 1,
          mode: Mode = None, now: a.Now = None, peek: bool = False) -> Call:
    spec = quota_periods(zone, periods)
    cost = quota_cost(cost, peek)
    name = "RL.QUOTAPEEK" if peek else "RL.QUOTA"
    args = (name, a.key_arg(key), a.now_arg(now, a.QUOTA_MAX_NOW), *spec, *_cost_opt(cost), *_mode(mode))
    return Call(key, args, Decision.from_reply)


def dayhour(day_key: Key, hour_key: Key, day_limit: int, hour_limit: int,
            day_ttl: a.Duration, hour_ttl: a.Duration) -> Call:
    a.key_arg(day_key, "day_key")
    a.key_arg(hour_key, "hour_key")
    if day_key == hour_key:
        raise ValueError("day_key and hour_key must differ")
    dl = a.integer(day_limit, "day_limit", 0)
    hl = a.integer(hour_limit, "hour_limit", 0)
    args = ("RL.DAYHOUR", day_key, hour_key, dl, hl, a.millis(day_ttl, "day_ttl"), a.millis(hour_ttl, "hour_ttl"))
    return Call(day_key, args, lambda reply: DayHourDecision.from_reply(reply, dl, hl))


def lockcount(lock_key: Key, count_key: Key, window: a.Duration, max: int, lock_time: a.Duration) -> Call:
    a.key_arg(lock_key, "lock_key")
    a.key_arg(count_key, "count_key")
    if lock_key == count_key:
        raise ValueError("lock_key and count_key must differ")
    args = ("RL.LOCKCOUNT", lock_key, count_key, a.millis(window, "window"), a.integer(max, "max", 0),
            a.millis(lock_time, "lock_time"))
    return Call(lock_key, args, LockDecision.from_reply)


def lease(key: Key, limit: int, ttl: a.Duration, *, cost: int = 1, token: str | None = None,
          now: a.Now = None) -> Call:
    limit = a.integer(limit, "limit", 1)
    opts: list[Any] = []
    t = a.now_arg(now)
    ttl_ms = a.millis(ttl, "ttl")
    if isinstance(t, int) and t + ttl_ms > a.MAX_INT:
        raise ValueError("invalid ttl: now + ttl exceeds 2^53-1")
    opts += _cost_opt(lease_cost(cost, limit))
    if token is not None:
        opts += ["TOKEN", a.token_arg(token)]
    return Call(key, ("RL.LEASE", a.key_arg(key), t, limit, ttl_ms, *opts), LeaseDecision.from_reply)


def lease_peek(key: Key, limit: int, *, cost: int = 1, token: str | None = None, now: a.Now = None) -> Call:
    limit = a.integer(limit, "limit", 1)
    opts: list[Any] = _cost_opt(lease_cost(cost, limit, peek=True))
    if token is not None:
        opts += ["TOKEN", a.token_arg(token)]
    return Call(key, ("RL.LEASEPEEK", a.key_arg(key), a.now_arg(now), limit, *opts), Decision.from_reply)


def _tokens(tokens: Sequence[str]) -> list[str]:
    if isinstance(tokens, str):
        tokens = [tokens]
    if not tokens:
        raise ValueError("at least one token is needed")
    if len(tokens) > 64:
        raise ValueError(f"too many tokens ({len(tokens)}): at most 64 per call")
    out = [a.token_arg(t) for t in tokens]
    if len(set(out)) != len(out):
        raise ValueError("a token is given twice")
    return out


def release(key: Key, tokens: Sequence[str] | str, *, now: a.Now = None) -> Call:
    return Call(key, ("RL.RELEASE", a.key_arg(key), a.now_arg(now), *_tokens(tokens)),
                lambda reply: tuple(_ints(reply)))


def renew(key: Key, ttl: a.Duration, tokens: Sequence[str] | str, *, now: a.Now = None) -> Call:
    t = a.now_arg(now)
    ttl_ms = a.millis(ttl, "ttl")
    if isinstance(t, int) and t + ttl_ms > a.MAX_INT:
        raise ValueError("invalid ttl: now + ttl exceeds 2^53-1")
    return Call(key, ("RL.RENEW", a.key_arg(key), t, ttl_ms, *_tokens(tokens)), lambda reply: tuple(_ints(reply)))


# --- RL.ALL clauses ---

@dataclass(frozen=True, slots=True)
class Clause:
    """One RL.ALL clause: its kind, its key and the arguments after the key index."""

    kind: str
    key: Key
    spec: tuple[Any, ...]
    rules: int
    cost: int = 1

    @staticmethod
    def check(key: Key, rules: Sequence[Rule], cost: int = 1) -> "Clause":
        flat, smallest = check_rules(rules)
        cost = check_cost(cost, smallest, None, True)
        return Clause("CHECK", a.key_arg(key), (*flat, *_cost_opt(cost)), len(rules), cost)

    @staticmethod
    def throttle(key: Key, buckets: Sequence[Bucket], cost: int = 1) -> "Clause":
        flat, smallest = throttle_rules(buckets)
        cost = throttle_cost(cost, smallest, None, True)
        return Clause("THROTTLE", a.key_arg(key), (*flat, *_cost_opt(cost)), len(buckets), cost)

    @staticmethod
    def quota(key: Key, zone: a.Zone, periods: Mapping[Period | str, int], cost: int = 1) -> "Clause":
        spec = quota_periods(zone, periods)
        cost = quota_cost(cost, True)
        return Clause("QUOTA", a.key_arg(key), (*spec, *_cost_opt(cost)), len(periods), cost)

    @staticmethod
    def lease(key: Key, limit: int, ttl: a.Duration, token: str | None, cost: int = 1) -> "Clause":
        limit = a.integer(limit, "limit", 1)
        spec: list[Any] = [limit, a.millis(ttl, "ttl")]
        if token is not None:
            spec += ["TOKEN", a.token_arg(token)]
        cost = lease_cost(cost, limit, True)
        spec += _cost_opt(cost)
        return Clause("LEASE", a.key_arg(key), tuple(spec), 1, cost)


def all_call(clauses: Sequence[Clause], *, refund: bool = False, details: bool = False,
             now: a.Now = None, peek: bool = False) -> Call:
    """RL.ALL / RL.ALLPEEK. Writing calls refuse COST 0 and a LEASE without TOKEN."""
    if not clauses:
        raise ValueError("at least one clause is needed")
    if len(clauses) > 64:
        raise ValueError(f"too many clauses ({len(clauses)}): at most 64 keys per call")
    a.rule_count(sum(c.rules for c in clauses))
    keys = [c.key for c in clauses]
    if len(set(keys)) != len(keys):
        raise ValueError("two clauses name the same key: every key is used by exactly one clause")
    if refund and peek:
        raise ValueError("RL.ALLPEEK has no REFUND")
    args: list[Any] = ["RL.ALLPEEK" if peek else "RL.ALL", len(keys), *keys, a.now_arg(now)]
    for i, c in enumerate(clauses, 1):
        if not peek:
            if c.kind == "LEASE" and c.spec[2:3] != ("TOKEN",):
                raise ValueError(f"clause {i}: RL.ALL's LEASE clause needs a token")
            if c.cost == 0:
                raise ValueError(f"invalid cost 0 in clause {i}: only RL.ALLPEEK takes COST 0")
        args += [c.kind, i, *c.spec]
    if refund:
        args.append("REFUND")
    if details:
        args.append("DETAILS")
    return Call(keys[0], tuple(args), AllDecision.from_reply)
