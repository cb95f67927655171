"""Runtime overrides: an admin changes a limit while the service runs, and
every instance -- of any client: Java, Python, Node -- applies it within a
refresh (clients/CLIENTS.md §1, "overrides").

The store is one Redis hash per prefix, ``<prefix>ratelimit:limits``, field
``<policy>/<limit>``, value the limit's new ``q`` as a decimal integer (a
window's or quota's limit, a bucket's rate, a concurrency limit, a lockout's
max). A limiter reads it before its first decision for a prefix and then in
the background every ``refresh`` (250 ms), keeping the last values while
Redis cannot be reached. The module applies a new limit to the existing
state, so nothing is reset. A stored value the limit cannot take (not a
decimal integer; 0 for a window, bucket or concurrency limit, whose commands
need 1 or more) is ignored, logged once, and the configured limit applies.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import weakref
from typing import Any, Mapping

import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from . import args as a
from .cluster_nodes import node_command, slot_table
from .policy import Limit, Policy

log = logging.getLogger("redis_rl")

REFRESH = 0.25  # seconds: CLIENTS.md "refreshed at least every 250 ms"
# How long a prefix's first decision waits for the hash's first read. A
# healthy Redis answers in well under a millisecond; a stalled one must not
# eat the decision's budget (the decision then goes out with the configured
# limits). An app calls ``load`` at start-up to wait for it in full.
FIRST_READ_WAIT = 0.1
_DECIMAL = re.compile(r"[0-9]{1,16}")


def hash_key(prefix: str) -> str:
    """The override hash of a prefix: ``<prefix>ratelimit:limits``."""
    return f"{prefix}ratelimit:limits"


def field(policy: Policy | str, limit: Limit | str) -> str:
    """The hash field of a limit: ``<policy>/<limit>``."""
    p = policy.name if isinstance(policy, Policy) else policy
    return f"{p}/{limit.name if isinstance(limit, Limit) else limit}"


def lowest(limit: Limit) -> int:
    """The smallest ``q`` a limit takes: 0 for a quota or lockout (refuse
    everything), else 1 (RL.CHECK, RL.THROTTLE and RL.LEASE need 1 or more)."""
    return 0 if limit.kind in ("quota", "lockout") else 1


def parse(raw: Mapping[Any, Any]) -> dict[str, str]:
    """HGETALL's reply as text (redis-py gives bytes unless decode_responses)."""
    def text(v: Any) -> str:
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return {text(k): text(v) for k, v in raw.items()}


class _Store:
    """The values read per prefix, and what a policy takes from them."""

    def __init__(self, refresh: float) -> None:
        if not isinstance(refresh, (int, float)) or isinstance(refresh, bool) or not 0 < refresh <= REFRESH:
            raise a.invalid("refresh", f"invalid refresh {refresh!r}: seconds above 0, at most {REFRESH}")
        self.refresh = float(refresh)
        self._values: dict[str, dict[str, str]] = {}
        self._warned: set[tuple[str, str, str]] = set()

    def apply(self, prefix: str, raw: Mapping[Any, Any]) -> None:
        """Takes a snapshot of the hash (what a refresh read)."""
        self._values[prefix] = parse(raw)

    def values(self, policy: Policy) -> dict[str, int]:
        """The overrides in force for ``policy``: limit name → q."""
        stored = self._values.get(policy.prefix)
        if not stored:
            return {}
        out: dict[str, int] = {}
        for lim in policy.limits:
            v = stored.get(field(policy, lim))
            if v is None:
                continue
            if _DECIMAL.fullmatch(v) and lowest(lim) <= int(v) <= a.MAX_INT:
                out[lim.name] = int(v)
            elif (policy.prefix, field(policy, lim), v) not in self._warned:
                self._warned.add((policy.prefix, field(policy, lim), v))
                log.warning("redis_rl: ignoring runtime limit %s%s = %r: not an integer from %d to 2^53-1",
                            hash_key(policy.prefix), " " + field(policy, lim), v, lowest(lim))
        return out

    def merged(self, policy: Policy, overrides: Mapping[str, int] | None) -> Mapping[str, int] | None:
        """The stored overrides with a call's own ``overrides`` on top."""
        stored = self.values(policy)
        if not stored:
            return overrides
        if overrides:
            stored.update(overrides)
        return stored

    @staticmethod
    def checked(policy: Policy, limits: Mapping[str, int]) -> list[Any]:
        """HSET's arguments for ``limits`` ({limit name: q}), every value checked."""
        if not isinstance(limits, Mapping) or not limits:
            raise a.invalid("limits", "no limit to set: give {limit name: q, ...}")
        args: list[Any] = []
        for name, q in limits.items():
            try:
                lim = policy.limit(name)
            except KeyError:
                raise a.invalid("limit_name", f"policy {policy.name!r} has no limit {name!r}") from None
            a.integer(q, "q", lowest(lim))
            args += [field(policy, lim), str(q)]
        return args

    def effective(self, policy: Policy, stored: Mapping[Any, Any]) -> dict[str, int]:
        """Every limit's q in force, given the hash's contents."""
        self.apply(policy.prefix, stored)
        values = self.values(policy)
        return {lim.name: values.get(lim.name, lim.limit) for lim in policy.limits}


