"""Redis slow or down (CLIENTS.md §3): a decision waits at most the policy's
budget. There is one circuit per node (per Cluster primary; one for a
standalone server): a failure of that node opens it (a refused or broken
connection, CLUSTERDOWN/TRYAGAIN/MASTERDOWN/LOADING, or ``OVERRUNS``
budget overruns in a row, not one), so requests on its keys stop touching
it (no reconnect storm per request) while one background probe PINGs it
every ``probe_interval``; the first answer closes it (back to Redis well
within 2 s). Keys on the other nodes are decided by Redis meanwhile.

A reply that lands after the budget (within ``LATE_REPLY_WAIT``, 60 s) is
given back whole: one ``RL.ALL ... REFUND`` of the same clauses. A reply
already received when the budget is checked is used (the app's own event
loop stalled; Redis was fine).

Whenever Redis cannot decide, a policy with ``fail="local"`` is decided here
on this process's local backend (``redis_rl.local_mode``); the guard returns
None (the adapters fail open or closed) when a policy of the call fails
closed or none is local."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import threading
import time
import uuid
import weakref
from datetime import timedelta
from typing import Any, Awaitable, Callable, Mapping, Sequence

import redis

from .client import AsyncRateLimiter, RateLimiter
from .combined import PolicyCall
from .commands import Call
from . import hooks
from . import local_mode
from .errors import ModuleNotLoadedError, RateLimitError, RedisUnavailableError
from .policy import Policy, PolicyDecision
from .scope import AsyncPermit, Permit, give_back_when_landed

log = logging.getLogger("redis_rl")

# What "Redis is unreachable" looks like through redis-py (and our budget):
# refused or broken connections, timeouts, a cluster without a quorum or
# without any reachable node.
# (RedisClusterException: "Redis Cluster cannot be connected", no slot
# table, no node for a slot; RedisUnavailableError: the replies that say
# "not now", wrapped by the limiter.)
UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError, OSError,
               redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError, redis.exceptions.ClusterError,
               redis.exceptions.RedisClusterException, RedisUnavailableError)

# Budget overruns in a row on one node that open its circuit: one is a
# hiccup (a GC pause, a slow command), not an outage.
OVERRUNS = 3

# After the budget, how long a decision whose reply is already in the
# socket may take to be read (the event loop was busy: the app's own stall).
GRACE = 0.05

# Command and socket timeouts shorter than the budget plus this drop replies
# Redis still runs (CLIENTS.md §3): refused at start.
LATE_REPLY_MARGIN = 10.0

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


_UNSET = object()
_warned: "weakref.WeakSet[Any]" = weakref.WeakSet()  # clients already warned about redis-py's default


def _declared_default(cls: type, name: str = "socket_timeout") -> Any:
    """The default of ``name`` in the first constructor of ``cls``'s MRO
    that declares it: the installed redis-py's own (None up to 5.x, 5 s in
    8.x), read from the library rather than assumed."""
    for k in cls.__mro__:
        init = k.__dict__.get("__init__")
        if init is None:
            continue
        try:
            p = inspect.signature(init).parameters.get(name)
        except (TypeError, ValueError):
            continue
        if p is not None and p.default is not inspect.Parameter.empty:
            return p.default
    return _UNSET


def _socket_timeout(client: Any) -> tuple[Any, bool]:
    """The client's socket timeout and whether it is redis-py's default
    (the app set none): given to the client (``Redis(...)``,
    ``RedisCluster(...)``) or, when absent (``from_url``), its connection
    class's."""
    kwargs = getattr(client, "connection_kwargs", None)
    pool = getattr(client, "connection_pool", None)
    if kwargs is None:
        kwargs = getattr(pool, "connection_kwargs", None) or {}
    if not isinstance(kwargs, dict):
        return None, False
    if "socket_timeout" in kwargs:
        timeout = kwargs["socket_timeout"]
        return timeout, timeout is not None and timeout == _declared_default(type(client))
    connection_class = getattr(pool, "connection_class", None) or getattr(client, "connection_class", None)
    if not isinstance(connection_class, type):
        return None, False
    timeout = _declared_default(connection_class)
    return (None, False) if timeout is _UNSET else (timeout, timeout is not None)


