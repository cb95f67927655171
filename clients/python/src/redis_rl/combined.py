"""Several policies on one request decided together: every (policy, key,
cost/estimate) binding's clauses in ONE RL.ALL with DETAILS — admitted only
if every limit admits, nothing written otherwise — so a refusal by the
second policy charges nothing on the first, and the answer carries every
limit's state (the HTTP headers list them all).

Under Cluster one RL.ALL must stay in one slot, and policies keyed
differently (one by IP, one by phone) hash to different slots. The clauses
are then grouped by slot, one RL.ALL per slot, and when a slot refuses (or
fails) the slots that admitted are given back with ``RL.ALL ... REFUND``
(their charges refunded, their leases released), so a refusal still writes
nothing in the end — as the Spring starter does (clients/java/README.md,
"Routes in YAML"). Bindings whose keys share a slot (or any standalone
server) are one call.

The combined decision is a ``PolicyDecision`` of a policy made of the bound
policies' limits in binding order (a limit name an earlier binding already
used is shown as ``<policy>.<limit>``), so headers, problem answers, permits
and scopes work on it unchanged.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Mapping, Sequence

from redis.crc import key_slot

from . import args as a
from . import commands as c
from .commands import Call, Clause
from .decisions import AllDecision
from .policy import FAIL_CLOSED, FAIL_LOCAL, FAIL_OPEN, Limit, Plan, Policy, PolicyDecision, real_clause


@dataclass(frozen=True)
class PolicyCall:
    """One policy bound to the key (and cost, estimate, ...) it decides this
    request by: ``policy.bind(key, estimate=...)``."""

    policy: Policy
    key: str
    cost: int = 1
    estimate: int | None = None
    zone: a.Zone | None = None
    subkeys: Mapping[str, str] | None = field(default=None, hash=False)
    overrides: Mapping[str, int] | None = field(default=None, hash=False)

    def plan(self, *, token: str | None, details: bool) -> Plan:
        return self.policy.plan(self.key, cost=self.cost, estimate=self.estimate, zone=self.zone,
                                subkeys=self.subkeys, overrides=self.overrides, token=token, details=details)


class CombinedPolicy(Policy):
    """The bound policies as one: their limits in binding order (renamed
    ``<policy>.<limit>`` where a name repeats), their clause groups
    concatenated (not regrouped: each keeps its own key). Fails closed if any
    bound policy does; waits at most the smallest budget."""

    origins: dict[str, Policy]
    names: dict[str, tuple[int, str]]  # a combined limit name → (binding index, its own name)

    def __init__(self, policies: Sequence[Policy]) -> None:  # noqa: super().__init__ would regroup
        set_ = object.__setattr__
        limits: list[Limit] = []
        groups = []
        origins: dict[str, Policy] = {}
        names: dict[str, tuple[int, str]] = {}
        for i, p in enumerate(policies):
            renamed: dict[str, Limit] = {}
            for lim in p.limits:
                name = lim.name if lim.name not in origins else f"{p.name}.{lim.name}"
                if name in origins:
                    raise a.invalid("limit_name", f"two bound policies named {p.name!r} share limit {lim.name!r}")
                renamed[lim.name] = dataclasses.replace(lim, name=name) if name != lim.name else lim
                origins[name] = p
                names[name] = (i, lim.name)
                limits.append(renamed[lim.name])
            groups += [dataclasses.replace(g, limits=tuple(renamed[lim.name] for lim in g.limits)) for g in p.groups]
        set_(self, "name", "+".join(p.name for p in policies))
        set_(self, "limits", tuple(limits))
        set_(self, "prefix", "")
        set_(self, "tag", None)
        set_(self, "fail", FAIL_CLOSED if any(p.fail == FAIL_CLOSED for p in policies)
             else FAIL_LOCAL if any(p.fail == FAIL_LOCAL for p in policies) else FAIL_OPEN)
        set_(self, "budget", min(p.budget for p in policies))
        set_(self, "inflight_retry_after", min(p.inflight_retry_after for p in policies))
        set_(self, "groups", tuple(groups))
        set_(self, "_templates", {})
        set_(self, "_key_parts", ())
        set_(self, "origins", origins)
        set_(self, "names", names)

    def inflight_for(self, limit: str) -> timedelta:
        return self.origins[limit].inflight_retry_after

    def origin(self, limit: str) -> Policy:
        return self.origins[limit]


@dataclass(slots=True)
class CombinedPlan:
    """The bound policies' plans and their clauses, real keys and tokens in,
    as one RL.ALL (``call``); ``slot_groups`` under Cluster."""

    policy: CombinedPolicy
    plans: tuple[Plan, ...]
    clauses: tuple[Clause, ...]
    call: Call
    details: bool

    def q(self, limit: str) -> int:
        """A limit's q in this call (by its combined name)."""
        i, name = self.policy.names[limit]
        return self.plans[i].q(name)

    @property
    def token(self) -> str | None:
        """The lease token (one for every bound lease: tokens are per key)."""
        return next((p.token for p in self.plans if p.token is not None), None)

    @property
    def keys(self) -> list[str]:
        return [cl.key for cl in self.clauses]  # type: ignore[misc]

    def slot_groups(self) -> list[list[int]]:
        """Clause indices grouped by Cluster slot, in order of first appearance."""
        by_slot: dict[int, list[int]] = {}
        for i, cl in enumerate(self.clauses):
            k = cl.key
            by_slot.setdefault(key_slot(k.encode() if isinstance(k, str) else k), []).append(i)
        return list(by_slot.values())

    def group_call(self, group: Sequence[int], *, refund: bool = False) -> Call:
        return c.all_call([self.clauses[i] for i in group], refund=refund, details=self.details)

    def decision(self, reply: AllDecision) -> PolicyDecision:
        binding = self.policy.groups[reply.clause - 1].limits[reply.rule - 1].name
        return PolicyDecision(self.policy, reply.limited, binding, reply, reply, self)  # type: ignore[arg-type]

    def refund_all(self) -> list[Call]:
        """``Plan.refund_all`` of every binding: one ``RL.ALL ... REFUND`` per slot."""
        return [self.group_call(g, refund=True) for g in self.slot_groups()]

    def lease_renewals(self) -> tuple[list[Call], float]:
        """``Plan.lease_renewals`` of every binding; the shortest TTL."""
        got = [p.lease_renewals() for p in self.plans]
        return [call for calls, _ in got for call in calls], min((t for calls, t in got if calls), default=0.0)

    def lease_releases(self) -> list[Call]:
        """RL.RELEASE of the token on every bound lease."""
        return [call for p in self.plans for call in p.lease_releases()]

    def settlement(self, used: int | None, *, estimate_stands: bool = False) -> list[Call]:
        """Every bound policy's settlement (leases released, estimates settled
        to ``used``); the caller pipelines them per slot."""
        return [call for p in self.plans for call in p.settlement(used, estimate_stands=estimate_stands)]


