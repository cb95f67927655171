"""Scopes: ``with limiter.acquire(policy, key, estimate=N) as permit`` decides
(taking the lease and the estimate up front) and, however the block ends —
return, exception, or asyncio cancellation — releases the lease and settles
the estimate to ``permit.used(n)`` (0 when nothing was reported), in one
pipelined round trip. So "settle after the try/finally that releases" cannot
be written: there is no code of yours between the two. Cancelled while still
deciding, the call may yet run on Redis: what it took is given back when its
reply lands."""

from __future__ import annotations

import asyncio
import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Set, cast

from .args import MAX_INT, Zone
from .hooks import gave_back_late
from .policy import Policy, PolicyDecision

if TYPE_CHECKING:
    from .client import AsyncRateLimiter, RateLimiter
    from .combined import PolicyCall

log = logging.getLogger("redis_rl")

# How long a decision nobody waits for any more may still answer: Redis runs
# a command it has read even when the caller stopped waiting (a budget ran
# out, the request was cancelled), so what it took is given back on arrival.
LATE_REPLY_WAIT = 60.0

# Strong references to the tasks that wait for such replies.
_late: Set["asyncio.Future[Any]"] = set()


def give_back_when_landed(limiter: "AsyncRateLimiter", decision: "asyncio.Future[PolicyDecision]",
                          lost: "Callable[[BaseException], None] | None" = None) -> None:
    """Waits (in the background) for a decision nobody awaits any more and,
    if it admitted, gives it back whole at once (CLIENTS.md §3: one
    ``RL.ALL ... REFUND`` of its clauses; a lockout's call counts).
    ``lost`` gets the error when no reply comes (the call may still have run)."""
    async def give_back() -> None:
        try:
            landed = await asyncio.wait_for(decision, LATE_REPLY_WAIT)
        except BaseException as e:  # never answered, or failed: nothing was taken that we know of
            if lost is not None:
                lost(e)
            return
        if landed.allowed:  # given back whole: windows, buckets, quotas, estimate and lease (one RL.ALL REFUND)
            try:
                await limiter.run_many(landed.plan.refund_all())
                gave_back_late(getattr(limiter, "hooks", ()), landed.policy.name)
            except Exception as e:
                log.warning("redis_rl: could not give back a late decision of %s: %s", landed.policy.name, e)
    task = asyncio.get_running_loop().create_task(give_back())
    _late.add(task)
    task.add_done_callback(_late.discard)


class RateLimitExceeded(Exception):
    """Raised on entering a scope the policy refuses; carries the decision."""

    def __init__(self, decision: PolicyDecision) -> None:
        self.decision = decision
        super().__init__(f"{decision.policy.name}: refused by {decision.binding!r}"
                         + (f", retry after {decision.retry_after}" if decision.retry_after else ""))


class PermitClosedError(RuntimeError):
    """Usage reported after the permit closed: it can no longer be settled."""


class _PermitBase:
    def __init__(self, decision: PolicyDecision) -> None:
        self.decision = decision
        self._used: int | None = None
        self._stands = False
        self._succeeded: bool | None = None  # the outcome (None: a success unless an exception ends the scope)
        self.closed = False

    def succeeded(self) -> None:
        """The call succeeded: under ``counts="failures"`` it is given back when the permit closes."""
        self._succeeded = True

    def failed(self) -> None:
        """The call failed: under ``counts="successes"`` it is given back when the permit closes."""
        self._succeeded = False

    def _closing_calls(self) -> list[Any]:
        """The settlement, or, when the policy counts only the other outcome,
        one RL.ALL ... REFUND of everything the admission took (CLIENTS.md's
        late-reply give-back: windows, buckets, quotas, estimate, lease)."""
        counts = getattr(self.decision.policy, "counts", None)  # a combined decision: every call counts
        if counts is not None and (self._succeeded is not False) == (counts == "failures"):
            return self.decision.plan.refund_all()
        return self.decision.plan.settlement(self._used, estimate_stands=self._stands)

    @property
    def token(self) -> str | None:
        return self.decision.plan.token

    def used(self, n: int) -> None:
        """Reports the real usage of the metered limits (e.g. tokens an LLM
        answer took): an int from 0 to 2**53-1; above a limit's ``q`` it
        counts as that ``q``. Anything else raises ``ValueError`` here and
        changes nothing (the permit still closes, the estimate stands);
        reported after the permit closed: ``PermitClosedError``."""
        if self.closed:
            raise PermitClosedError(f"used({n!r}) after the permit of {self.decision.policy.name!r} closed")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_INT:
            self._stands = True  # what was taken up front stays charged
            raise ValueError(f"used must be an int from 0 to 2**53-1, not {n!r}")
        self._stands = False
        self._used = n

    def _renewals(self) -> tuple[list[Any], float]:
        return self.decision.plan.lease_renewals() if not self.decision.limited else ([], 0.0)