class RuntimeLimits(_Store):
    """The override store of a sync ``RateLimiter``: a daemon thread per
    prefix re-reads the hash every ``refresh`` seconds."""

    def __init__(self, client: Any, *, refresh: float = REFRESH) -> None:
        super().__init__(refresh)
        self.redis = client
        self._first: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def _read(self, prefix: str) -> None:
        try:
            self.apply(prefix, self.redis.hgetall(hash_key(prefix)))
        except Exception as e:  # Redis down: the last values stay
            log.debug("redis_rl: runtime limits of %r not refreshed: %s", prefix, e)

    def _started(self, prefix: str) -> threading.Event:
        first = self._first.get(prefix)
        if first is None:
            with self._lock:
                first = self._first.get(prefix)
                if first is None:
                    first = self._first[prefix] = threading.Event()
                    threading.Thread(target=_refresh_forever, args=(weakref.ref(self), prefix, first), daemon=True,
                                     name=f"redis_rl runtime limits {prefix!r}").start()
        return first

    def load(self, *policies: Policy) -> None:
        """Reads the policies' hashes now and keeps them refreshed (at
        start-up: decisions then never wait for a first read)."""
        for p in policies:
            self._started(p.prefix).wait()

    def for_policy(self, policy: Policy, overrides: Mapping[str, int] | None) -> Mapping[str, int] | None:
        """The overrides for a decision; the first for a prefix waits a little for the first read."""
        first = self._started(policy.prefix)
        if not first.is_set():
            first.wait(FIRST_READ_WAIT)
        return self.merged(policy, overrides)

    def set(self, policy: Policy, limits: Mapping[str, int]) -> None:
        """Sets limits of ``policy`` on every instance (within a refresh), counts kept."""
        self.redis.hset(hash_key(policy.prefix), mapping=dict(zip(*[iter(self.checked(policy, limits))] * 2)))
        self._read(policy.prefix)

    def get(self, policy: Policy) -> dict[str, int]:
        """Every limit's q in force, read from Redis now (an admin endpoint's answer)."""
        return self.effective(policy, self.redis.hgetall(hash_key(policy.prefix)))

    def close(self) -> None:
        """Stops the background refreshes."""
        self._closed.set()


def _refresh_forever(ref: "weakref.ref[RuntimeLimits]", prefix: str, first: threading.Event) -> None:
    # A weak reference: the thread ends with its limiter (or on close()).
    store = ref()
    if store is None:
        return
    store._read(prefix)
    first.set()
    closed, interval = store._closed, store.refresh
    del store
    while not closed.wait(interval):
        store = ref()
        if store is None:
            return
        store._read(prefix)
        del store


async def _hgetall(client: Any, key: str) -> Any:
    """HGETALL ``key``; under an asyncio Cluster straight to its primary
    (module ``redis_rl.cluster_nodes``: redis-py's Cluster path answers a
    refused connection by disconnecting every node, and its slot-table
    reload failed while the primary it asks was down)."""
    if not isinstance(client, AsyncRedisCluster):
        return await client.hgetall(key)
    await slot_table(client)
    node = client.get_node_from_key(key)
    try:
        return await node_command(node, ("HGETALL", key))
    except (redis.exceptions.MovedError, redis.exceptions.AskError):
        return await client.hgetall(key)


class AsyncRuntimeLimits(_Store):
    """The override store of an ``AsyncRateLimiter``: a task per prefix (on
    the loop of the first decision) re-reads the hash every ``refresh``."""

    def __init__(self, client: Any, *, refresh: float = REFRESH) -> None:
        super().__init__(refresh)
        self.redis = client
        self._tasks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[None], asyncio.Event]] = {}

    async def _read(self, prefix: str) -> None:
        try:
            self.apply(prefix, await _hgetall(self.redis, hash_key(prefix)))
        except Exception as e:  # Redis down: the last values stay
            log.debug("redis_rl: runtime limits of %r not refreshed: %s", prefix, e)

    async def _forever(self, prefix: str, first: asyncio.Event) -> None:
        try:
            await self._read(prefix)
        finally:
            first.set()
        while True:
            await asyncio.sleep(self.refresh)
            await self._read(prefix)

    def _started(self, prefix: str) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        running = self._tasks.get(prefix)
        if running is None or running[0] is not loop or running[1].done():
            first = asyncio.Event()
            task = loop.create_task(self._forever(prefix, first))
            running = self._tasks[prefix] = (loop, task, first)
        return running[2]

    async def load(self, *policies: Policy) -> None:
        """Reads the policies' hashes now and keeps them refreshed (at
        start-up: decisions then never wait for a first read)."""
        for p in policies:
            await self._started(p.prefix).wait()

    async def for_policy(self, policy: Policy, overrides: Mapping[str, int] | None) -> Mapping[str, int] | None:
        """The overrides for a decision; the first for a prefix waits a little for the first read."""
        first = self._started(policy.prefix)
        if not first.is_set():
            try:
                await asyncio.wait_for(first.wait(), FIRST_READ_WAIT)
            except asyncio.TimeoutError:
                pass
        return self.merged(policy, overrides)

    async def set(self, policy: Policy, limits: Mapping[str, int]) -> None:
        """Sets limits of ``policy`` on every instance (within a refresh), counts kept."""
        await self.redis.hset(hash_key(policy.prefix), mapping=dict(zip(*[iter(self.checked(policy, limits))] * 2)))
        await self._read(policy.prefix)

    async def get(self, policy: Policy) -> dict[str, int]:
        """Every limit's q in force, read from Redis now (an admin endpoint's answer)."""
        return self.effective(policy, await _hgetall(self.redis, hash_key(policy.prefix)))

    def close(self) -> None:
        """Stops the background refreshes."""
        for _, task, _ in self._tasks.values():
            task.cancel()
        self._tasks.clear()
