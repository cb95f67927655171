"""``RateLimiter`` (sync) and ``AsyncRateLimiter`` (asyncio): one method per
RL command over a redis-py client you already have — ``Redis``,
``RedisCluster`` or their ``redis.asyncio`` variants.

Under Cluster every call is sent to its key's primary, the slot computed here
(redis-py's ``get_node_from_key``, CRC16 as Redis does): no ``MOVED``, and no
``COMMAND GETKEYS`` round trip that redis-py otherwise makes for RL.ALL,
whose keys Redis marks movable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from typing import Any, Mapping, Sequence, cast

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from .admin import AsyncKeyAdmin, KeyAdmin  # state, reset, penalty, reward
from . import commands as c
from .args import Duration, Now, Zone
from .cluster_nodes import UNREACHABLE, node_command, node_pipeline, relearn, slot_primaries, slot_table
from .combined import PolicyCall, combine, merge
from .commands import Bucket, Call, Clause, Key, Mode, Period, Rule
from .decisions import AllDecision, DayHourDecision, Decision, LeaseDecision, LockDecision
from .backend import backend_arg, fcall, is_function_missing, is_module_missing, library, load_command, version_of
from .errors import UNAVAILABLE_CODES, LibraryNotLoadedError, ModuleNotLoadedError, RateLimitError, RedisUnavailableError
from .hooks import DecisionHooks, check_hooks
from .overrides import REFRESH, AsyncRuntimeLimits, RuntimeLimits
from .policy import Policy, PolicyDecision
from .scope import Acquire, AsyncAcquire, AsyncPermit, Permit

log = logging.getLogger("redis_rl")

# A probe RL.ALLPEEK with DETAILS: writes nothing, tells whether the engine
# answers per-rule states (SPEC "DETAILS").
_PROBE = ("RL.ALLPEEK", 1, "rl:probe", "*", "CHECK", 1, 1, 1, "COST", 0, "DETAILS")


# redis-py strips these codes from an error's text (its exception class says
# which); everything else it keeps but "ERR ", which it strips too.
_STRIPPED = ((redis.exceptions.OutOfMemoryError, "OOM"), (redis.exceptions.ReadOnlyError, "READONLY"),
             (redis.exceptions.NoPermissionError, "NOPERM"), (redis.exceptions.ExecAbortError, "EXECABORT"),
             (redis.exceptions.NoScriptError, "NOSCRIPT"))


def server_text(e: redis.exceptions.ResponseError) -> str:
    """The error reply as the server wrote it (redis-py drops its code)."""
    text = str(e)
    for cls, code in _STRIPPED:
        if isinstance(e, cls):
            return f"{code} {text}"
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.isupper():  # a code redis-py keeps: WRONGTYPE, CROSSSLOT, ...
        return text
    return "ERR " + text


# redis-py's classes for the replies that mean "cannot decide now" (its
# Cluster parser maps CLUSTERDOWN, TRYAGAIN and MASTERDOWN to them; a
# standalone client keeps the code in the text, checked too).
_UNAVAILABLE_REPLIES = (redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError)


def _server_error(e: redis.exceptions.ResponseError) -> RateLimitError:
    text = server_text(e)
    if isinstance(e, _UNAVAILABLE_REPLIES) or text.split(" ", 1)[0] in UNAVAILABLE_CODES:
        return RedisUnavailableError(text if text.split(" ", 1)[0] in UNAVAILABLE_CODES
                                     else f"{type(e).__name__}: {text}")
    lowered = text.lower()
    if lowered.startswith("err unknown command") and "rl." in lowered:
        return ModuleNotLoadedError(f"({text})")
    return RateLimitError(text)


def _details_after_probe_error(e: redis.exceptions.ResponseError) -> bool:
    """Whether to send DETAILS after the probe failed: not when the engine
    refused the option by name (a build older than it); yes otherwise (a
    NOPERM for the probe's key says nothing about the engine) -- a decision
    the engine refuses for DETAILS is then sent again without it."""
    return "DETAILS" not in str(e)


def _refuses_details(e: RateLimitError) -> bool:
    return "unknown option 'DETAILS'" in str(e)


def _skipped(node: Any, e: BaseException) -> None:
    # A primary that cannot be reached is left out of the first use's check
    # (CLIENTS.md §3: the other primaries' keys are decided by Redis
    # meanwhile); run time then meets it as any call does.
    log.warning("redis_rl: primary %s not reachable at the first use's check (%s); its keys are decided by the "
                "Redis-down mode until it answers, the module or library missing there is then met at run time",
                node.name, e)


def _module_loaded(reply: Any) -> bool:
    # COMMAND INFO answers [None] for an unknown command. (Sent as "COMMAND INFO"
    # so redis-py keeps the raw reply: its COMMAND parser fails on None.)
    return isinstance(reply, (list, tuple)) and len(reply) == 1 and reply[0] is not None


class _Limiter:
    runtime_limits: Any = None  # the override store (redis_rl.overrides); None: off
    # The ``local`` Redis-down mode's backend (redis_rl.local_mode.LocalMode); made with the default bounds on
    # first use, or set before the first request for others.
    local_mode: Any = None

    def __init__(self, client: Any, *, check_module: bool = True, hooks: Sequence[DecisionHooks] = (),
                 backend: str = "module") -> None:
        self.redis = client
        self.hooks = check_hooks(hooks)  # told of each guarded decision (redis_rl.hooks)
        self.cluster = isinstance(client, (RedisCluster, AsyncRedisCluster))
        self._checked = not check_module
        self.details_supported: bool | None = None  # known after the first-use check
        # The first use's module check runs once, not once per concurrent
        # first request (16 threads sent 16 probes to every primary).
        self._check_lock = threading.Lock()
        self._checking: asyncio.Future[None] | None = None
        # The setting (``module``, ``functions``, ``auto``) and the engine that
        # decides now (``auto``: the module until the first-use check or a
        # failover says otherwise). Module ``redis_rl.backend``.
        self.backend_setting = backend_arg(backend)
        self.backend = "functions" if self.backend_setting == "functions" else "module"

    def _wire(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """A call's arguments as the deciding engine takes them."""
        return fcall(args) if self.backend == "functions" else args

    def _recovers(self, text: str) -> bool:
        """Whether an error reply is one the backend repairs and retries once:
        the library missing on a node, or (``auto``) the module gone."""
        if self.backend == "functions":
            return is_function_missing(text)
        return self.backend_setting == "auto" and is_module_missing(text)

    def _switched(self, text: str) -> None:
        log.error("redis_rl: the redis-ratelimit module is gone (%s); backend auto: deciding with the "
                  "Functions library from now on", text)
        self.backend = "functions"

    def _node(self, key: Key) -> Any:
        return self.redis.get_node_from_key(key)

    def node_name(self, key: Key) -> str:
        """The name (host:port) of the node that serves ``key``: what the
        guard keeps one circuit per. ``"*"`` standalone, and while a
        Cluster's slots are not known yet (its first connection failed)."""
        if not self.cluster:
            return "*"
        try:
            return str(self._node(key).name)
        except Exception:  # no slot table yet (every seed refused): decided as "the cluster"
            return "*"


class RateLimiter(KeyAdmin, _Limiter):
    """Typed RL commands over a sync ``redis.Redis`` or ``redis.cluster.RedisCluster``."""

    def __init__(self, client: redis.Redis | RedisCluster, *, check_module: bool = True,
                 hooks: Sequence[DecisionHooks] = (), backend: str = "module", runtime_limits: bool = True,
                 refresh: float = REFRESH) -> None:
        """``backend``: ``"module"`` (the RL commands), ``"functions"`` (the
        Functions library, loaded when absent or older) or ``"auto"``.
        ``runtime_limits``: apply the limits an admin sets at run time
        (``limiter.runtime_limits.set(policy, {...})``, from any client;
        module ``redis_rl.overrides``), read again every ``refresh`` s."""
        if isinstance(client, (redis.asyncio.Redis, AsyncRedisCluster)):
            raise TypeError("an asyncio client: use AsyncRateLimiter")
        super().__init__(client, check_module=check_module, hooks=hooks, backend=backend)
        self.runtime_limits = RuntimeLimits(client, refresh=refresh) if runtime_limits else None

    def ping_node(self, name: str) -> None:
        """PING the node ``name`` (``node_name``), or the server / the
        Cluster's slot table for ``"*"``: the guard's probe."""
        if self.cluster and name != "*":
            node = self.redis.get_node(node_name=name)
            if node is None:
                return  # gone from the slot table (a failover learnt): it serves no key, its circuit closes
            try:
                self.redis.get_redis_connection(node).ping()  # not through the Cluster path (see _on_node)
            except UNREACHABLE:
                self._relearn(name)
                raise
        else:
            self.redis.ping()

    def _relearn(self, dead: str) -> None:
        """The probe's part of a failover: when a live primary no longer
        names ``dead`` as a primary (its replica was promoted), the slot
        table is loaded again, here and not on a call's time; the keys then
        go to their new primary (``node_name`` changes, so does their
        circuit). Nothing while ``dead`` is still named: the table is right."""
        for node in self.redis.get_primaries():
            if node.name == dead:
                continue
            try:
                reply = self.redis.get_redis_connection(node).execute_command("CLUSTER SLOTS")
            except Exception:
                continue
            if dead not in slot_primaries(reply, node.host):
                log.warning("redis_rl: %s no longer serves slots (a failover): slot table loaded again", dead)
                self.redis.nodes_manager.initialize()
            return

    def ensure_module(self) -> None:
        """Checks once that every primary has the backend's engine: the module
        (``COMMAND INFO RL.ALL``; raises ``ModuleNotLoadedError`` if not), or the
        library (loaded when absent or older; ``LibraryNotLoadedError`` when
        this user may not load it). ``auto``: the module if every primary has
        it, else the library. Called before the first command."""
        if self._checked:
            return
        with self._check_lock:
            if not self._checked:
                self._check_module()

    def _at(self, node: Any, *args: Any) -> Any:
        """``args`` on ``node`` (a Cluster primary; None: the server), straight
        to it as ``_on_node`` sends decisions: redis-py's Cluster path reloads
        the slot table on the caller's time when the node refuses."""
        if node is None:
            return self.redis.execute_command(*args)
        return self.redis.get_redis_connection(node).execute_command(*args)

    def _reachable(self) -> list[Any]:
        """The primaries that answer a PING (None standalone); an unreachable
        one is logged and left out, unless none answers (raised)."""
        if not self.cluster:
            return [None]
        nodes, error = [], None
        for node in self.redis.get_primaries():
            try:
                self._at(node, "PING")
            except UNREACHABLE as e:
                _skipped(node, e)
                error = e
                continue
            nodes.append(node)
        if not nodes and error is not None:
            raise error
        return nodes

    def _check_module(self) -> None:
        nodes = self._reachable()
        if self.backend_setting != "functions":
            missing = [node for node in nodes if not _module_loaded(self._at(node, "COMMAND INFO", "RL.ALL"))]
            if missing and self.backend_setting == "module":
                raise ModuleNotLoadedError(f"at {missing[0].name}" if missing[0] is not None else "")
            self.backend = "functions" if missing else "module"
        if self.backend == "functions":
            for node in nodes:
                self.ensure_library(node)
        try:
            probe = self._wire(_PROBE)
            self.details_supported = len(self._on_node(probe, "rl:probe") if self.cluster
                                         else self.redis.execute_command(*probe)) > 7
        except redis.exceptions.ResponseError as e:
            self.details_supported = _details_after_probe_error(e)
        except UNREACHABLE:  # the probe's primary is the one down: DETAILS until an engine refuses it (decide)
            self.details_supported = True
        self._checked = True

    def ensure_library(self, node: Any = None) -> None:
        """Loads the library on ``node`` (a Cluster primary; None: the server)
        unless it has this package's version or a newer one (``rl_version``)."""
        want = version_of(library())
        try:
            have = int(self._at(node, "FCALL", "rl_version", 0))
        except redis.exceptions.ResponseError as e:
            if not is_function_missing(str(e)):
                raise _server_error(e) from None
            have = -1
        if have >= want:
            return
        try:
            self._at(node, "FUNCTION LOAD", "REPLACE", library())
        except redis.exceptions.ResponseError as e:
            raise _load_error(e, node, have) from None
        log.info("redis_rl: Functions library %d loaded%s (was %s)", want,
                 f" on {node.name}" if node is not None else "", have if have >= 0 else "absent")

    def health(self) -> dict[str, Any]:
        """Whether Redis can decide now, and with which backend: ``{"status":
        "UP" | "DOWN", "backend": "module" | "functions", ...}`` (``detail``
        when DOWN: the module or library missing, or Redis unreachable).
        Every primary of a Cluster is asked. Before the first command it runs
        the first use's check (``ensure_module``: ``functions`` loads the
        library, ``auto`` picks its engine), so a fresh app is UP at once."""
        try:
            if not self._checked:
                self.ensure_module()
            nodes = self.redis.get_primaries() if self.cluster else [None]
            for node in nodes:
                if self.backend == "functions":
                    self._at(node, "FCALL", "rl_version", 0)
                elif not _module_loaded(self._at(node, "COMMAND INFO", "RL.ALL")):
                    raise ModuleNotLoadedError(f"at {node.name}" if node is not None else "")
        except Exception as e:
            return _health_down(self.backend, e)
        return {"status": "UP", "backend": self.backend}

    def _send(self, call: Call) -> Any:
        if self.cluster:
            return self._on_node(self._wire(call.args), call.key)
        return self.redis.execute_command(*self._wire(call.args))

    def _repair(self, text: str, call: Call) -> None:
        if self.backend == "functions":
            self.ensure_library(self._node(call.key) if self.cluster else None)
        else:
            self._switched(text)
            for node in (self.redis.get_primaries() if self.cluster else [None]):
                self.ensure_library(node)

    def run(self, call: Call) -> Any:
        """Sends one built call to its key's node and parses the reply."""
        if not self._checked:
            self.ensure_module()
        try:
            try:
                reply = self._send(call)
            except redis.exceptions.ResponseError as e:
                text = server_text(e)
                if not self._recovers(text):
                    raise
                self._repair(text, call)  # then once more (SPEC: load on that node and retry once)
                reply = self._send(call)
        except redis.exceptions.ResponseError as e:
            raise _server_error(e) from None
        return call.parse(reply)

    def _on_node(self, args: tuple[Any, ...], key: Key) -> Any:
        # Straight to the key's primary: redis-py's Cluster path answers a
        # refused connection by loading the slot table again from the other
        # nodes on every call (one dead primary slowed every decision); a
        # MOVED/ASK (slots moved) goes through it, which follows and relearns.
        # No resend on a broken connection here (the asyncio twin has one):
        # the node's sync ConnectionPool already drops a socket its server
        # closed before handing it out (get_connection's can_read check), so a
        # restarted primary's first call uses a fresh one (test_faults.py,
        # test_a_primary_restarted_while_idle_...).
        node = self._node(key)
        try:
            return self.redis.get_redis_connection(node).execute_command(*args)
        except (redis.exceptions.MovedError, redis.exceptions.AskError):
            return self.redis.execute_command(*args, target_nodes=node)

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        """Calls whose keys share one slot, pipelined: one round trip. An error
        reply of any is raised after all ran."""
        if not calls:
            return []
        if not self._checked:
            self.ensure_module()
        replies = self._pipelined(calls)
        # A call the backend can repair (the library missing on a node, the
        # module gone under ``auto``) is repaired and sent once more, alone.
        for i, reply in enumerate(replies):
            if isinstance(reply, redis.exceptions.ResponseError) and self._recovers(server_text(reply)):
                self._repair(server_text(reply), calls[i])
                try:
                    replies[i] = self._send(calls[i])
                except redis.exceptions.ResponseError as e:
                    replies[i] = e
        return _parse_all(calls, replies)

    def _pipelined(self, calls: Sequence[Call]) -> list[Any]:
        if not self.cluster:
            pipe = self.redis.pipeline(transaction=False)
            for call in calls:
                pipe.execute_command(*self._wire(call.args))
            return list(pipe.execute(raise_on_error=False))
        # Under Cluster one pipeline per node (a combined decision's
        # settlement spans the slots of its policies' keys).
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for i, call in enumerate(calls):
            node = self._node(call.key)
            by_node.setdefault(node.name, (node, []))[1].append(i)
        replies: list[Any] = [None] * len(calls)
        for node, idx in by_node.values():
            pipe = self.redis.get_redis_connection(node).pipeline(transaction=False)
            for i in idx:
                pipe.execute_command(*self._wire(calls[i].args))
            for i, reply in zip(idx, pipe.execute(raise_on_error=False)):
                replies[i] = reply
        return replies

    def check(self, key: Key, rules: Sequence[Rule], *, cost: int = 1, mode: Mode = None, now: Now = None) -> Decision:
        """RL.CHECK: sliding-window log rules ``[(count, window), ...]``; ``mode``
        ``"refund"`` gives units back, ``"debit"`` records usage whether or not it fits."""
        return self.run(c.check(key, rules, cost=cost, mode=mode, now=now))

    def peek(self, key: Key, rules: Sequence[Rule], *, cost: int = 1, now: Now = None) -> Decision:
        return self.run(c.peek(key, rules, cost=cost, now=now))

    def throttle(self, key: Key, buckets: Sequence[Bucket], *, cost: int = 1, mode: Mode = None,
                 reserve: Duration | None = None, now: Now = None) -> Decision:
        """RL.THROTTLE: token buckets ``[(burst, count, window), ...]`` (GCRA)."""
        return self.run(c.throttle(key, buckets, cost=cost, mode=mode, reserve=reserve, now=now))

    def throttle_peek(self, key: Key, buckets: Sequence[Bucket], *, cost: int = 1,
                      reserve: Duration | None = None, now: Now = None) -> Decision:
        return self.run(c.throttle(key, buckets, cost=cost, reserve=reserve, now=now, peek=True))

    def quota(self, key: Key, zone: Zone, periods: Mapping[Period | str, int], *, cost: int = 1,
              mode: Mode = None, now: Now = None) -> Decision:
        """RL.QUOTA: calendar periods ``{"day": 20, "hour": 5}`` in ``zone``."""
        return self.run(c.quota(key, zone, periods, cost=cost, mode=mode, now=now))

    def quota_peek(self, key: Key, zone: Zone, periods: Mapping[Period | str, int], *, cost: int = 1,
                   now: Now = None) -> Decision:
        return self.run(c.quota(key, zone, periods, cost=cost, now=now, peek=True))

    def dayhour(self, day_key: Key, hour_key: Key, day_limit: int, hour_limit: int,
                day_ttl: Duration, hour_ttl: Duration) -> DayHourDecision:
        return self.run(c.dayhour(day_key, hour_key, day_limit, hour_limit, day_ttl, hour_ttl))

    def lockcount(self, lock_key: Key, count_key: Key, window: Duration, max: int,
                  lock_time: Duration) -> LockDecision:
        return self.run(c.lockcount(lock_key, count_key, window, max, lock_time))

    def lease(self, key: Key, limit: int, ttl: Duration, *, cost: int = 1, token: str | None = None,
              now: Now = None) -> LeaseDecision:
        return self.run(c.lease(key, limit, ttl, cost=cost, token=token, now=now))

    def lease_peek(self, key: Key, limit: int, *, cost: int = 1, token: str | None = None,
                   now: Now = None) -> Decision:
        return self.run(c.lease_peek(key, limit, cost=cost, token=token, now=now))

    def release(self, key: Key, tokens: Sequence[str] | str, *, now: Now = None) -> tuple[int, ...]:
        return self.run(c.release(key, tokens, now=now))

    def renew(self, key: Key, ttl: Duration, tokens: Sequence[str] | str, *, now: Now = None) -> tuple[int, ...]:
        return self.run(c.renew(key, ttl, tokens, now=now))

    def all(self, clauses: Sequence[Clause], *, refund: bool = False, details: bool = False,
            now: Now = None) -> AllDecision:
        """RL.ALL: one all-or-nothing decision over ``Clause.check/throttle/quota/lease`` clauses."""
        return self.run(c.all_call(clauses, refund=refund, details=details, now=now))

    def all_peek(self, clauses: Sequence[Clause], *, details: bool = False, now: Now = None) -> AllDecision:
        return self.run(c.all_call(clauses, details=details, now=now, peek=True))

    # --- policies and scopes ---

    def decide(self, policy: Policy, key: str, *, cost: int = 1, estimate: int | None = None,
               zone: Zone | None = None, subkeys: Mapping[str, str] | None = None,
               overrides: Mapping[str, int] | None = None, token: str | None = None) -> PolicyDecision:
        """Decides ``key`` under ``policy`` in one call. An admitted decision
        that took a lease or an estimate must be ended: prefer ``acquire``, or
        call ``finish(decision, used=...)``. ``token``: the lease's token
        (random when None)."""
        if not self._checked:
            self.ensure_module()
        if self.runtime_limits is not None:
            overrides = self.runtime_limits.for_policy(policy, overrides)
        kw = dict(cost=cost, estimate=estimate, zone=zone, subkeys=subkeys, overrides=overrides, token=token)
        plan = policy.plan(key, **kw, details=bool(self.details_supported))
        try:
            return plan.decision(self.run(plan.call))
        except RateLimitError as e:  # refused whole: nothing was written
            if not (self.details_supported and _refuses_details(e)):
                raise
        self.details_supported = False
        plan = policy.plan(key, **kw, details=False)
        return plan.decision(self.run(plan.call))

    def decide_all(self, calls: Sequence[PolicyCall], *, token: str | None = None) -> PolicyDecision:
        """Decides several policies, each bound to its key (``policy.bind(key,
        cost=..., estimate=...)``), in ONE RL.ALL: admitted only if every
        limit admits, nothing written otherwise; the binding limit across all,
        every limit's state. Under Cluster, bindings whose keys hash to
        different slots are decided slot by slot and the admitting slots
        refunded when one refuses (module ``redis_rl.combined``). End an
        admitted decision with ``finish`` (or use ``acquire_all``)."""
        calls = list(calls)
        if len(calls) == 1:
            return self.decide(calls[0].policy, calls[0].key, **_kw(calls[0]), token=token)
        if not self._checked:
            self.ensure_module()
        if self.runtime_limits is not None:
            calls = [dataclasses.replace(x, overrides=self.runtime_limits.for_policy(x.policy, x.overrides))
                     if isinstance(x, PolicyCall) else x for x in calls]
        plan = combine(calls, details=bool(self.details_supported), token=token)
        groups = plan.slot_groups() if self.cluster else []
        if len(groups) < 2:
            try:
                return plan.decision(self.run(plan.call))
            except RateLimitError as e:  # refused whole: nothing was written
                if not (self.details_supported and _refuses_details(e)):
                    raise
            self.details_supported = False  # an engine older than DETAILS (as ``decide``)
            plan = combine(calls, details=False, token=plan.token)
            return plan.decision(self.run(plan.call))
        replies: list[AllDecision | None] = []
        failure: BaseException | None = None
        for g in groups:  # sync: one after the other (the asyncio limiter sends them together)
            try:
                replies.append(self.run(plan.group_call(g)))
            except Exception as e:
                failure = failure or e
                replies.append(None)
        after: list[AllDecision | None] = [None] * len(groups)
        if failure is not None or any(r is not None and r.limited for r in replies):
            for j, r in enumerate(replies):
                if r is not None and not r.limited:
                    try:
                        after[j] = self.run(plan.group_call(groups[j], refund=True))
                    except Exception as e:
                        log.warning("redis_rl: refund of an admitting Cluster slot of %s not confirmed: %s",
                                    plan.policy.name, e)
        if failure is not None:
            raise failure
        return plan.decision(merge(plan, groups, cast(list[AllDecision], replies), after))

    def finish(self, decision: PolicyDecision, used: int | None = None) -> None:
        """Releases the decision's lease and settles its estimate to ``used``."""
        permit = Permit(self, decision)
        if used is not None:
            permit.used(used)
        permit.close()

    def acquire(self, policy: Policy, key: str, **kw: Any) -> Acquire:
        """``with rl.acquire(policy, key, estimate=N) as permit: ...; permit.used(u)``."""
        return Acquire(self, policy, key, kw)

    def acquire_all(self, calls: Sequence[PolicyCall]) -> Acquire:
        """``with rl.acquire_all([p1.bind(ip), p2.bind(user, estimate=N)]) as permit``:
        one decision for all; on exit every lease released, every estimate settled."""
        return Acquire(self, None, "", {}, list(calls))


class AsyncRateLimiter(AsyncKeyAdmin, _Limiter):
    """Typed RL commands over ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``."""

    def __init__(self, client: redis.asyncio.Redis | AsyncRedisCluster, *, check_module: bool = True,
                 hooks: Sequence[DecisionHooks] = (), backend: str = "module", runtime_limits: bool = True,
                 refresh: float = REFRESH) -> None:
        """``backend``, ``runtime_limits``: as ``RateLimiter``'s."""
        if not isinstance(client, (redis.asyncio.Redis, AsyncRedisCluster)):
            raise TypeError("a sync client: use RateLimiter")
        super().__init__(client, check_module=check_module, hooks=hooks, backend=backend)
        self.runtime_limits = AsyncRuntimeLimits(client, refresh=refresh) if runtime_limits else None

    async def _primaries(self) -> list[Any]:
        if not self.cluster:
            return [None]
        await slot_table(self.redis)
        return list(self.redis.get_primaries())

    async def _at(self, node: Any, *args: Any) -> Any:
        """As ``RateLimiter._at`` (redis-py's asyncio Cluster path disconnects
        every node when one refuses, failing live primaries' calls in flight)."""
        if node is None:
            return await self.redis.execute_command(*args)
        return await node_command(node, args)

    async def _reachable(self) -> list[Any]:
        """As ``RateLimiter._reachable``."""
        nodes = await self._primaries()
        if not self.cluster:
            return nodes
        answered = await asyncio.gather(*(self._at(node, "PING") for node in nodes), return_exceptions=True)
        up = []
        for node, reply in zip(nodes, answered):
            if isinstance(reply, UNREACHABLE):
                _skipped(node, reply)
            elif isinstance(reply, BaseException):
                raise reply
            else:
                up.append(node)
        if not up:
            raise next(r for r in answered if isinstance(r, BaseException))
        return up

    async def ping_node(self, name: str) -> None:
        """PING the node ``name`` (``node_name``), or the server / the
        Cluster (its slot table loaded again) for ``"*"``: the guard's probe."""
        if self.cluster and name != "*":
            node = self.redis.get_node(node_name=name)
            if node is None:
                return  # gone from the slot table (a failover learnt): as the sync ping_node
            try:
                await node_command(node, ("PING",))  # not through the Cluster path (see _on_node)
            except UNREACHABLE:
                await relearn(self.redis, name)
                raise
        elif self.cluster:
            await self.redis.initialize()
            await self.redis.execute_command("PING", target_nodes=RedisCluster.RANDOM)
        else:
            await self.redis.ping()

    async def ensure_module(self) -> None:
        """As ``RateLimiter.ensure_module``."""
        if self._checked:
            return
        # Concurrent first requests share one check (one probe per primary).
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._check_module())
        await asyncio.shield(self._checking)

    async def _check_module(self) -> None:
        nodes = await self._reachable()
        if self.backend_setting != "functions":
            missing = [node for node in nodes if not _module_loaded(await self._at(node, "COMMAND INFO", "RL.ALL"))]
            if missing and self.backend_setting == "module":
                raise ModuleNotLoadedError(f"at {missing[0].name}" if missing[0] is not None else "")
            self.backend = "functions" if missing else "module"
        if self.backend == "functions":
            for node in nodes:
                await self.ensure_library(node)
        try:
            probe = self._wire(_PROBE)
            self.details_supported = len(await self._on_node(probe, "rl:probe") if self.cluster
                                         else await self.redis.execute_command(*probe)) > 7
        except redis.exceptions.ResponseError as e:
            self.details_supported = _details_after_probe_error(e)
        except UNREACHABLE:  # as the sync check
            self.details_supported = True
        self._checked = True

    async def ensure_library(self, node: Any = None) -> None:
        """As ``RateLimiter.ensure_library``."""
        want = version_of(library())
        try:
            have = int(await self._at(node, "FCALL", "rl_version", 0))
        except redis.exceptions.ResponseError as e:
            if not is_function_missing(str(e)):
                raise _server_error(e) from None
            have = -1
        if have >= want:
            return
        try:
            await self._at(node, "FUNCTION LOAD", "REPLACE", library())
        except redis.exceptions.ResponseError as e:
            raise _load_error(e, node, have) from None
        log.info("redis_rl: Functions library %d loaded%s (was %s)", want,
                 f" on {node.name}" if node is not None else "", have if have >= 0 else "absent")

    async def health(self) -> dict[str, Any]:
        """As ``RateLimiter.health`` (the first use's check included)."""
        try:
            if not self._checked:
                await self.ensure_module()
            for node in await self._primaries():
                if self.backend == "functions":
                    await self._at(node, "FCALL", "rl_version", 0)
                elif not _module_loaded(await self._at(node, "COMMAND INFO", "RL.ALL")):
                    raise ModuleNotLoadedError(f"at {node.name}" if node is not None else "")
        except Exception as e:
            return _health_down(self.backend, e)
        return {"status": "UP", "backend": self.backend}

    async def _send(self, call: Call) -> Any:
        if self.cluster:
            return await self._on_node(self._wire(call.args), call.key)
        return await self.redis.execute_command(*self._wire(call.args))

    async def _repair(self, text: str, call: Call) -> None:
        if self.backend == "functions":
            await self.ensure_library(self._node(call.key) if self.cluster else None)
        else:
            self._switched(text)
            for node in await self._primaries():
                await self.ensure_library(node)

    async def run(self, call: Call) -> Any:
        if not self._checked:
            await self.ensure_module()
        try:
            try:
                reply = await self._send(call)
            except redis.exceptions.ResponseError as e:
                text = server_text(e)
                if not self._recovers(text):
                    raise
                await self._repair(text, call)  # then once more (SPEC: load on that node and retry once)
                reply = await self._send(call)
        except redis.exceptions.ResponseError as e:
            raise _server_error(e) from None
        return call.parse(reply)

    async def _on_node(self, args: tuple[Any, ...], key: Key) -> Any:
        # Straight to the key's primary: redis-py's asyncio Cluster path
        # answers a refused connection by disconnecting EVERY node (its
        # ``aclose``), failing the calls in flight on the live primaries too
        # (one dead primary of three gave ~100% 503s); a MOVED/ASK (slots
        # moved) goes through it, which follows the redirect and relearns.
        await slot_table(self.redis)
        node = self._node(key)
        try:
            return await node_command(node, args)
        except (redis.exceptions.MovedError, redis.exceptions.AskError):
            return await self.redis.execute_command(*args, target_nodes=node)

    async def run_many(self, calls: Sequence[Call]) -> list[Any]:
        if not calls:
            return []
        if not self._checked:
            await self.ensure_module()
        replies = await self._pipelined(calls)
        for i, reply in enumerate(replies):  # repaired and sent once more, alone (as the sync run_many)
            if isinstance(reply, redis.exceptions.ResponseError) and self._recovers(server_text(reply)):
                await self._repair(server_text(reply), calls[i])
                try:
                    replies[i] = await self._send(calls[i])
                except redis.exceptions.ResponseError as e:
                    replies[i] = e
        return _parse_all(calls, replies)

    async def _pipelined(self, calls: Sequence[Call]) -> list[Any]:
        if not self.cluster:
            pipe = self.redis.pipeline(transaction=False)
            for call in calls:
                pipe.execute_command(*self._wire(call.args))
            return list(await pipe.execute(raise_on_error=False))
        # Under Cluster one pipeline per node, straight to it (as the sync
        # ``_pipelined``): redis-py's ClusterPipeline reloads the slot table
        # first when flagged (failing while the primary it asks is dead) and
        # answers a refused node by disconnecting every node.
        await slot_table(self.redis)
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for i, call in enumerate(calls):
            node = self._node(call.key)
            by_node.setdefault(node.name, (node, []))[1].append(i)
        replies: list[Any] = [None] * len(calls)
        done = await asyncio.gather(*(node_pipeline(node, [self._wire(calls[i].args) for i in idx])
                                      for node, idx in by_node.values()), return_exceptions=True)
        for (node, idx), got in zip(by_node.values(), done):
            if isinstance(got, BaseException):
                raise got
            for i, reply in zip(idx, got):
                if isinstance(reply, (redis.exceptions.MovedError, redis.exceptions.AskError)):
                    try:  # slots moved: redis-py's path follows and relearns
                        reply = await self.redis.execute_command(*self._wire(calls[i].args))
                    except redis.exceptions.ResponseError as e:
                        reply = e
                replies[i] = reply
        return replies

    async def check(self, key: Key, rules: Sequence[Rule], *, cost: int = 1, mode: Mode = None,
                    now: Now = None) -> Decision:
        return await self.run(c.check(key, rules, cost=cost, mode=mode, now=now))

    async def peek(self, key: Key, rules: Sequence[Rule], *, cost: int = 1, now: Now = None) -> Decision:
        return await self.run(c.peek(key, rules, cost=cost, now=now))

    async def throttle(self, key: Key, buckets: Sequence[Bucket], *, cost: int = 1, mode: Mode = None,
                       reserve: Duration | None = None, now: Now = None) -> Decision:
        return await self.run(c.throttle(key, buckets, cost=cost, mode=mode, reserve=reserve, now=now))

    async def throttle_peek(self, key: Key, buckets: Sequence[Bucket], *, cost: int = 1,
                            reserve: Duration | None = None, now: Now = None) -> Decision:
        return await self.run(c.throttle(key, buckets, cost=cost, reserve=reserve, now=now, peek=True))

    async def quota(self, key: Key, zone: Zone, periods: Mapping[Period | str, int], *, cost: int = 1,
                    mode: Mode = None, now: Now = None) -> Decision:
        return await self.run(c.quota(key, zone, periods, cost=cost, mode=mode, now=now))

    async def quota_peek(self, key: Key, zone: Zone, periods: Mapping[Period | str, int], *, cost: int = 1,
                         now: Now = None) -> Decision:
        return await self.run(c.quota(key, zone, periods, cost=cost, now=now, peek=True))

    async def dayhour(self, day_key: Key, hour_key: Key, day_limit: int, hour_limit: int,
                      day_ttl: Duration, hour_ttl: Duration) -> DayHourDecision:
        return await self.run(c.dayhour(day_key, hour_key, day_limit, hour_limit, day_ttl, hour_ttl))

    async def lockcount(self, lock_key: Key, count_key: Key, window: Duration, max: int,
                        lock_time: Duration) -> LockDecision:
        return await self.run(c.lockcount(lock_key, count_key, window, max, lock_time))

    async def lease(self, key: Key, limit: int, ttl: Duration, *, cost: int = 1, token: str | None = None,
                    now: Now = None) -> LeaseDecision:
        return await self.run(c.lease(key, limit, ttl, cost=cost, token=token, now=now))

    async def lease_peek(self, key: Key, limit: int, *, cost: int = 1, token: str | None = None,
                         now: Now = None) -> Decision:
        return await self.run(c.lease_peek(key, limit, cost=cost, token=token, now=now))

    async def release(self, key: Key, tokens: Sequence[str] | str, *, now: Now = None) -> tuple[int, ...]:
        return await self.run(c.release(key, tokens, now=now))

    async def renew(self, key: Key, ttl: Duration, tokens: Sequence[str] | str, *,
                    now: Now = None) -> tuple[int, ...]:
        return await self.run(c.renew(key, ttl, tokens, now=now))

    async def all(self, clauses: Sequence[Clause], *, refund: bool = False, details: bool = False,
                  now: Now = None) -> AllDecision:
        return await self.run(c.all_call(clauses, refund=refund, details=details, now=now))

    async def all_peek(self, clauses: Sequence[Clause], *, details: bool = False,
                       now: Now = None) -> AllDecision:
        return await self.run(c.all_call(clauses, details=details, now=now, peek=True))

    # --- policies and scopes ---

    async def decide(self, policy: Policy, key: str, *, cost: int = 1, estimate: int | None = None,
                     zone: Zone | None = None, subkeys: Mapping[str, str] | None = None,
                     overrides: Mapping[str, int] | None = None, token: str | None = None) -> PolicyDecision:
        if not self._checked:
            await self.ensure_module()
        if self.runtime_limits is not None:
            overrides = await self.runtime_limits.for_policy(policy, overrides)
        kw = dict(cost=cost, estimate=estimate, zone=zone, subkeys=subkeys, overrides=overrides, token=token)
        plan = policy.plan(key, **kw, details=bool(self.details_supported))
        try:
            return plan.decision(await self.run(plan.call))
        except RateLimitError as e:  # refused whole: nothing was written
            if not (self.details_supported and _refuses_details(e)):
                raise
        self.details_supported = False
        plan = policy.plan(key, **kw, details=False)
        return plan.decision(await self.run(plan.call))

    async def decide_all(self, calls: Sequence[PolicyCall], *, token: str | None = None) -> PolicyDecision:
        """Several policies in ONE RL.ALL (see ``RateLimiter.decide_all``);
        under Cluster one RL.ALL per slot, sent together."""
        calls = list(calls)
        if len(calls) == 1:
            return await self.decide(calls[0].policy, calls[0].key, **_kw(calls[0]), token=token)
        if not self._checked:
            await self.ensure_module()
        if self.runtime_limits is not None:
            calls = [dataclasses.replace(x, overrides=await self.runtime_limits.for_policy(x.policy, x.overrides))
                     if isinstance(x, PolicyCall) else x for x in calls]
        plan = combine(calls, details=bool(self.details_supported), token=token)
        groups = plan.slot_groups() if self.cluster else []
        if len(groups) < 2:
            try:
                return plan.decision(await self.run(plan.call))
            except RateLimitError as e:  # refused whole: nothing was written
                if not (self.details_supported and _refuses_details(e)):
                    raise
            self.details_supported = False  # an engine older than DETAILS (as ``decide``)
            plan = combine(calls, details=False, token=plan.token)
            return plan.decision(await self.run(plan.call))
        got = await asyncio.gather(*(self.run(plan.group_call(g)) for g in groups), return_exceptions=True)
        failure = next((r for r in got if isinstance(r, BaseException)), None)
        replies = [None if isinstance(r, BaseException) else cast(AllDecision, r) for r in got]
        after: list[AllDecision | None] = [None] * len(groups)
        if failure is not None or any(r is not None and r.limited for r in replies):
            admitted = [j for j, r in enumerate(replies) if r is not None and not r.limited]
            refunds = await asyncio.gather(*(self.run(plan.group_call(groups[j], refund=True)) for j in admitted),
                                           return_exceptions=True)
            for j, r in zip(admitted, refunds):
                if isinstance(r, BaseException):
                    log.warning("redis_rl: refund of an admitting Cluster slot of %s not confirmed: %s",
                                plan.policy.name, r)
                else:
                    after[j] = r
        if failure is not None:
            raise failure
        return plan.decision(merge(plan, groups, cast(list[AllDecision], replies), after))

    async def finish(self, decision: PolicyDecision, used: int | None = None) -> None:
        permit = AsyncPermit(self, decision)
        if used is not None:
            permit.used(used)
        await permit.close()

    def acquire(self, policy: Policy, key: str, **kw: Any) -> AsyncAcquire:
        """``async with rl.acquire(policy, key, estimate=N) as permit: ...``."""
        return AsyncAcquire(self, policy, key, kw)

    def acquire_all(self, calls: Sequence[PolicyCall]) -> AsyncAcquire:
        """``async with rl.acquire_all([p1.bind(ip), p2.bind(user)]) as permit: ...``."""
        return AsyncAcquire(self, None, "", {}, list(calls))