def check_socket_timeout(client: Any, budget: float) -> None:
    """Refuses a redis-py client whose ``socket_timeout`` would drop a reply
    Redis still runs (shorter than the budget + 10 s): a 503'd request's
    admission could then not be given back. None (no timeout) is right: the
    budget bounds each decision.

    A timeout the app did not choose (redis-py's own default: 5 s from
    redis-py 8) is not refused, so ``Redis(host=...)`` keeps working across
    redis-py versions: it is logged once per client, saying what it costs."""
    timeout, default = _socket_timeout(client)
    if not isinstance(timeout, (int, float)) or timeout >= budget + LATE_REPLY_MARGIN:
        return
    if not default:
        raise ValueError(f"socket_timeout={timeout} s drops replies Redis still runs: give none (the policy's "
                         f"budget bounds each decision) or at least the budget + {LATE_REPLY_MARGIN:g} s "
                         f"({budget + LATE_REPLY_MARGIN:g} s), so a late admission can be given back")
    try:
        if client in _warned:
            return
        _warned.add(client)
    except TypeError:  # not weak-referenceable: warn each time rather than never
        pass
    log.warning("redis_rl: the Redis client's socket_timeout is redis-py %s's default, %g s (the app set none): "
                "a reply Redis sends later than %g s is dropped, so what that decision charged stays charged "
                "(windows, buckets, quotas; leases come back by token once Redis answers). Give the client "
                "socket_timeout=None (the policy's budget, here %g s, bounds each decision) or at least the "
                "budget + %g s (%g s)", redis.__version__, timeout, timeout, budget, LATE_REPLY_MARGIN,
                budget + LATE_REPLY_MARGIN)


def _slot_key(policy: Policy, key: str) -> str:
    """A key in the slot of every key of ``policy`` for ``key``."""
    return f"{{{policy.tag if policy.tag is not None else key}}}"


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


class _Circuit:
    """One node's circuit: open while the node fails; its probe closes it."""

    __slots__ = ("node", "open", "overruns", "probe")

    def __init__(self, node: str) -> None:
        self.node = node
        self.open = False
        self.overruns = 0
        self.probe: Any = None