class Permit(_PermitBase):
    """``renew``: while the permit is open its lease is renewed (RL.RENEW)
    every third of its TTL, so a long job keeps its slot (CLIENTS.md §4)."""

    def __init__(self, limiter: "RateLimiter", decision: PolicyDecision, *, renew: bool = True) -> None:
        super().__init__(decision)
        self._limiter = decision.decided_by or limiter  # a ``local`` Redis-down decision settles where it was taken
        self._stop = threading.Event()
        calls, ttl = self._renewals()
        if renew and calls:
            threading.Thread(target=self._renew, args=(calls, ttl / 3), daemon=True, name="redis_rl-renew").start()

    def _renew(self, calls: list[Any], every: float) -> None:
        while not self._stop.wait(every):
            try:
                self._limiter.run_many(calls)
            except Exception as e:  # the lease expires by TTL: logged, the work goes on
                log.warning("redis_rl: could not renew a lease of %s: %s", self.decision.policy.name, e)

    def close(self) -> None:
        """Releases the lease and settles the estimate (once)."""
        if self.closed or self.decision.limited:
            return
        calls = self._closing_calls()
        self.closed = True
        self._stop.set()
        self._limiter.run_many(calls)

    def __enter__(self) -> "Permit":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncPermit(_PermitBase):
    """``renew``: as ``Permit``'s (a task, cancelled when the permit closes)."""

    def __init__(self, limiter: "AsyncRateLimiter", decision: PolicyDecision, *, renew: bool = True) -> None:
        super().__init__(decision)
        self._limiter = decision.decided_by or limiter  # a ``local`` Redis-down decision settles where it was taken
        self._renewing: asyncio.Task[None] | None = None
        calls, ttl = self._renewals()
        if renew and calls:
            self._renewing = asyncio.get_running_loop().create_task(self._renew(calls, ttl / 3))

    async def _renew(self, calls: list[Any], every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self._limiter.run_many(calls)
            except Exception as e:  # the lease expires by TTL: logged, the work goes on
                log.warning("redis_rl: could not renew a lease of %s: %s", self.decision.policy.name, e)

    async def close(self) -> None:
        if self.closed or self.decision.limited:
            return
        calls = self._closing_calls()
        self.closed = True
        if self._renewing is not None:
            self._renewing.cancel()
        # Shielded: a second cancellation (a client that went away while we
        # settle) must not leave the lease held or the estimate unsettled.
        task = asyncio.ensure_future(self._limiter.run_many(calls))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait([task])
            raise

    async def __aenter__(self) -> "AsyncPermit":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Acquire:
    """``with limiter.acquire(...) as permit``: decides on entry (raising
    RateLimitExceeded when refused), settles on exit."""

    def __init__(self, limiter: "RateLimiter", policy: Policy | None, key: str, kw: Mapping[str, Any],
                 calls: "Sequence[PolicyCall] | None" = None) -> None:
        self._limiter, self._policy, self._key, self._kw, self._calls = limiter, policy, key, kw, calls
        self.permit: Permit | None = None

    def __enter__(self) -> Permit:
        if self._calls is not None:  # acquire_all: several policies, one decision
            decision = self._limiter.decide_all(self._calls)
        else:
            decision = self._limiter.decide(cast(Policy, self._policy), self._key, **self._kw)
        if decision.limited:
            raise RateLimitExceeded(decision)
        self.permit = Permit(self._limiter, decision)
        return self.permit

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self.permit is not None:
            if e is not None and self.permit._succeeded is None:
                self.permit.failed()  # an exception is a failure unless the code said otherwise
            self.permit.close()


class AsyncAcquire:
    def __init__(self, limiter: "AsyncRateLimiter", policy: Policy | None, key: str, kw: Mapping[str, Any],
                 calls: "Sequence[PolicyCall] | None" = None) -> None:
        self._limiter, self._policy, self._key, self._kw, self._calls = limiter, policy, key, kw, calls
        self.permit: AsyncPermit | None = None

    async def __aenter__(self) -> AsyncPermit:
        # Shielded: cancelled while the call is on the wire, it may still run
        # on Redis; what it took is then given back when it lands.
        deciding = asyncio.ensure_future(
            self._limiter.decide_all(self._calls) if self._calls is not None
            else self._limiter.decide(cast(Policy, self._policy), self._key, **self._kw))
        try:
            decision = await asyncio.shield(deciding)
        except asyncio.CancelledError:
            give_back_when_landed(self._limiter, deciding)
            raise
        if decision.limited:
            raise RateLimitExceeded(decision)
        self.permit = AsyncPermit(self._limiter, decision)
        return self.permit

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self.permit is not None:
            if e is not None and self.permit._succeeded is None:
                self.permit.failed()  # an exception is a failure unless the code said otherwise
            await self.permit.close()


__all__ = ["Acquire", "AsyncAcquire", "AsyncPermit", "Permit", "PermitClosedError", "RateLimitExceeded", "Zone"]
