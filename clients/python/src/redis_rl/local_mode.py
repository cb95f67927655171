"""The ``local`` Redis-down mode: ``Policy(..., fail="local")`` (``FAIL_LOCAL``).

While Redis cannot decide (the budget spent, a connection refused, the
node's circuit open, the module gone), the guard — so every adapter —
decides such a policy in this process on the local backend
(``redis_rl.local``, the one the golden sequence cases check against the
module): the same commands the limiter sends to Redis, so within one
instance the decisions are exact — costs and estimates charged and settled,
leases held until released, ``Retry-After`` and ``RateLimit`` headers from
the local state. Across instances it promises nothing: each counts alone (N
instances admit up to N times a limit), the counts live in memory (a restart
forgets them) and are not in Redis's counters when Redis answers again —
then Redis decides again, with its own counters.

Memory is bounded (default 100,000 keys and 1,000,000 entries): a key is
dropped only when it expires, never to make room; past the bound a call
that needs more is refused (``Retry-After``: until the earliest key
expires). ``limiter.local_mode = LocalMode(max_keys=..., max_entries=...)``
before the first request sets other bounds. The same mode, bounds and error
(``LocalBackendFullError``) as the Java (``FailMode.LOCAL``) and Node
(``failure: "local"``) clients.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, Sequence

from .combined import PolicyCall, combine
from .decisions import RuleState
from .errors import LocalBackendFullError
from .local import DEFAULT_MAX_ENTRIES, DEFAULT_MAX_KEYS, AsyncLocalRedis, Clock, LocalEngine, LocalRedis
from .policy import FAIL_CLOSED, FAIL_LOCAL, Plan, Policy, PolicyDecision

__all__ = ["LocalMode", "local_mode"]


class LocalMode:
    """One instance's local backend for the ``local`` mode, and the limiters
    (sync, asyncio) that decide on it."""

    def __init__(self, *, max_keys: int = DEFAULT_MAX_KEYS, max_entries: int = DEFAULT_MAX_ENTRIES,
                 clock: Clock | None = None) -> None:
        self.engine = LocalEngine(clock, max_keys=max_keys, max_entries=max_entries)
        self._sync: Any = None
        self._async: Any = None

    def limiter(self, main: Any) -> Any:
        """The sync limiter on the local backend, with ``main``'s runtime limits."""
        from .client import RateLimiter
        if self._sync is None:
            self._sync = RateLimiter(LocalRedis(engine=self.engine), check_module=False, runtime_limits=False)
            self._sync.details_supported = True  # every limit's state, for the headers (no first-use check here)
        self._sync.runtime_limits = main.runtime_limits
        return self._sync

    def async_limiter(self, main: Any) -> Any:
        """The asyncio limiter on the local backend, with ``main``'s runtime limits."""
        from .client import AsyncRateLimiter
        if self._async is None:
            self._async = AsyncRateLimiter(AsyncLocalRedis(engine=self.engine), check_module=False,
                                           runtime_limits=False)
            self._async.details_supported = True
        self._async.runtime_limits = main.runtime_limits
        return self._async


def local_mode(limiter: Any) -> LocalMode:
    """``limiter``'s local mode (made with the default bounds on first use)."""
    mode = getattr(limiter, "local_mode", None)
    if mode is None:
        mode = LocalMode()
        limiter.local_mode = mode
    return mode


def local_calls(calls: Sequence[PolicyCall]) -> list[PolicyCall] | None:
    """The bindings the local mode decides, or None when Redis-down answers
    without it: a policy fails closed (503), or none is ``local`` (open)."""
    if any(x.policy.fail == FAIL_CLOSED for x in calls) or not any(x.policy.fail == FAIL_LOCAL for x in calls):
        return None
    return [x for x in calls if x.policy.fail == FAIL_LOCAL]


def full(plan: Plan, e: LocalBackendFullError) -> PolicyDecision:
    """The refusal of a call the full local backend cannot hold: the policy's
    first limit named, nothing left, the wait until the earliest key expires."""
    p = plan.policy
    name = p.groups[0].limits[0].name
    wait = timedelta(milliseconds=max(1, e.retry_after_ms))
    st = RuleState(True, 1, plan.q(name), 0, wait, wait)
    return PolicyDecision(p, True, name, st, st, plan, [{name: st}])


def plan_of(calls: Sequence[PolicyCall]) -> Plan:
    """The plan a refusal by the full backend reports (no I/O)."""
    return calls[0].plan(token=None, details=False) if len(calls) == 1 else combine(calls, details=False)


def decide(limiter: Any, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
    """The local decision of ``calls`` under sync ``limiter``'s local mode (None: not local)."""
    local = local_calls(calls)
    if local is None:
        return None
    lim = local_mode(limiter).limiter(limiter)
    try:
        d = lim.decide_all(local)
    except LocalBackendFullError as e:
        d = full(plan_of(local), e)
    return dataclasses.replace(d, decided_by=lim)


async def decide_async(limiter: Any, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
    """``decide`` for an asyncio limiter."""
    local = local_calls(calls)
    if local is None:
        return None
    lim = local_mode(limiter).async_limiter(limiter)
    try:
        d = await lim.decide_all(local)
    except LocalBackendFullError as e:
        d = full(plan_of(local), e)
    return dataclasses.replace(d, decided_by=lim)


def bound(policy: Policy, key: Any, kw: dict[str, Any]) -> PolicyCall:
    """``guard.decide``'s arguments as one binding (its lease token left to the local limiter)."""
    return policy.bind(key, **{k: v for k, v in kw.items() if k != "token"})