class _Circuits:
    """What the sync and asyncio guards share: the circuits by node, the
    lease releases waiting for Redis, what ``health()`` reports."""

    def __init__(self, limiter: Any, probe_interval: float) -> None:
        self.limiter = limiter
        self.probe_interval = probe_interval
        self._circuits: dict[str, _Circuit] = {}
        self._releases: list[Call] = []  # lease releases waiting for Redis to answer
        self._lock = threading.Lock()
        self.module_missing: str | None = None  # the last "unknown command" while deciding

    @property
    def open(self) -> bool:
        """Whether some node's circuit is open (its keys decided without Redis)."""
        return any(c.open for c in self._circuits.values())

    def _circuit(self, node: str) -> _Circuit:
        c = self._circuits.get(node)
        if c is None:
            c = self._circuits.setdefault(node, _Circuit(node))
        return c

    def _nodes(self, slot_keys: Sequence[str]) -> list[_Circuit]:
        name = getattr(self.limiter, "node_name", None)
        names = {name(k) if name is not None else "*" for k in slot_keys}
        return [self._circuit(n) for n in sorted(names)]

    @staticmethod
    def _any_open(circuits: Sequence[_Circuit]) -> bool:
        return any(c.open for c in circuits)

    def _ok(self, circuits: Sequence[_Circuit]) -> None:
        for c in circuits:
            c.overruns = 0
        self.module_missing = None

    def _overrun(self, circuits: Sequence[_Circuit], e: BaseException) -> None:
        for c in circuits:
            c.overruns += 1
            if c.overruns >= OVERRUNS:
                self._trip([c], e)

    def _module_missing(self, e: ModuleNotLoadedError) -> None:
        if self.module_missing is None:
            log.error("redis_rl: %s; deciding by each policy's Redis-down mode", e)
        self.module_missing = str(e)

    def health(self) -> dict[str, Any]:
        """``{"status": "UP"|"DOWN", ...}``: DOWN while a node's circuit is
        open (``"open": [nodes]``) or the module is missing
        (``"module": "<why>"``; ``"detail"`` says which, as Node's; naming the redis-ratelimit module, or the
        Functions library); ``"backend"``: the engine deciding now
        (``"module"`` or ``"functions"``). For an app's readiness check; its
        liveness answer should not depend on it."""
        out: dict[str, Any] = {"status": "UP", "backend": getattr(self.limiter, "backend", "module")}
        nodes = sorted(c.node for c in self._circuits.values() if c.open)
        if nodes:
            # "detail" says why, as Node's health() does ("*": a standalone server)
            out.update(status="DOWN", open=nodes, detail=f"Redis cannot be reached: circuit open for {', '.join(nodes)}")
        if self.module_missing is not None:
            out.update(status="DOWN", module=self.module_missing, detail=self.module_missing)
        return out

    def _release_later(self, calls: list[Call]) -> None:
        """Queued; sent by a probe before it closes its circuit, or by a
        flusher every ``probe_interval`` while no circuit opened (one
        overrun: the reply lost, Redis maybe fine)."""
        if not calls:
            return
        with self._lock:
            room = MAX_PENDING_RELEASES - len(self._releases)
            self._releases.extend(calls[:max(0, room)])
        self._start_flusher()

    def _start_flusher(self) -> None:
        raise NotImplementedError

    def _trip(self, circuits: Sequence[_Circuit], e: BaseException) -> None:
        raise NotImplementedError

    @staticmethod
    def _culprits(circuits: Sequence[_Circuit], e: BaseException) -> Sequence[_Circuit]:
        """The circuits an error opens. A decision over several nodes that
        failed on one opens that one's when the error names it (redis-py
        names the node it could not reach: "Error 111 connecting to
        host:port"), so a dead primary does not open a live one's circuit
        (CLIENTS.md §3: a circuit per node); else every node of the call."""
        if len(circuits) > 1:
            text = str(e)
            named = [c for c in circuits if c.node != "*" and re.search(re.escape(c.node) + r"(?!\d)", text)]
            if named:
                return named
        return circuits

    def _seen(self, policies: Sequence[Policy], decision: PolicyDecision | None, t0: float) -> PolicyDecision | None:
        """Tells the limiter's hooks (redis_rl.hooks) and passes the decision on."""
        hooks.decided(getattr(self.limiter, "hooks", ()), policies, decision, time.perf_counter() - t0)
        return decision

    def _down(self, policies: Sequence[Policy], t0: float, local: PolicyDecision | None) -> PolicyDecision | None:
        """Redis could not decide: the hooks hear ``unavailable`` (mode ``local`` when the local mode
        decided, as in Node); the local decision (or None: open/closed) is passed on."""
        self._seen(policies, None, t0)
        return local


