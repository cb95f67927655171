"""Policies: named limits decided together in ONE call (one RL.ALL, or one
command for a single limit), with the keys, the per-limit states for HTTP
headers and the settlement of estimates and leases afterwards.

Keys: ``<prefix><policy>:{<key>}:<limit>`` — the hash tag around the caller's
key, so a policy's keys share a slot. A policy with a fixed ``tag`` puts
``{<tag>}`` there instead (``<prefix><policy>:{<tag>}:<key>:<limit>``), and
its ``shared`` limits (one counter for all keys, e.g. a global budget) are
``<prefix><policy>:{<tag>}:<limit>`` in the same slot. Limits of one kind on
one key share one clause (sliding windows one CHECK, token buckets one
THROTTLE, quota periods of one zone one QUOTA); the clause's key is named
after its first limit.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Sequence, cast

from . import args as a
from . import commands as c
from .commands import Call, Clause, Period
from .decisions import AllDecision, Decision, LeaseDecision, LockDecision, RuleState

if TYPE_CHECKING:
    from .combined import PolicyCall

Kind = Literal["window", "bucket", "quota", "lease", "lockout"]

_PERIOD_SECONDS = {Period.MINUTE: 60, Period.HOUR: 3600, Period.DAY: 86400, Period.WEEK: 604800,
                   Period.MONTH: 2_592_000, Period.YEAR: 31_536_000}


class FailMode(str, enum.Enum):
    """What a decision does when Redis is slow or down."""

    OPEN = "open"  # the call proceeds, without rate-limit headers
    CLOSED = "closed"  # the call is refused (HTTP 503)
    # decided in this process on the local backend with the same limits: exact within one instance, each
    # instance alone (module redis_rl.local_mode)
    LOCAL = "local"


FAIL_OPEN = FailMode.OPEN
FAIL_CLOSED = FailMode.CLOSED
FAIL_LOCAL = FailMode.LOCAL


@dataclass(frozen=True, slots=True)
class Limit:
    """One named limit of a policy; build it with ``sliding_window``,
    ``token_bucket``, ``quota``, ``concurrency`` or ``lockout``."""

    name: str
    kind: Kind
    limit: int  # count / rate / period limit / in-flight limit / lockout max
    window_ms: int = 0  # window / per / lockout window (0 for quota and lease)
    burst: int = 0  # token bucket
    period: Period | None = None  # quota
    zone: str | None = None  # quota; None: given per decision
    ttl_ms: int = 0  # lease TTL, lockout lock time
    shared: bool = False  # one counter across keys (needs the policy's tag)
    subkey: bool = False  # keyed further per decision (``subkeys={name: ...}``)
    metered: bool = False  # costed by the estimate, settled to the usage afterwards
    problem: str | None = None  # the problem type's last segment when this limit refuses

    @property
    def header_q(self) -> int:
        return self.limit

    @property
    def header_w(self) -> int | None:
        """The ``w`` of the RateLimit-Policy item in seconds (None for a lease)."""
        if self.kind == "lease":
            return None
        if self.kind == "quota":
            assert self.period is not None
            return _PERIOD_SECONDS[self.period]
        return -(-self.window_ms // 1000)


def _name(name: str) -> str:
    # Printable ASCII only: the name is a RateLimit header item's name and
    # part of a key; a non-ASCII one wrote its counter, then failed every
    # answer's headers (500s).
    if (not isinstance(name, str) or not name or not name.isascii() or not name.isprintable()
            or any(ch in name for ch in '{}",; ')):
        raise a.invalid("limit_name", f"invalid limit name {name!r}: non-empty printable ASCII, without braces, "
                        "quotes, commas, semicolons or spaces")
    return name


def sliding_window(name: str, count: int, window: a.Duration, *, shared: bool = False, subkey: bool = False,
                   metered: bool = False, problem: str | None = None) -> Limit:
    """At most ``count`` units in any ``window`` (a sliding-window log, RL.CHECK)."""
    return Limit(_name(name), "window", a.integer(count, "count", 1), a.millis(window, "window"),
                 shared=shared, subkey=subkey, metered=metered, problem=problem)


def token_bucket(name: str, rate: int, per: a.Duration, burst: int | None = None, *, shared: bool = False,
                 subkey: bool = False, metered: bool = False, problem: str | None = None) -> Limit:
    """``rate`` units per ``per``, ``burst`` at once (GCRA, RL.THROTTLE); burst defaults to rate."""
    rate = a.integer(rate, "rate", 1)
    return Limit(_name(name), "bucket", rate, a.millis(per, "per"),
                 burst=a.integer(burst if burst is not None else rate, "burst", 1),
                 shared=shared, subkey=subkey, metered=metered, problem=problem)


def quota(name: str, zone: a.Zone | None, period: Period | str, limit: int, *, shared: bool = False,
          subkey: bool = False, metered: bool = False, problem: str | None = None) -> Limit:
    """At most ``limit`` per natural ``period`` (minute ... year) in ``zone`` (RL.QUOTA).
    ``zone`` None: each decision names it (``zone=...``)."""
    return Limit(_name(name), "quota", a.integer(limit, "limit", 0), period=Period.of(period),
                 zone=None if zone is None else a.zone_arg(zone), shared=shared, subkey=subkey, metered=metered,
                 problem=problem)


def concurrency(name: str, limit: int, ttl: a.Duration, *, shared: bool = False, subkey: bool = False,
                problem: str | None = None) -> Limit:
    """At most ``limit`` in flight (a lease of ``ttl``, RL.LEASE), given back when the scope ends."""
    return Limit(_name(name), "lease", a.integer(limit, "limit", 1), ttl_ms=a.millis(ttl, "ttl"),
                 shared=shared, subkey=subkey, problem=problem)


def lockout(name: str, max: int, window: a.Duration, lock_time: a.Duration, *, problem: str = "locked") -> Limit:
    """``max`` calls per fixed ``window``; the next one locks for ``lock_time`` (RL.LOCKCOUNT).
    Alone in its policy."""
    return Limit(_name(name), "lockout", a.integer(max, "max", 0), a.millis(window, "window"),
                 ttl_ms=a.millis(lock_time, "lock_time"), problem=problem)


def _counts(counts: str | None, limits: Sequence[Limit]) -> str | None:
    # Counting one outcome is a refund of the others: only windows, buckets and quotas refund.
    if counts is None:
        return None
    if counts not in ("failures", "successes"):
        raise a.invalid("counts", f"invalid counts {counts!r}: 'failures', 'successes' or None (every call)")
    if any(lim.kind == "lockout" for lim in limits) or not any(lim.kind in ("window", "bucket", "quota")
                                                               for lim in limits):
        raise a.invalid("counts", "counting one outcome needs a window, bucket or quota (a lockout cannot refund)")
    return counts


@dataclass(frozen=True, slots=True)
class _Group:
    """Limits decided by one clause: same kind, same key, same metering."""

    kind: Kind
    limits: tuple[Limit, ...]


@dataclass(frozen=True)
class Policy:
    """A named set of limits decided in one call.

    ``fail``: FAIL_OPEN, FAIL_CLOSED or FAIL_LOCAL when Redis is slow or down
    (the guard decides FAIL_LOCAL on this process's local backend; the
    adapters answer the other two);
    ``budget``: how long a decision may wait; ``inflight_retry_after``: the
    Retry-After a refusal by a concurrency limit answers (its own retry_after
    is when a lease *expires*, far longer than a release usually takes)."""

    name: str
    limits: tuple[Limit, ...]
    prefix: str = ""
    tag: str | None = None
    fail: FailMode = FAIL_CLOSED
    budget: timedelta = timedelta(milliseconds=500)
    inflight_retry_after: timedelta = timedelta(seconds=1)
    counts: str | None = None  # "failures" / "successes": the outcome that counts (outcome.py)
    groups: tuple[_Group, ...] = field(init=False, repr=False)
    _templates: dict[Any, "_Template"] = field(init=False, repr=False, compare=False)
    _key_parts: tuple[tuple[str, str, bool, str | None], ...] = field(init=False, repr=False, compare=False)

    def __init__(self, name: str, limits: Sequence[Limit] | str, *, prefix: str = "", tag: str | None = None,
                 fail: FailMode | str = FAIL_CLOSED, budget: timedelta = timedelta(milliseconds=500),
                 inflight_retry_after: timedelta = timedelta(seconds=1), counts: str | None = None) -> None:
        set_ = object.__setattr__
        if not isinstance(name, str) or not name or "{" in name or "}" in name:
            raise a.invalid("name", f"invalid policy name {name!r}: non-empty, without braces")
        if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            raise a.invalid("prefix", f"invalid prefix {prefix!r}: braces would move the hash tag")
        if tag is not None and (not isinstance(tag, str) or not tag or "{" in tag or "}" in tag):
            raise a.invalid("tag", f"invalid tag {tag!r}: non-empty, without braces")
        if isinstance(limits, str) or not isinstance(limits, Iterable):  # "5/minute;100/hour" (text.py)
            from .text import parse_limits
            limits = parse_limits(limits)
        limits = tuple(limits)
        if not limits:
            raise a.invalid("limits", "a policy needs at least one limit")
        names = [lim.name for lim in limits]
        if len(set(names)) != len(names):
            raise a.invalid("limit_name", "two limits share a name")
        if any(lim.kind == "lockout" for lim in limits) and len(limits) > 1:
            raise a.invalid("limits", "a lockout is alone in its policy (RL.LOCKCOUNT is not an RL.ALL clause)")
        a.rule_count(len(limits))
        if any(lim.shared for lim in limits) and tag is None:
            raise a.invalid("tag", "a shared limit needs the policy's tag, so it shares a slot with the per-key limits")
        set_(self, "counts", _counts(counts, limits))
        set_(self, "name", name)
        set_(self, "limits", limits)
        set_(self, "prefix", prefix)
        set_(self, "tag", tag)
        # Checked here, not on the first request: a budget of 0 or less would
        # answer every decision "unavailable" (and open the circuit).
        if not isinstance(budget, timedelta) or budget <= timedelta(0):
            raise ValueError(f"invalid budget {budget!r}: a timedelta above 0")
        if not isinstance(inflight_retry_after, timedelta) or inflight_retry_after < timedelta(0):
            raise ValueError(f"invalid inflight_retry_after {inflight_retry_after!r}: a timedelta of 0 or more")
        set_(self, "fail", FailMode(fail))
        set_(self, "budget", budget)
        set_(self, "inflight_retry_after", inflight_retry_after)
        set_(self, "groups", _group(limits))
        set_(self, "_templates", {})
        parts = []
        for g in self.groups:
            first = g.limits[0]
            if tag is not None:
                before = f"{prefix}{name}:{{{tag}}}:" + (first.name if first.shared else "")
                after = f":{first.name}"
            else:
                before, after = f"{prefix}{name}:{{", f"}}:{first.name}"
            parts.append((before, after, first.shared, first.name if first.subkey else None))
        set_(self, "_key_parts", tuple(parts))

    def inflight_for(self, limit: str) -> timedelta:
        """The Retry-After of a refusal by concurrency limit ``limit``."""
        return self.inflight_retry_after

    def origin(self, limit: str) -> "Policy":
        """The policy limit ``limit`` belongs to (this one; a combined
        decision's: the bound policy it came from)."""
        return self

    def bind(self, key: str, *, cost: int = 1, estimate: int | None = None, zone: a.Zone | None = None,
             subkeys: Mapping[str, str] | None = None, overrides: Mapping[str, int] | None = None) -> "PolicyCall":
        """This policy bound to ``key`` (and cost, estimate, ...), for deciding
        several policies in one call: ``limiter.decide_all([p1.bind(ip), p2.bind(phone)])``."""
        from .combined import PolicyCall
        return PolicyCall(self, key, cost, estimate, zone, subkeys, overrides)

    def limit(self, name: str) -> Limit:
        for lim in self.limits:
            if lim.name == name:
                return lim
        raise KeyError(name)

    # --- keys ---

    def key_of(self, group: _Group, key: str, subkeys: Mapping[str, str]) -> str:
        first = group.limits[0]
        if self.tag is not None:
            base = f"{self.prefix}{self.name}:{{{self.tag}}}:" + ("" if first.shared else f"{key}:")
        else:
            base = f"{self.prefix}{self.name}:{{{key}}}:"
        k = base + first.name
        if first.subkey:
            if first.name not in subkeys:
                raise a.invalid("subkeys", f"limit {first.name!r} is keyed per decision: "
                                f"give subkeys={{{first.name!r}: ...}}")
            k += ":" + str(subkeys[first.name])
        return k

    def _keys(self, key: str, subkeys: Mapping[str, str] | None) -> list[str]:
        """Every group's key: precomputed parts around the caller's key (the hot path)."""
        out = []
        for before, after, shared, sub in self._key_parts:
            k = before if shared else before + key + after
            if sub is not None:
                value = subkeys.get(sub) if subkeys else None
                if not isinstance(value, str) or not value:
                    raise a.invalid("subkeys", f"limit {sub!r} is keyed per decision: give subkeys={{{sub!r}: ...}}"
                                    " (a non-empty str)")
                k += ":" + value
            out.append(k)
        return out

    def lease_releases(self, key: str, token: str, subkeys: Mapping[str, str] | None = None) -> list[Call]:
        """RL.RELEASE of ``token`` on each concurrency limit of ``key``: what
        gives back a lease whose admission may have run while its reply was
        lost. Safe either way: releasing a token not held changes nothing."""
        return [c.release(k, [token]) for g, k in zip(self.groups, self._keys(key, subkeys)) if g.kind == "lease"]

    @property
    def has_lease(self) -> bool:
        return any(g.kind == "lease" for g in self.groups)

    @property
    def needs_permit(self) -> bool:
        """A decision holds a lease or an estimate that only a permit's close gives back."""
        return self.counts is not None or any(lim.kind == "lease" or lim.metered for lim in self.limits)

    # --- planning one decision ---

    def plan(self, key: str, *, cost: int = 1, estimate: int | None = None, zone: a.Zone | None = None,
             subkeys: Mapping[str, str] | None = None, overrides: Mapping[str, int] | None = None,
             token: str | None = None, details: bool = True) -> "Plan":
        """The one call that decides ``key`` under this policy (no I/O).

        Everything but the keys and the lease token is checked and laid out
        once per shape (cost, estimate, zone, overrides, details) and kept, so
        a decision costs little more than its keys' f-strings."""
        if not isinstance(key, str) or not key or key.startswith("}"):
            # '{}' is no hash tag: a key starting with '}' would hash the
            # policy's keys apart (CROSSSLOT under Cluster).
            raise a.invalid("key", f"invalid key {key!r}: a non-empty str not starting with '}}'")
        shape = (cost, estimate, zone, tuple(sorted(overrides.items())) if overrides else None, details)
        try:
            tpl = self._templates.get(shape)
        except TypeError:  # an unhashable argument: no caching
            tpl = None
        if tpl is None:
            tpl = self._template(cost, estimate, zone, overrides, details)
            if len(self._templates) < 1024:
                self._templates[shape] = tpl
        keys = self._keys(key, subkeys)
        args = list(tpl.call.args)
        for pos, group, suffix in tpl.key_slots:
            args[pos] = keys[group] + suffix
        lease_token = None
        if tpl.token_pos:
            lease_token = a.token_arg(token) if token is not None else uuid.uuid4().hex
            for pos in tpl.token_pos:  # one token for every lease of the call
                args[pos] = lease_token
        call = Call(args[tpl.key_slots[0][0]], tuple(args), tpl.call.parse)
        return Plan(self, call, tpl.clauses, keys, lease_token, tpl.estimate, tpl.cost, overrides or _NONE)

    def _template(self, cost: int, estimate: int | None, zone: a.Zone | None,
                  overrides: Mapping[str, int] | None, details: bool) -> "_Template":
        """The call with placeholder keys and token, every argument checked."""
        overrides = dict(overrides or {})
        unknown = set(overrides) - {lim.name for lim in self.limits}
        if unknown:
            raise a.invalid("overrides", f"overrides name no limit of the policy: {sorted(unknown)}")
        # A decision writes: COST 0 is a peek's (the clauses are checked as
        # RL.ALLPEEK's, which take it; a one-limit policy sends its command).
        a.integer(cost, "cost", 1)
        est = cost if estimate is None else estimate
        zone_name = None if zone is None else a.zone_arg(zone)
        if any(lim.metered for lim in self.limits):
            a.integer(est, "estimate", 1)
        clauses: list[Clause] = []
        keys = [f"\0key{i}" for i in range(len(self.groups))]
        for g, k in zip(self.groups, keys):
            if g.kind == "lockout":  # RL.LOCKCOUNT, below: no clause
                continue
            try:
                clauses.append(self._clause(g, k, est if g.limits[0].metered else cost, cost, zone_name, overrides))
            except (ValueError, TypeError) as e:
                # The units of a metered clause are the call's estimate: its
                # error names that field, not ``cost``.
                if g.limits[0].metered and getattr(e, "field", None) == "cost":
                    e.field = "estimate"  # type: ignore[attr-defined]
                raise
        if self.groups[0].kind == "lockout":
            lim = self.groups[0].limits[0]
            call = c.lockcount(keys[0] + ":lock", keys[0] + ":count", lim.window_ms,
                               overrides.get(lim.name, lim.limit), lim.ttl_ms)
        elif len(clauses) == 1 and clauses[0].rules == 1:
            call = _single(clauses[0], self.groups[0])
        else:
            call = c.all_call(clauses, details=details)
        slots = []
        for pos, arg in enumerate(call.args):
            if isinstance(arg, str) and arg.startswith("\0key"):
                group, _, rest = arg[4:].partition(":")
                slots.append((pos, int(group), ":" + rest if rest else ""))
        token_pos = tuple(i for i, arg in enumerate(call.args) if arg == _TOKEN)
        return _Template(call, tuple(clauses), tuple(slots), token_pos, est, cost)

    @staticmethod
    def _clause(g: _Group, k: str, units: int, cost: int, zone_name: str | None,
                overrides: Mapping[str, int]) -> Clause:
        def value(lim: Limit) -> int:
            return overrides.get(lim.name, lim.limit)
        if g.kind == "window":
            return Clause.check(k, [(value(lim), lim.window_ms) for lim in g.limits], units)
        if g.kind == "bucket":
            return Clause.throttle(k, [(lim.burst, value(lim), lim.window_ms) for lim in g.limits], units)
        if g.kind == "quota":
            z = g.limits[0].zone or zone_name
            if z is None:
                raise a.invalid("zone", f"limit {g.limits[0].name!r} has no zone: give zone=...")
            return Clause.quota(k, z, {cast(Period, lim.period): value(lim) for lim in g.limits}, units)
        lim = g.limits[0]
        return Clause.lease(k, value(lim), lim.ttl_ms, _TOKEN, cost)


_TOKEN = "token-placeholder"
_NONE: Mapping[str, int] = {}


def real_clause(cl: Clause, key: str, token: str | None) -> Clause:
    """A plan's template clause with its key and the lease token in."""
    spec = tuple(token if v == _TOKEN else v for v in cl.spec) if cl.kind == "LEASE" else cl.spec
    return Clause(cl.kind, key, spec, cl.rules, cl.cost)


@dataclass(frozen=True, slots=True)
class _Template:
    call: Call
    clauses: tuple[Clause, ...]
    key_slots: tuple[tuple[int, int, str], ...]  # (argument index, group, key suffix)
    token_pos: tuple[int, ...]  # where the lease token goes (every lease clause)
    estimate: int
    cost: int


def _group(limits: tuple[Limit, ...]) -> tuple[_Group, ...]:
    groups: list[list[Limit]] = []
    for lim in limits:
        for g in groups:
            head = g[0]
            if (lim.kind in ("window", "bucket", "quota") and head.kind == lim.kind and not lim.subkey
                    and not head.subkey and head.shared == lim.shared and head.metered == lim.metered
                    and head.zone == lim.zone):
                if lim.kind == "bucket" and any(o.window_ms == lim.window_ms for o in g):
                    raise a.invalid("limits", f"token buckets {g[0].name!r} and {lim.name!r} have the same period")
                if lim.kind == "quota" and any(o.period == lim.period for o in g):
                    raise a.invalid("limits", f"quotas {g[0].name!r} and {lim.name!r} have the same period")
                g.append(lim)
                break
        else:
            groups.append([lim])
    if sum(1 for g in groups if g[0].kind == "lease" and not g[0].shared) > 1:
        raise a.invalid("limits", "at most one per-key concurrency limit per policy")
    return tuple(_Group(g[0].kind, tuple(g)) for g in groups)


def _single(cl: Clause, g: _Group) -> Call:
    """One clause of one rule as its own command (same arguments)."""
    k, spec = cl.key, cl.spec
    if cl.kind == "CHECK":
        return Call(k, ("RL.CHECK", k, "*", *spec), Decision.from_reply)
    if cl.kind == "THROTTLE":
        return Call(k, ("RL.THROTTLE", k, "*", *spec), Decision.from_reply)
    if cl.kind == "QUOTA":
        return Call(k, ("RL.QUOTA", k, "*", *spec), Decision.from_reply)
    limit, ttl, _, token, *cost = spec
    return Call(k, ("RL.LEASE", k, "*", limit, ttl, "TOKEN", token, *cost), LeaseDecision.from_reply)


@dataclass(frozen=True)
class PolicyDecision:
    """A policy's decision: the binding limit, every limit's state (from
    DETAILS; only the binding one on an engine without DETAILS), the lease
    token, and what a refusal's problem type is."""

    policy: Policy
    limited: bool
    binding: str
    state: RuleState
    raw: Any
    plan: "Plan" = field(repr=False, compare=False)
    # Every limit's state by name; from DETAILS on first access of ``states``.
    _states: list[Mapping[str, RuleState]] = field(default_factory=list, repr=False, compare=False)
    # The limiter that decided it when not the caller's: the local backend's, under the ``local`` Redis-down
    # mode (its permit settles there; redis_rl.local_mode).
    decided_by: Any = field(default=None, repr=False, compare=False)

    @property
    def states(self) -> Mapping[str, RuleState]:
        """Each limit's state by name (from DETAILS; only the binding limit's
        on an engine without DETAILS)."""
        if not self._states:
            states: dict[str, RuleState] = {}
            details = self.raw.details if isinstance(self.raw, AllDecision) else None
            if details is not None:
                for grp, clause_states in zip(self.policy.groups, details):
                    for lim, st in zip(grp.limits, clause_states):
                        states[lim.name] = st
            else:
                states[self.binding] = self.state
            self._states.append(states)
        return self._states[0]

    @property
    def allowed(self) -> bool:
        return not self.limited

    def q(self, limit: str) -> int:
        """Limit ``limit``'s ``q`` as decided: a runtime override's, else the
        policy's (a bucket's rate, not its burst)."""
        return self.plan.q(limit)

    @property
    def retry_after(self) -> timedelta | None:
        """How long to wait: the binding limit's, except the policy's
        ``inflight_retry_after`` when a concurrency limit binds; None when
        waiting cannot help (or admitted)."""
        if not self.limited or self.state.retry_after is None:
            return None
        if self.policy.limit(self.binding).kind == "lease":
            return self.policy.inflight_for(self.binding)
        return self.state.retry_after

    @property
    def problem(self) -> str:
        """The refusal's problem type (last segment): the first refusing limit
        with its own ``problem`` (e.g. ``duplicate``), else ``rate-limited``."""
        for lim in self.policy.limits:
            st = self.states.get(lim.name)
            if lim.problem and st is not None and st.limited:
                return lim.problem
        return self.policy.limit(self.binding).problem or "rate-limited"


@dataclass(slots=True)
class Plan:
    policy: Policy
    call: Call
    clauses: tuple[Clause, ...]
    keys: list[str]
    token: str | None
    estimate: int
    cost: int
    overrides: Mapping[str, int] = field(default_factory=dict)

    def q(self, limit: str) -> int:
        """The limit's q in this call: its override, else the policy's."""
        return self.overrides.get(limit, self.policy.limit(limit).limit)

    def decision(self, reply: Any) -> PolicyDecision:
        p = self.policy
        if isinstance(reply, LockDecision):
            lim = p.limits[0]
            most = self.q(lim.name)
            if reply.limited:
                ttl = reply.ttl
                st = RuleState(True, 1, most, 0, ttl, ttl if ttl is not None else timedelta(0))
            else:
                st = RuleState(False, 1, most, max(0, most - reply.count), None, reply.ttl or timedelta(0))
            return PolicyDecision(p, reply.limited, lim.name, st, reply, self, [{lim.name: st}])
        if isinstance(reply, AllDecision):
            binding = p.groups[reply.clause - 1].limits[reply.rule - 1].name
            return PolicyDecision(p, reply.limited, binding, reply, reply, self)
        name = p.groups[0].limits[0].name
        return PolicyDecision(p, reply.limited, name, reply, reply, self, [{name: reply}])

    def lease_renewals(self) -> tuple[list[Call], float]:
        """RL.RENEW of this decision's lease for its TTL, and that TTL in
        seconds (no calls without a concurrency limit)."""
        if self.token is None:
            return [], 0.0
        leases = [(g.limits[0].ttl_ms, k) for g, k in zip(self.policy.groups, self.keys) if g.kind == "lease"]
        return [c.renew(k, ttl, [self.token]) for ttl, k in leases], min((t for t, _ in leases), default=0) / 1000

    def lease_releases(self) -> list[Call]:
        """RL.RELEASE of this decision's lease token (none without a concurrency limit)."""
        if self.token is None:
            return []
        return [c.release(k, [self.token]) for g, k in zip(self.policy.groups, self.keys) if g.kind == "lease"]

    def refund_all(self) -> list[Call]:
        """What gives an admission back whole — windows, buckets, quotas, the
        estimate and the lease: one ``RL.ALL ... REFUND`` of the same clauses
        (a decision whose reply landed after the request was answered). A
        lockout has none (RL.LOCKCOUNT has no refund: a late call counts)."""
        if self.policy.groups[0].kind == "lockout":
            return []
        clauses = [real_clause(cl, key, self.token) for cl, key in zip(self.clauses, self.keys)]
        return [c.all_call(clauses, refund=True)]

    def settlement(self, used: int | None, *, estimate_stands: bool = False) -> list[Call]:
        """What ends an admitted decision: the metered clauses settled from the
        estimate to ``used`` (REFUND or DEBIT of the difference; 0 when None;
        above a clause's largest limit it counts as that limit), and the lease
        released. Keys of one slot: one pipelined round trip.
        ``estimate_stands``: the lease released, the estimate left charged
        (a usage report was refused)."""
        calls: list[Call] = []
        used = self.estimate if estimate_stands else 0 if used is None else a.integer(used, "used", 0)
        for g, cl, key in zip(self.policy.groups, self.clauses, self.keys):
            delta = 0 if estimate_stands else min(used, max(self.q(lim.name) for lim in g.limits)) - self.estimate
            if g.kind == "lease":
                calls.append(c.release(key, [self.token] if self.token else []))
            elif g.limits[0].metered and delta != 0:
                option = "DEBIT" if delta > 0 else "REFUND"
                n = abs(delta)
                spec = list(cl.spec)
                if "COST" in spec[-2:-1]:
                    spec = spec[:-2]
                name = {"CHECK": "RL.CHECK", "THROTTLE": "RL.THROTTLE", "QUOTA": "RL.QUOTA"}[cl.kind]
                if cl.kind == "CHECK":
                    n = min(n, a.MAX_COST)  # RL.CHECK's cap: one member per unit
                calls.append(Call(key, (name, key, "*", *spec, "COST", n, option), Decision.from_reply))
        return calls