def combine(calls: Sequence[PolicyCall], *, details: bool, token: str | None = None) -> CombinedPlan:
    """The one RL.ALL that decides every binding (no I/O)."""
    calls = list(dict.fromkeys(calls)) if all(_hashable(x) for x in calls) else list(calls)
    if not calls:
        raise ValueError("nothing to decide: bind at least one policy")
    for x in calls:
        if not isinstance(x, PolicyCall):
            raise TypeError(f"expected policy.bind(key, ...), not {x!r}")
        if x.policy.groups[0].kind == "lockout":
            raise a.invalid("limits", f"policy {x.policy.name!r} is a lockout: RL.LOCKCOUNT is not an RL.ALL "
                            "clause, decide it on its own")
    # One token for every bound lease (tokens are per key), so a permit holds one.
    if token is None and any(x.policy.has_lease for x in calls):
        token = uuid.uuid4().hex
    plans = [x.plan(token=token, details=details) for x in calls]
    clauses = tuple(_real_clause(cl, key, p.token) for p in plans for cl, key in zip(p.clauses, p.keys))
    policy = CombinedPolicy([x.policy for x in calls])
    return CombinedPlan(policy, tuple(plans), clauses, c.all_call(clauses, details=details), details)


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


_real_clause = real_clause


def merge(plan: CombinedPlan, groups: Sequence[Sequence[int]], replies: Sequence[AllDecision],
          after: Sequence[AllDecision | None]) -> AllDecision:
    """The slots' replies as one RL.ALL reply: the binding clause chosen across
    slots as RL.ALL chooses it (SPEC), details in clause order (a refunded
    slot's from its admission: what it would leave, as one RL.ALL reports it)."""
    refused = any(r.limited for r in replies)
    raw: list[Any] = [None] * len(plan.clauses)
    best = -1
    for j, (g, r) in enumerate(zip(groups, replies)):
        # Each rule as the same call on one server reports it (CLIENTS.md §5:
        # the same items standalone and Cluster): a refused RL.ALL's peek at
        # the request's cost, for an admitting slot what it would leave —
        # its admission's reply, not the state after its refund.
        shown = r
        if shown.raw_details is not None:
            for k, i in enumerate(g):
                raw[i] = shown.raw_details[k]
        if (not refused or r.limited) and (best < 0 or _binds(r, g, replies[best], groups[best], plan.clauses)):
            best = j
    r, g = replies[best], groups[best]
    details = tuple(raw) if all(d is not None for d in raw) else None
    return AllDecision(r.limited, r.rule, r.limit, r.remaining, r.retry_after, r.reset_after, g[r.clause - 1] + 1,
                       details)


def _binds(x: AllDecision, gx: Sequence[int], y: AllDecision, gy: Sequence[int], clauses: Sequence[Clause]) -> bool:
    """Whether x binds before y: a refusal waiting cannot help first, else the
    longest retry-after; among admissions the fewest calls of this shape left,
    then the latest reset; ties to the earlier clause (SPEC, RL.ALL)."""
    ix, iy = gx[x.clause - 1], gy[y.clause - 1]
    if x.limited != y.limited:
        return x.limited
    if x.limited:
        if (x.retry_after is None) != (y.retry_after is None):
            return x.retry_after is None
        if x.retry_after is not None and y.retry_after is not None and x.retry_after != y.retry_after:
            return x.retry_after > y.retry_after
        return ix < iy
    lx = x.remaining // max(1, clauses[ix].cost)
    ly = y.remaining // max(1, clauses[iy].cost)
    if lx != ly:
        return lx < ly
    if x.reset_after != y.reset_after:
        return x.reset_after > y.reset_after
    return ix < iy
