"""Redis slow or down: a decision waits at most the policy's budget; after a
failure a circuit opens, so requests stop touching Redis (no reconnect storm
per request) while one background probe PINGs it every ``probe_interval``;
the first answer closes the circuit (back to Redis well within 2 s)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import redis

from .client import AsyncRateLimiter, RateLimiter
from .errors import ModuleNotLoadedError, RateLimitError
from .policy import Policy, PolicyDecision
from .scope import AsyncPermit, Permit

log = logging.getLogger("redis_rl")

# What "Redis is unreachable" looks like through redis-py (and our budget):
# refused or broken connections, timeouts, a cluster without a quorum or
# without any reachable node.
UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError, OSError,
               redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError, redis.exceptions.ClusterError)

# How long a decision that outlived its budget (or its request) may still
# answer: Redis runs a command it has read even when the caller stopped
# waiting, so its lease and estimate are given back when the reply lands.
LATE_REPLY_WAIT = 60.0


class AsyncGuard:
    def __init__(self, limiter: AsyncRateLimiter, *, probe_interval: float = 0.25) -> None:
        self.limiter = limiter
        self.probe_interval = probe_interval
        self.open = False
        self._probe: asyncio.Task[None] | None = None
        self._late: set[asyncio.Future[Any]] = set()  # strong references to background tasks

    async def decide(self, policy: Policy, key: str, **kw: Any) -> PolicyDecision | None:
        """The decision, or None when Redis cannot answer within the budget
        (the caller fails open or closed, as the policy says).

        The call is not cancelled when the budget runs out (nor when the
        request is): once sent, Redis may still run it, so it is awaited in
        the background and an admission that lands late is ended at once —
        its lease released, its estimate refunded."""
        if self.open:
            return None
        task = asyncio.ensure_future(self.limiter.decide(policy, key, **kw))
        try:
            return await asyncio.wait_for(asyncio.shield(task), policy.budget.total_seconds())
        except ModuleNotLoadedError:
            raise
        except asyncio.CancelledError:
            self._give_back_late(task)
            raise
        except TimeoutError as e:  # the budget (asyncio's timeout is the builtin one)
            self._give_back_late(task)
            self._trip(e)
            return None
        except UNAVAILABLE as e:
            self._trip(e)
            return None

    def _give_back_late(self, task: asyncio.Future[PolicyDecision]) -> None:
        async def give_back() -> None:
            try:
                decision = await asyncio.wait_for(task, LATE_REPLY_WAIT)
            except BaseException:  # never answered, or failed: nothing was taken that we know of
                return
            if decision.allowed:
                try:
                    await AsyncPermit(self.limiter, decision).close()  # nothing used
                except Exception as e:
                    log.warning("redis_rl: could not give back a late decision of %s: %s", decision.policy.name, e)
        self._keep(asyncio.get_running_loop().create_task(give_back()))

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
        task = asyncio.ensure_future(permit.close())
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

    def decide(self, policy: Policy, key: str, **kw: Any) -> PolicyDecision | None:
        if self.open:
            return None
        try:
            return self.limiter.decide(policy, key, **kw)
        except ModuleNotLoadedError:
            raise
        except UNAVAILABLE as e:
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
            self._trip(e)
            if not task.done():  # past the budget: it goes on, and says if it fails
                task.add_done_callback(self._log_failure)
        except RateLimitError as e:  # e.g. a DEBIT refused over maxmemory: the work is done, the rest ran
            log.warning("redis_rl: the server refused a settlement of %s: %s", permit.decision.policy.name, e)

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
            except Exception:
                continue
            self.open = False
