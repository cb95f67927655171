"""Redis slow or down: a decision waits at most the policy's budget; after a
failure a circuit opens, so requests stop touching Redis (no reconnect storm
per request) while one background probe PINGs it every ``probe_interval``;
the first answer closes the circuit (back to Redis well within 2 s)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from datetime import timedelta
from typing import Any, Awaitable, Callable, Mapping, Sequence

import redis

from .client import AsyncRateLimiter, RateLimiter
from .combined import PolicyCall
from .commands import Call
from . import hooks
from .errors import ModuleNotLoadedError, RateLimitError
from .policy import Policy, PolicyDecision
from .scope import AsyncPermit, Permit, give_back_when_landed

log = logging.getLogger("redis_rl")

# What "Redis is unreachable" looks like through redis-py (and our budget):
# refused or broken connections, timeouts, a cluster without a quorum or
# without any reachable node.
UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError, OSError,
               redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError, redis.exceptions.ClusterError)

# Leases whose admission may have run while its reply was lost (a socket
# timeout, a broken connection, a redis-py retry): released by token when
# Redis answers again. At most this many wait; past it they expire by TTL.
MAX_PENDING_RELEASES = 10_000


def _pool_exhausted(e: BaseException) -> bool:
    """redis-py's own pool has no connection to lend (``max_connections``
    reached; a BlockingConnectionPool's wait ran out): a burst, not Redis
    down, so it must not open the circuit for every request."""
    return isinstance(e, redis.exceptions.ConnectionError) and str(e) in (
        "Too many connections", "No connection available.")


def _with_token(policy: Policy, kw: Mapping[str, Any]) -> dict[str, Any]:
    """The decision's arguments with its lease token chosen here, so the
    guard can release that lease even if the reply never comes."""
    kw = dict(kw)
    if policy.has_lease and kw.get("token") is None:
        kw["token"] = uuid.uuid4().hex
    return kw


def _releases(policy: Policy, key: str, kw: Mapping[str, Any]) -> list[Call]:
    if kw.get("token") is None:
        return []
    try:
        return policy.lease_releases(key, kw["token"], kw.get("subkeys"))
    except ValueError:  # the call never got as far as Redis
        return []


def _token_for(calls: Sequence[PolicyCall]) -> str | None:
    """One lease token for every bound policy (chosen here, as ``_with_token``)."""
    return uuid.uuid4().hex if any(x.policy.has_lease for x in calls) else None


def _all_releases(calls: Sequence[PolicyCall], token: str | None) -> list[Call]:
    if token is None:
        return []
    return [r for x in calls for r in _releases(x.policy, x.key, {"token": token, "subkeys": x.subkeys})]


class AsyncGuard:
    def __init__(self, limiter: AsyncRateLimiter, *, probe_interval: float = 0.25) -> None:
        self.limiter = limiter
        self.probe_interval = probe_interval
        self.open = False
        self._probe: asyncio.Task[None] | None = None
        self._late: set[asyncio.Future[Any]] = set()  # strong references to background tasks
        self._releases: list[Call] = []  # lease releases waiting for Redis to answer

    async def decide(self, policy: Policy, key: str, **kw: Any) -> PolicyDecision | None:
        """The decision, or None when Redis cannot answer within the budget
        (the caller fails open or closed, as the policy says).

        The call is not cancelled when the budget runs out (nor when the
        request is): once sent, Redis may still run it, so it is awaited in
        the background and an admission that lands late is ended at once —
        its lease released, its estimate refunded. When the reply is lost
        (a socket timeout, a broken connection) the lease is released by its
        token once Redis answers again; the estimate cannot be told apart
        from other calls' and stays taken."""
        t0 = time.perf_counter()
        if self.open:
            return self._seen([policy], None, t0)
        kw = _with_token(policy, kw)
        return self._seen([policy], await self._guarded(self.limiter.decide(policy, key, **kw), policy.budget,
                                                        lambda: _releases(policy, key, kw)), t0)

    async def decide_all(self, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
        """``decide`` for several policies bound to their keys, in one
        decision (``AsyncRateLimiter.decide_all``); the budget is the
        smallest of theirs, the lease token chosen here (as ``decide``)."""
        t0 = time.perf_counter()
        policies = [x.policy for x in calls]
        if self.open:
            return self._seen(policies, None, t0)
        token = _token_for(calls)
        return self._seen(policies, await self._guarded(self.limiter.decide_all(calls, token=token),
                                                        min(x.policy.budget for x in calls),
                                                        lambda: _all_releases(calls, token)), t0)

    def _seen(self, policies: Sequence[Policy], decision: PolicyDecision | None, t0: float) -> PolicyDecision | None:
        """Tells the limiter's hooks (redis_rl.hooks) and passes the decision on."""
        hooks.decided(getattr(self.limiter, "hooks", ()), policies, decision, time.perf_counter() - t0)
        return decision

    async def _guarded(self, deciding: Awaitable[PolicyDecision], budget: timedelta,
                       releases: Callable[[], list[Call]]) -> PolicyDecision | None:
        task = asyncio.ensure_future(deciding)
        try:
            return await asyncio.wait_for(asyncio.shield(task), budget.total_seconds())
        except ModuleNotLoadedError:
            raise
        except asyncio.CancelledError:
            give_back_when_landed(self.limiter, task, self._lost(releases()))
            raise
        except TimeoutError as e:  # the budget (asyncio's timeout is the builtin one)
            give_back_when_landed(self.limiter, task, self._lost(releases()))
            self._trip(e)
            return None
        except UNAVAILABLE as e:  # sent, maybe run, its reply lost
            if _pool_exhausted(e):
                return None  # nothing sent; Redis is fine: this request alone fails open/closed
            self._release_later(releases())
            self._trip(e)
            return None

    def _lost(self, releases: list[Call]) -> Any:
        """What a late reply that never lands does: its lease is released by
        token when Redis answers again."""
        def lost(e: BaseException) -> None:
            if isinstance(e, (*UNAVAILABLE, asyncio.CancelledError)):
                self._release_later(releases)
                self._trip(e)
        return lost

    def _keep(self, task: asyncio.Future[Any]) -> None:
        self._late.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._late.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved (asyncio would log it as never retrieved): reported by who awaited it

    @staticmethod
    def _log_failure(task: asyncio.Future[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("redis_rl: a settlement that outlived its budget failed: %s", task.exception())

    async def close(self, permit: AsyncPermit, budget: float) -> None:
        """Ends a scope's permit within ``budget`` s; when Redis cannot be
        reached the lease expires by its TTL and the estimate stays taken
        (logged), instead of failing a request whose work is done; an error
        reply (a DEBIT refused over maxmemory) is logged too — the other
        calls of the pipelined settlement, the release among them, ran."""
        # Shielded: past the budget the settlement goes on in the background
        # (AsyncPermit.close would otherwise hold the answer until it ends).
        async def settle() -> None:
            try:
                await permit.close()
            except UNAVAILABLE as e:  # the lease goes back by token once Redis answers
                self._release_later(permit.decision.plan.lease_releases())
                self._trip(e)
                raise
        task = asyncio.ensure_future(settle())
        self._keep(task)
        try:
            await asyncio.wait_for(asyncio.shield(task), budget)
        except UNAVAILABLE as e:
            log.warning("redis_rl: could not release/settle %s: %s", permit.decision.policy.name, e)
            self._trip(e)
            if not task.done():  # past the budget: it goes on, and says if it fails
                task.add_done_callback(self._log_failure)
        except RateLimitError as e:  # e.g. a DEBIT refused over maxmemory: the work is done, the rest ran
            log.warning("redis_rl: the server refused a settlement of %s: %s", permit.decision.policy.name, e)

    def _release_later(self, calls: list[Call]) -> None:
        """Queued for the probe, which sends them before it closes the circuit."""
        room = MAX_PENDING_RELEASES - len(self._releases)
        self._releases.extend(calls[:max(0, room)])

    async def _flush_releases(self) -> bool:
        """Sends the queued releases; False (the rest kept) if Redis fails again."""
        while self._releases:
            calls, self._releases = self._releases, []
            for i, call in enumerate(calls):
                try:
                    await asyncio.wait_for(self.limiter.run(call), 0.5)
                except UNAVAILABLE:
                    self._release_later(calls[i:])
                    return False
                except Exception as e:  # an error reply: that one cannot be released
                    log.warning("redis_rl: could not release a lease on %s: %s", call.key, e)
        return True

    def _trip(self, e: BaseException) -> None:
        if not self.open:
            log.warning("redis_rl: Redis unavailable (%s); deciding without it until it answers", e or type(e).__name__)
        self.open = True
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._run_probe())

    async def _run_probe(self) -> None:
        while self.open:
            await asyncio.sleep(self.probe_interval)
            try:
                await asyncio.wait_for(self.limiter.redis.ping(), 0.5)
                if not await self._flush_releases():
                    continue
            except Exception:
                continue
            self.open = False
            log.warning("redis_rl: Redis answers again")


class Guard:
    """The sync twin: the budget is the redis-py client's ``socket_timeout``
    (give it ``socket_timeout=0.5, socket_connect_timeout=0.5``); the probe is
    a daemon thread."""

    def __init__(self, limiter: RateLimiter, *, probe_interval: float = 0.25) -> None:
        self.limiter = limiter
        self.probe_interval = probe_interval
        self.open = False
        self._lock = threading.Lock()
        self._probe: threading.Thread | None = None
        self._releases: list[Call] = []  # lease releases waiting for Redis to answer

    def decide(self, policy: Policy, key: str, **kw: Any) -> PolicyDecision | None:
        """The decision, or None when Redis cannot answer (fail open or
        closed). A decision whose reply is lost (the socket timeout) may
        still run on Redis: its lease is released by token once Redis
        answers again; its estimate stays taken."""
        t0 = time.perf_counter()
        if self.open:
            return self._seen([policy], None, t0)
        kw = _with_token(policy, kw)
        return self._seen([policy], self._guarded(lambda: self.limiter.decide(policy, key, **kw),
                                                  lambda: _releases(policy, key, kw)), t0)

    def decide_all(self, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
        """``decide`` for several policies in one decision (``RateLimiter.decide_all``)."""
        t0 = time.perf_counter()
        policies = [x.policy for x in calls]
        if self.open:
            return self._seen(policies, None, t0)
        token = _token_for(calls)
        return self._seen(policies, self._guarded(lambda: self.limiter.decide_all(calls, token=token),
                                                  lambda: _all_releases(calls, token)), t0)

    def _seen(self, policies: Sequence[Policy], decision: PolicyDecision | None, t0: float) -> PolicyDecision | None:
        """Tells the limiter's hooks (redis_rl.hooks) and passes the decision on."""
        hooks.decided(getattr(self.limiter, "hooks", ()), policies, decision, time.perf_counter() - t0)
        return decision

    def _guarded(self, decide: Callable[[], PolicyDecision],
                 releases: Callable[[], list[Call]]) -> PolicyDecision | None:
        try:
            return decide()
        except ModuleNotLoadedError:
            raise
        except UNAVAILABLE as e:
            if _pool_exhausted(e):
                return None  # nothing sent; Redis is fine: this request alone fails open/closed
            self._release_later(releases())
            self._trip(e)
            return None

    def close(self, permit: Permit) -> None:
        """Ends a scope's permit; when Redis cannot be reached the lease
        expires by its TTL and the estimate stays taken (logged); an error
        reply is logged, not raised (the rest of the settlement ran)."""
        try:
            permit.close()
        except UNAVAILABLE as e:
            log.warning("redis_rl: could not release/settle %s: %s", permit.decision.policy.name, e)
            self._release_later(permit.decision.plan.lease_releases())
            self._trip(e)
        except RateLimitError as e:  # e.g. a DEBIT refused over maxmemory: the work is done, the rest ran
            log.warning("redis_rl: the server refused a settlement of %s: %s", permit.decision.policy.name, e)

    def _release_later(self, calls: list[Call]) -> None:
        with self._lock:
            room = MAX_PENDING_RELEASES - len(self._releases)
            self._releases.extend(calls[:max(0, room)])

    def _flush_releases(self) -> bool:
        while True:
            with self._lock:
                calls, self._releases = self._releases, []
            if not calls:
                return True
            for i, call in enumerate(calls):
                try:
                    self.limiter.run(call)
                except UNAVAILABLE:
                    self._release_later(calls[i:])
                    return False
                except Exception as e:  # an error reply: that one cannot be released
                    log.warning("redis_rl: could not release a lease on %s: %s", call.key, e)

    def _trip(self, e: BaseException) -> None:
        with self._lock:
            if not self.open:
                log.warning("redis_rl: Redis unavailable (%s); deciding without it until it answers", e)
            self.open = True
            if self._probe is None or not self._probe.is_alive():
                self._probe = threading.Thread(target=self._run_probe, daemon=True, name="redis_rl-probe")
                self._probe.start()

    def _run_probe(self) -> None:
        while self.open:
            time.sleep(self.probe_interval)
            try:
                self.limiter.redis.ping()
                if not self._flush_releases():
                    continue
            except Exception:
                continue
            self.open = False
