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
from typing import Any, Mapping, Sequence, cast

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from . import commands as c
from .args import Duration, Now, Zone
from .combined import PolicyCall, combine, merge
from .commands import Bucket, Call, Clause, Key, Mode, Period, Rule
from .decisions import AllDecision, DayHourDecision, Decision, LeaseDecision, LockDecision
from .errors import ModuleNotLoadedError, RateLimitError
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


def _server_error(e: redis.exceptions.ResponseError) -> RateLimitError:
    text = server_text(e)
    if text.lower().startswith("err unknown command") and "rl." in text.lower():
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


def _module_loaded(reply: Any) -> bool:
    # COMMAND INFO answers [None] for an unknown command. (Sent as "COMMAND INFO"
    # so redis-py keeps the raw reply: its COMMAND parser fails on None.)
    return isinstance(reply, (list, tuple)) and len(reply) == 1 and reply[0] is not None


class _Limiter:
    runtime_limits: Any = None  # the override store (redis_rl.overrides); None: off

    def __init__(self, client: Any, *, check_module: bool = True) -> None:
        self.redis = client
        self.cluster = isinstance(client, (RedisCluster, AsyncRedisCluster))
        self._checked = not check_module
        self.details_supported: bool | None = None  # known after the first-use check

    def _node(self, key: Key) -> Any:
        return self.redis.get_node_from_key(key)

    def _target(self, key: Key) -> dict[str, Any]:
        return {"target_nodes": self._node(key)} if self.cluster else {}


class RateLimiter(_Limiter):
    """Typed RL commands over a sync ``redis.Redis`` or ``redis.cluster.RedisCluster``."""

    def __init__(self, client: redis.Redis | RedisCluster, *, check_module: bool = True,
                 runtime_limits: bool = True, refresh: float = REFRESH) -> None:
        """``runtime_limits``: apply the limits an admin sets at run time
        (``limiter.runtime_limits.set(policy, {...})``, by any client; module
        ``redis_rl.overrides``), re-read every ``refresh`` seconds."""
        if isinstance(client, (redis.asyncio.Redis, AsyncRedisCluster)):
            raise TypeError("an asyncio client: use AsyncRateLimiter")
        super().__init__(client, check_module=check_module)
        self.runtime_limits = RuntimeLimits(client, refresh=refresh) if runtime_limits else None

    def ensure_module(self) -> None:
        """Checks once that every primary has the module (``COMMAND INFO RL.ALL``);
        raises ``ModuleNotLoadedError`` if not. Called before the first command."""
        if self._checked:
            return
        nodes = self.redis.get_primaries() if self.cluster else [None]
        for node in nodes:
            target = {"target_nodes": node} if node is not None else {}
            if not _module_loaded(self.redis.execute_command("COMMAND INFO", "RL.ALL", **target)):
                raise ModuleNotLoadedError(f"at {node.name}" if node is not None else "")
        try:
            self.details_supported = len(self.redis.execute_command(*_PROBE, **self._target("rl:probe"))) > 7
        except redis.exceptions.ResponseError as e:
            self.details_supported = _details_after_probe_error(e)
        self._checked = True

    def run(self, call: Call) -> Any:
        """Sends one built call to its key's node and parses the reply."""
        if not self._checked:
            self.ensure_module()
        try:
            reply = self.redis.execute_command(*call.args, **self._target(call.key))
        except redis.exceptions.ResponseError as e:
            raise _server_error(e) from None
        return call.parse(reply)

    def run_many(self, calls: Sequence[Call]) -> list[Any]:
        """Calls whose keys share one slot, pipelined: one round trip. An error
        reply of any is raised after all ran."""
        if not calls:
            return []
        if not self._checked:
            self.ensure_module()
        if not self.cluster:
            pipe = self.redis.pipeline(transaction=False)
            for call in calls:
                pipe.execute_command(*call.args)
            return _parse_all(calls, pipe.execute(raise_on_error=False))
        # Under Cluster one pipeline per node (a combined decision's
        # settlement spans the slots of its policies' keys).
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for i, call in enumerate(calls):
            node = self._node(call.key)
            by_node.setdefault(node.name, (node, []))[1].append(i)
        replies: list[Any] = [None] * len(calls)
        for node, idx in by_node.values():
            pipe = node.redis_connection.pipeline(transaction=False)
            for i in idx:
                pipe.execute_command(*calls[i].args)
            for i, reply in zip(idx, pipe.execute(raise_on_error=False)):
                replies[i] = reply
        return _parse_all(calls, replies)

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


class AsyncRateLimiter(_Limiter):
    """Typed RL commands over ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``."""

    def __init__(self, client: redis.asyncio.Redis | AsyncRedisCluster, *, check_module: bool = True,
                 runtime_limits: bool = True, refresh: float = REFRESH) -> None:
        """``runtime_limits``: as ``RateLimiter``'s."""
        if not isinstance(client, (redis.asyncio.Redis, AsyncRedisCluster)):
            raise TypeError("a sync client: use RateLimiter")
        super().__init__(client, check_module=check_module)
        self.runtime_limits = AsyncRuntimeLimits(client, refresh=refresh) if runtime_limits else None

    async def ensure_module(self) -> None:
        if self._checked:
            return
        if self.cluster:
            await self.redis.initialize()
        nodes = self.redis.get_primaries() if self.cluster else [None]
        for node in nodes:
            target = {"target_nodes": node} if node is not None else {}
            if not _module_loaded(await self.redis.execute_command("COMMAND INFO", "RL.ALL", **target)):
                raise ModuleNotLoadedError(f"at {node.name}" if node is not None else "")
        try:
            self.details_supported = len(await self.redis.execute_command(*_PROBE, **self._target("rl:probe"))) > 7
        except redis.exceptions.ResponseError as e:
            self.details_supported = _details_after_probe_error(e)
        self._checked = True

    async def run(self, call: Call) -> Any:
        if not self._checked:
            await self.ensure_module()
        try:
            reply = await self.redis.execute_command(*call.args, **self._target(call.key))
        except redis.exceptions.ResponseError as e:
            raise _server_error(e) from None
        return call.parse(reply)

    async def run_many(self, calls: Sequence[Call]) -> list[Any]:
        if not calls:
            return []
        if not self._checked:
            await self.ensure_module()
        pipe = self.redis.pipeline(transaction=False) if not self.cluster else self.redis.pipeline()
        for call in calls:  # under Cluster each to its key's node (the pipeline groups them)
            pipe.execute_command(*call.args, **self._target(call.key))
        replies = await pipe.execute(raise_on_error=False)
        return _parse_all(calls, replies)

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