class AsyncGuard(_Circuits):
    def __init__(self, limiter: AsyncRateLimiter, *, probe_interval: float = 0.25,
                 check_timeouts: bool = True) -> None:
        """``check_timeouts``: refuse a client whose socket timeout drops late
        replies (``check_socket_timeout(client, 0.5)``; the adapters check
        each policy's budget)."""
        if check_timeouts:
            check_socket_timeout(limiter.redis, 0.5)
        super().__init__(limiter, probe_interval)
        self._late: set[asyncio.Future[Any]] = set()  # strong references to background tasks

    async def decide(self, policy: Policy, key: str, **kw: Any) -> PolicyDecision | None:
        """The decision, or None when Redis cannot answer within the budget
        (the caller fails open or closed, as the policy says).

        The call is not cancelled when the budget runs out (nor when the
        request is): once sent, Redis may still run it, so it is awaited in
        the background and an admission that lands late is given back whole
        (one RL.ALL ... REFUND). When the reply is lost (a broken
        connection) the lease is released by its token once Redis answers
        again; the other units cannot be told apart and stay taken."""
        t0 = time.perf_counter()
        circuits = self._nodes([_slot_key(policy, key)]) if isinstance(key, str) else self._nodes(["*"])
        if self._any_open(circuits):
            return self._down([policy], t0, await self._local([local_mode.bound(policy, key, kw)]))
        kw = _with_token(policy, kw)
        decision = await self._guarded(self.limiter.decide(policy, key, **kw), policy.budget,
                                       lambda: _releases(policy, key, kw), circuits)
        if decision is None:
            return self._down([policy], t0, await self._local([local_mode.bound(policy, key, kw)]))
        return self._seen([policy], decision, t0)

    async def decide_all(self, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
        """``decide`` for several policies bound to their keys, in one
        decision (``AsyncRateLimiter.decide_all``); the budget is the
        smallest of theirs, the lease token chosen here (as ``decide``)."""
        t0 = time.perf_counter()
        policies = [x.policy for x in calls]
        circuits = self._nodes([_slot_key(x.policy, x.key) if isinstance(x.key, str) else "*" for x in calls])
        if self._any_open(circuits):
            return self._down(policies, t0, await self._local(calls))
        token = _token_for(calls)
        decision = await self._guarded(self.limiter.decide_all(calls, token=token),
                                       min(x.policy.budget for x in calls), lambda: _all_releases(calls, token),
                                       circuits)
        if decision is None:
            return self._down(policies, t0, await self._local(calls))
        return self._seen(policies, decision, t0)

    async def _local(self, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
        """Redis cannot decide: the ``local`` policies decided on the local backend (None: open or closed)."""
        return await local_mode.decide_async(self.limiter, calls)

    async def _guarded(self, deciding: Awaitable[PolicyDecision], budget: timedelta,
                       releases: Callable[[], list[Call]], circuits: list[_Circuit]) -> PolicyDecision | None:
        task = asyncio.ensure_future(deciding)
        try:
            try:
                decision = await asyncio.wait_for(asyncio.shield(task), budget.total_seconds())
            except TimeoutError:  # the budget (asyncio's timeout is the builtin one)
                # A reply already received is used: the loop may have been
                # busy (the app's own stall) while Redis answered in time.
                await asyncio.wait([task], timeout=GRACE)
                if not task.done():
                    give_back_when_landed(self.limiter, task, self._lost(releases(), circuits))
                    self._overrun(circuits, TimeoutError(f"no reply within {budget.total_seconds():g} s"))
                    return None
                decision = task.result()
        except ModuleNotLoadedError as e:
            if not getattr(self.limiter, "_checked", True):
                raise  # the first use's check: a misconfigured server (the adapters answer a 500 naming it)
            self._module_missing(e)  # gone at run time (a failover to a server without it)
            return None
        except asyncio.CancelledError:
            give_back_when_landed(self.limiter, task, self._lost(releases(), circuits))
            raise
        except UNAVAILABLE as e:  # sent, maybe run, its reply lost
            if _pool_exhausted(e):
                return None  # nothing sent; Redis is fine: this request alone fails open/closed
            self._release_later(releases())
            self._trip(circuits, e)
            return None
        self._ok(circuits)
        return decision

    def _lost(self, releases: list[Call], circuits: list[_Circuit]) -> Any:
        """What a late reply that never lands does: its lease is released by
        token when Redis answers again."""
        def lost(e: BaseException) -> None:
            if isinstance(e, (*UNAVAILABLE, asyncio.CancelledError)):
                self._release_later(releases)
                self._trip(circuits, e)
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
        plan = permit.decision.plan
        circuits = self._nodes(plan.keys[:1]) if plan.keys else self._nodes(["*"])

        # Shielded: past the budget the settlement goes on in the background
        # (AsyncPermit.close would otherwise hold the answer until it ends).
        async def settle() -> None:
            try:
                await permit.close()
            except UNAVAILABLE as e:  # the lease goes back by token once Redis answers
                self._release_later(plan.lease_releases())
                self._trip(circuits, e)
                raise
        task = asyncio.ensure_future(settle())
        self._keep(task)
        try:
            await asyncio.wait_for(asyncio.shield(task), budget)
        except TimeoutError:
            await asyncio.wait([task], timeout=GRACE)
            if not task.done():  # past the budget: it goes on, and says if it fails
                log.warning("redis_rl: the settlement of %s outlived its budget", permit.decision.policy.name)
                self._overrun(circuits, TimeoutError("settlement past its budget"))
                task.add_done_callback(self._log_failure)
        except UNAVAILABLE as e:
            log.warning("redis_rl: could not release/settle %s: %s", permit.decision.policy.name, e)
        except RateLimitError as e:  # e.g. a DEBIT refused over maxmemory: the work is done, the rest ran
            log.warning("redis_rl: the server refused a settlement of %s: %s", permit.decision.policy.name, e)

    def _start_flusher(self) -> None:
        if getattr(self, "_flusher", None) is None or self._flusher.done():
            try:
                self._flusher = asyncio.get_running_loop().create_task(self._run_flusher())
            except RuntimeError:  # no loop (closing): the probe sends them
                pass

    async def _run_flusher(self) -> None:
        while self._releases:
            await asyncio.sleep(self.probe_interval)
            if not self.open:  # else the probes send them
                try:
                    await self._flush_releases()
                except Exception:
                    pass

    async def _flush_releases(self) -> bool:
        """Sends the queued releases; False (the rest kept) if Redis fails again."""
        while self._releases:
            with self._lock:
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

    def _trip(self, circuits: Sequence[_Circuit], e: BaseException) -> None:
        for c in self._culprits(circuits, e):
            if not c.open:
                log.warning("redis_rl: Redis%s unavailable (%s); its keys decided without it until it answers",
                            f" {c.node}" if c.node != "*" else "", e or type(e).__name__)
            c.open = True
            if c.probe is None or c.probe.done():
                c.probe = asyncio.get_running_loop().create_task(self._run_probe(c))

    async def _ping(self, node: str) -> None:
        ping_node = getattr(self.limiter, "ping_node", None)
        await (ping_node(node) if ping_node is not None else self.limiter.redis.ping())

    async def _run_probe(self, c: _Circuit) -> None:
        while c.open:
            await asyncio.sleep(self.probe_interval)
            try:
                await asyncio.wait_for(self._ping(c.node), 0.5)
                if not await self._flush_releases():
                    continue
            except Exception:
                continue
            c.open = False
            c.overruns = 0
            log.warning("redis_rl: Redis%s answers again", f" {c.node}" if c.node != "*" else "")


class Guard(_Circuits):
    """The sync twin: the budget is the redis-py client's ``socket_timeout``
    (give it ``socket_timeout=0.5, socket_connect_timeout=0.5``); the probe is
    a daemon thread per open circuit. A reply later than the socket timeout
    is lost: what it took stays taken but its lease (released by token once
    Redis answers) — the exemption CLIENTS.md §3 names."""

    def __init__(self, limiter: RateLimiter, *, probe_interval: float = 0.25) -> None:
        super().__init__(limiter, probe_interval)

    def decide(self, policy: Policy, key: str, **kw: Any) -> PolicyDecision | None:
        """The decision, or None when Redis cannot answer (fail open or
        closed). A decision whose reply is lost (the socket timeout) may
        still run on Redis: its lease is released by token once Redis
        answers again; its estimate stays taken."""
        t0 = time.perf_counter()
        circuits = self._nodes([_slot_key(policy, key)]) if isinstance(key, str) else self._nodes(["*"])
        if self._any_open(circuits):
            return self._down([policy], t0, self._local([local_mode.bound(policy, key, kw)]))
        kw = _with_token(policy, kw)
        decision = self._guarded(lambda: self.limiter.decide(policy, key, **kw), lambda: _releases(policy, key, kw),
                                 circuits)
        if decision is None:
            return self._down([policy], t0, self._local([local_mode.bound(policy, key, kw)]))
        return self._seen([policy], decision, t0)

    def decide_all(self, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
        """``decide`` for several policies in one decision (``RateLimiter.decide_all``)."""
        t0 = time.perf_counter()
        policies = [x.policy for x in calls]
        circuits = self._nodes([_slot_key(x.policy, x.key) if isinstance(x.key, str) else "*" for x in calls])
        if self._any_open(circuits):
            return self._down(policies, t0, self._local(calls))
        token = _token_for(calls)
        decision = self._guarded(lambda: self.limiter.decide_all(calls, token=token),
                                 lambda: _all_releases(calls, token), circuits)
        if decision is None:
            return self._down(policies, t0, self._local(calls))
        return self._seen(policies, decision, t0)

    def _local(self, calls: Sequence[PolicyCall]) -> PolicyDecision | None:
        """Redis cannot decide: the ``local`` policies decided on the local backend (None: open or closed)."""
        return local_mode.decide(self.limiter, calls)

    def _guarded(self, decide: Callable[[], PolicyDecision], releases: Callable[[], list[Call]],
                 circuits: list[_Circuit]) -> PolicyDecision | None:
        try:
            decision = decide()
        except ModuleNotLoadedError as e:
            if not getattr(self.limiter, "_checked", True):
                raise  # the first use's check: a misconfigured server (the adapters answer a 500 naming it)
            self._module_missing(e)  # gone at run time (a failover to a server without it)
            return None
        except (redis.exceptions.TimeoutError, TimeoutError) as e:  # the socket timeout: the budget
            self._release_later(releases())
            self._overrun(circuits, e)
            return None
        except UNAVAILABLE as e:
            if _pool_exhausted(e):
                return None  # nothing sent; Redis is fine: this request alone fails open/closed
            self._release_later(releases())
            self._trip(circuits, e)
            return None
        self._ok(circuits)
        return decision

    def close(self, permit: Permit) -> None:
        """Ends a scope's permit; when Redis cannot be reached the lease
        expires by its TTL and the estimate stays taken (logged); an error
        reply is logged, not raised (the rest of the settlement ran)."""
        try:
            permit.close()
        except UNAVAILABLE as e:
            log.warning("redis_rl: could not release/settle %s: %s", permit.decision.policy.name, e)
            self._release_later(permit.decision.plan.lease_releases())
            keys = permit.decision.plan.keys
            self._trip(self._nodes(keys[:1]) if keys else self._nodes(["*"]), e)
        except RateLimitError as e:  # e.g. a DEBIT refused over maxmemory: the work is done, the rest ran
            log.warning("redis_rl: the server refused a settlement of %s: %s", permit.decision.policy.name, e)

    def _start_flusher(self) -> None:
        with self._lock:
            flusher = getattr(self, "_flusher", None)
            if flusher is None or not flusher.is_alive():
                self._flusher = threading.Thread(target=self._run_flusher, daemon=True, name="redis_rl-release")
                self._flusher.start()

    def _run_flusher(self) -> None:
        while self._releases:
            time.sleep(self.probe_interval)
            if not self.open:  # else the probes send them
                try:
                    self._flush_releases()
                except Exception:
                    pass

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

    def _trip(self, circuits: Sequence[_Circuit], e: BaseException) -> None:
        with self._lock:
            for c in self._culprits(circuits, e):
                if not c.open:
                    log.warning("redis_rl: Redis%s unavailable (%s); its keys decided without it until it answers",
                                f" {c.node}" if c.node != "*" else "", e)
                c.open = True
                if c.probe is None or not c.probe.is_alive():
                    c.probe = threading.Thread(target=self._run_probe, args=(c,), daemon=True, name="redis_rl-probe")
                    c.probe.start()

    def _run_probe(self, c: _Circuit) -> None:
        ping_node = getattr(self.limiter, "ping_node", None)
        while c.open:
            time.sleep(self.probe_interval)
            try:
                ping_node(c.node) if ping_node is not None else self.limiter.redis.ping()
                if not self._flush_releases():
                    continue
            except Exception:
                continue
            c.open = False
            c.overruns = 0
            # as the async guard: the operator who saw "unavailable" sees the end of it
            log.warning("redis_rl: Redis%s answers again", f" {c.node}" if c.node != "*" else "")