def _load_error(e: redis.exceptions.ResponseError, node: Any, have: int) -> RateLimitError:
    """FUNCTION LOAD refused: a user without the right gets the command to run once by hand."""
    where = node.name if node is not None else ""
    if isinstance(e, redis.exceptions.NoPermissionError) or server_text(e).startswith("NOPERM"):
        return LibraryNotLoadedError(
            f"the Redis user may not run FUNCTION LOAD ({server_text(e)}) and the redis-ratelimit Functions "
            f"library is {'older than this client' if have >= 0 else 'not loaded'}"
            f"{' on ' + where if where else ''}: load it once by hand with `{load_command(where)}`"
            f"{' on every primary' if node is not None else ''}, or grant the user +function|load")
    return _server_error(e)


def _health_down(backend: str, e: Exception) -> dict[str, Any]:
    if isinstance(e, redis.exceptions.ResponseError):
        text = server_text(e)
        detail = (f"the redis-ratelimit Functions library is not loaded ({text})" if is_function_missing(text)
                  else str(_server_error(e)))
    elif isinstance(e, (RateLimitError, RedisUnavailableError)):
        detail = str(e)  # ours, naming what is missing
    else:  # the connection's (redis-py: "Error 111 connecting to ...", a timeout), as Node says it
        detail = f"Redis cannot be reached ({str(e) or type(e).__name__})"
    return {"status": "DOWN", "backend": backend, "detail": detail}


def _kw(x: PolicyCall) -> dict[str, Any]:
    return {"cost": x.cost, "estimate": x.estimate, "zone": x.zone, "subkeys": x.subkeys, "overrides": x.overrides}


def _parse_all(calls: Sequence[Call], replies: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    error: RateLimitError | None = None
    for call, reply in zip(calls, replies):
        if isinstance(reply, redis.exceptions.ResponseError):
            error = error or _server_error(reply)
            out.append(None)
        elif isinstance(reply, Exception):
            raise reply
        else:
            out.append(call.parse(reply))
    if error is not None:
        raise error
    return out
