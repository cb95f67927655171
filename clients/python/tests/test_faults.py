"""CLIENTS.md §3-§4 against real servers broken on purpose: every way Redis
is unavailable decided by the Redis-down mode (never an exception), a late
admission given back whole, a circuit per node that one overrun or the app's
own stall does not open, ``used(n)``'s rules and lease renewal."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import timedelta

import pytest
import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from redis_rl import (AsyncPermit, AsyncRateLimiter, Permit, Policy, RateLimiter, RedisUnavailableError, concurrency,
                      quota, sliding_window, token_bucket)
from redis_rl.guard import AsyncGuard, Guard, check_socket_timeout
from redis_rl.scope import PermitClosedError
from servers import Cluster, Server, free_port

WINDOW = [sliding_window("w", 5, timedelta(seconds=60))]


def _full(budget_ms: int = 300) -> Policy:
    """Every kind that RL.ALL ... REFUND gives back: window, bucket, quota (metered), lease."""
    return Policy("full", [sliding_window("short", 2, timedelta(seconds=10)),
                           token_bucket("rate", 60, timedelta(minutes=1), burst=10),
                           quota("tokens", "UTC", "day", 1000, metered=True),
                           concurrency("inflight", 2, timedelta(seconds=60))],
                  budget=timedelta(milliseconds=budget_ms))


def _untouched(raw: redis.Redis, key: str) -> bool:
    """Every limit of ``_full`` for ``key`` as if no request had come."""
    base = f"full:{{{key}}}:"
    return [raw.execute_command("RL.PEEK", base + "short", "*", 2, 10000, "COST", 0)[3],
            raw.execute_command("RL.THROTTLEPEEK", base + "rate", "*", 10, 60, 60000, "COST", 0)[3],
            raw.execute_command("RL.QUOTAPEEK", base + "tokens", "*", "UTC", "DAY", 1000, "COST", 0)[3],
            raw.execute_command("RL.LEASEPEEK", base + "inflight", "*", 2, "COST", 0)[3]] == [2, 10, 1000, 2]


# --- every unavailable error: the Redis-down mode, never an exception ---

@pytest.mark.anyio
async def test_a_cluster_that_cannot_be_reached_is_unavailable_not_an_error():
    """redis-py raises RedisClusterException ("Redis Cluster cannot be
    connected") from initialize() when every seed refuses: it failed the
    FastAPI dependency with a 500 and a dropped connection."""
    from fastapi import Depends, FastAPI
    from fastapi.testclient import TestClient

    from redis_rl.adapters.starlette import RateLimits

    dead = AsyncRedisCluster(host="127.0.0.1", port=free_port())
    guard = AsyncGuard(AsyncRateLimiter(dead))
    t0 = time.monotonic()
    assert await guard.decide(Policy("c", WINDOW), "k") is None
    assert time.monotonic() - t0 < 1.0
    assert guard.health()["status"] == "DOWN"

    limits = RateLimits(AsyncRateLimiter(AsyncRedisCluster(host="127.0.0.1", port=free_port())))
    app = FastAPI()
    limits.install(app)

    @app.get("/x", dependencies=[Depends(limits.depends(Policy("c", WINDOW), key=lambda r: "k"))])
    async def x():
        return {}

    with TestClient(app) as c:
        for _ in range(3):
            t0 = time.monotonic()
            r = c.get("/x")
            assert r.status_code == 503 and time.monotonic() - t0 < 1.0, r.text


class _Replies:
    """A stand-in client whose RL commands answer the error ``error``."""

    def __init__(self, error: Exception):
        self.error = error
        self.calls = 0

    def execute_command(self, *args, **kw):
        self.calls += 1
        raise self.error

    def ping(self):
        return True


@pytest.mark.parametrize("error", [
    redis.exceptions.ClusterDownError("The cluster is down"),
    redis.exceptions.TryAgainError("Multiple keys request during rehashing of slot"),
    redis.exceptions.MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
    redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
    redis.exceptions.ResponseError("CLUSTERDOWN The cluster is down"),  # a standalone client keeps the code
    redis.exceptions.ResponseError("TRYAGAIN Multiple keys request during rehashing of slot"),
    redis.exceptions.ResponseError("MASTERDOWN Link with MASTER is down"),
    redis.exceptions.ResponseError("LOADING Redis is loading the dataset in memory"),
])
def test_every_cannot_decide_now_reply_is_unavailable(error):
    """These were wrapped as RateLimitError before the guard saw them: a 500."""
    rl = RateLimiter.__new__(RateLimiter)
    from redis_rl.client import _Limiter
    _Limiter.__init__(rl, _Replies(error), check_module=False)
    if not isinstance(error, redis.exceptions.BusyLoadingError):  # a ConnectionError: never wrapped
        with pytest.raises(RedisUnavailableError):
            rl.decide(Policy("u", WINDOW), "k")
    guard = Guard(rl)
    assert guard.decide(Policy("u", WINDOW), "k") is None
    assert guard.open and guard.health()["status"] == "DOWN"


def test_the_module_gone_at_run_time_is_decided_by_the_down_mode_and_health_says_so(caplog):
    """A failover to a server without the module: 'unknown command' after
    the start-up check passed. Decided by the Redis-down mode (503 or open,
    not a 500); health() is DOWN naming the module; logged at error level."""
    with Server(args=["--enable-module-command", "yes"]) as s:
        rl = RateLimiter(s.client())
        rl.ensure_module()
        guard = Guard(rl)
        p = Policy("gone", WINDOW)
        assert guard.decide(p, "k") is not None
        assert guard.health() == {"status": "UP", "backend": "module"}
        name = s.client().module_list()[0][b"name"]
        s.client().execute_command("MODULE", "UNLOAD", name)
        assert guard.decide(p, "k") is None
        health = guard.health()
        assert health["status"] == "DOWN" and "redis-ratelimit module" in health["module"], health
        assert any(r.levelname == "ERROR" and "module" in r.getMessage() for r in caplog.records)


# --- late replies: given back whole ---

@pytest.mark.anyio
async def test_a_late_admission_is_given_back_whole():
    """Redis paused past the budget: the request is answered None (503),
    yet Redis runs the RL.ALL when it resumes. Every counter of the
    request's limits (window, bucket, quota, lease) must be as if it never
    came: the window kept the same phone refused for 57 s before."""
    with Server() as s:
        raw = s.client()
        client = redis.asyncio.Redis(port=s.port)
        # No runtime limits: their background read would hold the pooled
        # connection through the pause, and RL.ALL would wait for a new one.
        guard = AsyncGuard(AsyncRateLimiter(client, runtime_limits=False), probe_interval=0.05)
        await guard.limiter.ensure_module()
        s.proc.send_signal(signal.SIGSTOP)
        try:
            assert await guard.decide(_full(), "k", estimate=100) is None
            await asyncio.sleep(0.4)
        finally:
            s.proc.send_signal(signal.SIGCONT)
        assert raw.info("commandstats")["cmdstat_rl.all"]["calls"] == 1  # it did run
        deadline = time.monotonic() + 5
        while not await asyncio.to_thread(_untouched, raw, "k"):
            assert time.monotonic() < deadline, "a late admission left counters charged"
            await asyncio.sleep(0.05)
        assert raw.info("commandstats")["cmdstat_rl.all"]["calls"] == 2  # one RL.ALL ... REFUND
        await client.aclose()


def test_a_socket_timeout_that_drops_late_replies_is_refused_at_start():
    from redis_rl.adapters.starlette import RateLimits
    with pytest.raises(ValueError, match="socket_timeout"):
        RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1, socket_timeout=2.0), check_module=False))
    with pytest.raises(ValueError, match="socket_timeout"):
        check_socket_timeout(AsyncRedisCluster(host="127.0.0.1", port=1, socket_timeout=4), 0.5)
    check_socket_timeout(redis.asyncio.Redis(port=1), 0.5)  # none: the budget bounds each decision
    check_socket_timeout(redis.asyncio.Redis(port=1, socket_timeout=10.5), 0.5)


# --- the circuit: per node, opened by failures, not by one overrun or a stall ---

@pytest.mark.anyio
async def test_an_app_stall_is_not_an_outage():
    """The app's own event loop stalls 0.7 s (Redis healthy, replies already
    in the sockets): the 20 decisions in flight are decided by Redis, and no
    circuit opens (it gave 20 in-flight 503s and ~45 more)."""
    with Server() as s:
        client = redis.asyncio.Redis(port=s.port)
        guard = AsyncGuard(AsyncRateLimiter(client))
        await guard.limiter.ensure_module()
        p = Policy("stall", [sliding_window("w", 1000, timedelta(seconds=60))])
        await asyncio.gather(*(guard.decide(p, f"warm{i}") for i in range(20)))  # 20 pooled connections
        tasks = [asyncio.ensure_future(guard.decide(p, f"k{i}")) for i in range(20)]
        for _ in range(5):
            await asyncio.sleep(0)  # written to their sockets (the replies land during the stall)
        time.sleep(0.7)  # the app's own stall
        results = await asyncio.gather(*tasks)
        assert all(d is not None and d.allowed for d in results), results
        assert not guard.open
        assert (await guard.decide(p, "after")) is not None
        await client.aclose()


@pytest.mark.anyio
async def test_one_overrun_does_not_open_the_circuit():
    with Server() as s:
        client = redis.asyncio.Redis(port=s.port)
        guard = AsyncGuard(AsyncRateLimiter(client))
        await guard.limiter.ensure_module()
        p = Policy("once", WINDOW, budget=timedelta(milliseconds=200))
        s.proc.send_signal(signal.SIGSTOP)
        try:
            assert await guard.decide(p, "k") is None
        finally:
            s.proc.send_signal(signal.SIGCONT)
        assert not guard.open
        assert (await guard.decide(p, "k2")) is not None  # straight back to Redis
        await client.aclose()


@pytest.mark.anyio
async def test_one_primary_of_three_down_leaves_the_others_decided_by_redis():
    """Only the keys of the dead primary's slots get the Redis-down answer;
    the rest are decided by Redis within the budget (it was ~100% 503s:
    redis-py's asyncio Cluster disconnects every node on one refused
    connection, and the probe PINGed the whole cluster)."""
    with Cluster(3, args=["--cluster-require-full-coverage", "no"]) as cl:
        client = AsyncRedisCluster(host="127.0.0.1", port=cl.nodes[0].port)
        guard = AsyncGuard(AsyncRateLimiter(client), probe_interval=0.1)
        p = Policy("part", [sliding_window("w", 1000, timedelta(seconds=60))])
        await guard.limiter.ensure_module()
        client2 = AsyncRedisCluster(host="127.0.0.1", port=cl.nodes[0].port)
        guard2 = AsyncGuard(AsyncRateLimiter(client2), probe_interval=5)  # its circuits closed until below
        await guard2.limiter.ensure_module()
        dead = cl.nodes[2]
        dead_name = f"127.0.0.1:{dead.port}"
        keys = [f"k{i}" for i in range(60)]
        on_dead = {k for k in keys if guard.limiter.node_name("{" + k + "}") == dead_name}
        assert 0 < len(on_dead) < len(keys)
        dead.stop()
        for _ in range(3):
            t0 = time.monotonic()
            results = await asyncio.gather(*(guard.decide(p, k) for k in keys))
            assert time.monotonic() - t0 < 1.0
            for k, d in zip(keys, results):
                assert (d is None) == (k in on_dead), (k, d)
        assert guard.health()["open"] == [dead_name]
        await client.aclose()

        # One decision over a dead and a live primary cannot be made, but it
        # trips only the dead one's circuit: the live primary's keys are still
        # decided by Redis (it opened both: the fault table's python Cluster
        # row read 503 for a live primary's key).
        live = [k for k in keys if k not in on_dead]
        other = Policy("part2", [sliding_window("w", 1000, timedelta(seconds=60))])
        assert await guard2.decide_all([p.bind(sorted(on_dead)[0]), other.bind(live[0])]) is None
        assert guard2.health()["open"] == [dead_name]
        assert all(d is not None for d in await asyncio.gather(*(guard2.decide(p, k) for k in live)))
        await client2.aclose()


@pytest.mark.anyio
async def test_a_primary_restarted_while_idle_decides_its_keys_by_redis_at_the_first_call():
    """A primary killed and started again (same port, its nodes.conf) while
    the app is idle: every socket pooled to it is dead. The first decision for
    one of its keys is decided by Redis (CLIENTS.md §3: Redis again within 2 s
    of a node answering), on both Cluster clients: a broken connection is sent
    once more on a fresh one (it was the Redis-down answer and an open circuit
    until the next probe: asyncio ClusterNode handed out its stale sockets)."""
    with Cluster(3) as cl:
        node = cl.nodes[1]
        name = f"127.0.0.1:{node.port}"
        p = Policy("idle", [sliding_window("w", 1000, timedelta(seconds=60))])
        aguard = AsyncGuard(AsyncRateLimiter(AsyncRedisCluster(host="127.0.0.1", port=cl.nodes[0].port)),
                            probe_interval=5)
        sguard = Guard(RateLimiter(RedisCluster(host="127.0.0.1", port=cl.nodes[0].port)), probe_interval=5)
        await aguard.limiter.ensure_module()
        keys = [k for k in (f"k{i}" for i in range(100)) if aguard.limiter.node_name("{" + k + "}") == name][:10]
        assert keys
        # Several pooled connections to that primary (concurrent calls).
        assert all(await asyncio.gather(*(aguard.decide(p, k) for k in keys)))
        assert len(aguard.limiter.redis.get_node(node_name=name)._free) > 1
        assert all(await asyncio.to_thread(lambda: [sguard.decide(p, k) for k in keys]))
        node.restart()
        cl.wait_ok()
        first = {"async": await aguard.decide(p, keys[0]), "sync": sguard.decide(p, keys[0])}
        assert {k: d is not None for k, d in first.items()} == {"async": True, "sync": True}
        assert first["async"].allowed and first["sync"].allowed
        assert aguard.health()["status"] == sguard.health()["status"] == "UP"  # no circuit open
        assert all(await asyncio.gather(*(aguard.decide(p, k) for k in keys)))
        await aguard.limiter.redis.aclose()
        sguard.limiter.redis.close()


@pytest.mark.anyio
async def test_a_live_primarys_keys_are_decided_by_redis_within_budget_right_after_traffic_hit_a_dead_one():
    """One primary of three killed: the one redis-py's slot-table reload
    asks its COMMAND table (its default node, slot 0's owner). Traffic then
    hits it -- the limiter's first use (its module check) and redis-py's own
    Cluster path (a health check, an admin call) -- and redis-py marks its
    table for a reload. Keys on the live primaries are still decided by
    Redis within the budget, leases released at close, only the dead
    primary's circuit open, on both Cluster clients (the fault table's python
    row: the asyncio client reloaded the table on the request path, the
    reload failed on the dead node every time, and 'llm' on a live primary
    answered 503 with that primary's circuit open)."""
    with Cluster(3, args=["--cluster-require-full-coverage", "no"]) as cl:
        dead = cl.slot_owner(0)
        live = next(n for n in cl.nodes if n is not dead)
        dead_name = f"127.0.0.1:{dead.port}"
        p = Policy("livekeys", [sliding_window("w", 1000, timedelta(seconds=60)),
                                concurrency("inflight", 1, timedelta(seconds=60))],
                   budget=timedelta(milliseconds=500))
        aclient = AsyncRedisCluster(host="127.0.0.1", port=live.port)
        await aclient.initialize()  # the app started while every primary answered; no decision yet
        aguard = AsyncGuard(AsyncRateLimiter(aclient), probe_interval=0.1)
        sclient = RedisCluster(host="127.0.0.1", port=live.port, socket_timeout=0.5, socket_connect_timeout=0.5)
        sguard = Guard(RateLimiter(sclient), probe_interval=0.1)
        keys = [f"k{i}" for i in range(60)]
        on_dead = [k for k in keys if aguard.limiter.node_name("{" + k + "}") == dead_name]
        on_live = [k for k in keys if k not in on_dead][:8]
        assert on_dead and on_live
        dead.stop()

        def leases_held(key: str) -> int:
            c = RedisCluster(host="127.0.0.1", port=live.port, socket_timeout=10)  # cl.client() seeds node 0
            try:
                return 1 - c.execute_command("RL.LEASEPEEK", f"livekeys:{{{key}}}:inflight", "*", 1, "COST", 0)[3]
            finally:
                c.close()

        # asyncio: the first use meets the dead primary, then redis-py's own path does.
        assert await aguard.decide(p, on_dead[0]) is None
        with pytest.raises(redis.exceptions.ConnectionError):
            await aclient.execute_command("PING", target_nodes=aclient.get_node(node_name=dead_name))
        for k in on_live:
            t0 = time.monotonic()
            d = await aguard.decide(p, k)
            took = time.monotonic() - t0
            assert d is not None and d.allowed, (k, d, aguard.health())
            assert took < 0.5, (k, took)
            await aguard.close(AsyncPermit(aguard.limiter, d), 0.5)
            assert leases_held(k) == 0, k
        assert aguard.health()["open"] == [dead_name]
        # The probe's refused PINGs keep no connection object each (redis-py's ClusterNode leaked one per
        # refused call out of its pool: 8 a second from a probe at 250 ms, for as long as the node is down).
        pooled = len(aclient.get_node(node_name=dead_name)._connections)
        for _ in range(50):
            with pytest.raises(redis.exceptions.ConnectionError):
                await aguard.limiter.ping_node(dead_name)
        assert len(aclient.get_node(node_name=dead_name)._connections) <= pooled + 1

        # sync: the same.
        assert sguard.decide(p, on_dead[0]) is None
        with pytest.raises(redis.exceptions.ConnectionError):
            sclient.execute_command("PING", target_nodes=sclient.get_node(node_name=dead_name))
        for k in on_live:
            t0 = time.monotonic()
            d = sguard.decide(p, k)
            took = time.monotonic() - t0
            assert d is not None and d.allowed, (k, d, sguard.health())
            assert took < 0.5, (k, took)
            sguard.close(Permit(sguard.limiter, d))
            assert leases_held(k) == 0, k
        assert sguard.health()["open"] == [dead_name]
        await aclient.aclose()
        sclient.close()


@pytest.mark.anyio
async def test_after_a_failover_the_dead_primarys_keys_are_decided_by_its_promoted_replica():
    """The slot table is no longer reloaded on a call's time (above); the
    circuit's probe learns a failover instead: once a live primary no
    longer names the dead one, the table is loaded again and the dead
    primary's keys go to the promoted replica -- decided by Redis within a
    few probe rounds, not the Redis-down mode until the app restarts."""
    with Cluster(3, args=["--cluster-node-timeout", "1000"]) as cl:
        dead = cl.nodes[1]
        replica = cl.add_replica(dead)
        dead_name = f"127.0.0.1:{dead.port}"
        p = Policy("failover", [sliding_window("w", 1000, timedelta(seconds=60))])
        aguard = AsyncGuard(AsyncRateLimiter(AsyncRedisCluster(host="127.0.0.1", port=cl.nodes[0].port)),
                            probe_interval=0.1)
        sguard = Guard(RateLimiter(RedisCluster(host="127.0.0.1", port=cl.nodes[0].port, socket_timeout=0.5,
                                                socket_connect_timeout=0.5)), probe_interval=0.1)
        await aguard.limiter.ensure_module()
        sguard.limiter.ensure_module()
        key = next(k for k in (f"k{i}" for i in range(100)) if aguard.limiter.node_name("{" + k + "}") == dead_name)
        dead.stop()
        assert await aguard.decide(p, key) is None and sguard.decide(p, key) is None  # circuits open
        deadline = time.monotonic() + 20
        got = {"async": None, "sync": None}
        while time.monotonic() < deadline and None in got.values():
            await asyncio.sleep(0.2)
            got["async"] = got["async"] or await aguard.decide(p, key)
            got["sync"] = got["sync"] or await asyncio.to_thread(sguard.decide, p, key)
        assert got["async"] is not None and got["sync"] is not None, got
        new = f"127.0.0.1:{replica.port}"
        assert aguard.limiter.node_name("{" + key + "}") == sguard.limiter.node_name("{" + key + "}") == new
        while time.monotonic() < deadline and "DOWN" in (aguard.health()["status"], sguard.health()["status"]):
            await asyncio.sleep(0.1)  # the dead primary's circuit: closed at its probe's next round
        assert aguard.health()["status"] == sguard.health()["status"] == "UP"
        await aguard.limiter.redis.aclose()
        sguard.limiter.redis.close()


# --- used(n) and renewal ---

def test_used_rules(server):
    rl = RateLimiter(server.client())
    p = Policy("used", [quota("tokens", "UTC", "day", 1000, metered=True)])

    def left(key):
        return server.client().execute_command("RL.QUOTAPEEK", f"used:{{{key}}}:tokens", "*", "UTC", "DAY", 1000,
                                               "COST", 0)[3]

    for bad in (10**20, 2**53, -1, 1.5, float("nan"), "10", True):
        permit = Permit(rl, rl.decide(p, f"bad{bad!r}", estimate=100))
        with pytest.raises(ValueError):
            permit.used(bad)
        permit.close()  # closes normally: the estimate stands
        assert left(f"bad{bad!r}") == 900
    permit = Permit(rl, rl.decide(p, "big", estimate=100))
    permit.used(5000)  # above q: counts as q
    permit.close()
    assert left("big") == 0
    with pytest.raises(PermitClosedError):
        permit.used(1)
    permit = Permit(rl, rl.decide(p, "max", estimate=100))
    permit.used(2**53 - 1)
    permit.close()
    assert left("max") == 0


@pytest.mark.anyio
async def test_a_lease_held_past_a_third_of_its_ttl_is_renewed(server):
    client = redis.asyncio.Redis(port=server.port)
    rl = AsyncRateLimiter(client)
    p = Policy("renew", [concurrency("inflight", 1, timedelta(milliseconds=600))])
    raw = server.client()

    def held(key):
        return 1 - raw.execute_command("RL.LEASEPEEK", f"renew:{{{key}}}:inflight", "*", 1, "COST", 0)[3]

    kept = AsyncPermit(rl, await rl.decide(p, "kept"))
    lapsed = AsyncPermit(rl, await rl.decide(p, "lapsed"), renew=False)
    await asyncio.sleep(1.5)
    assert held("kept") == 1 and held("lapsed") == 0
    await kept.close()
    await lapsed.close()
    assert held("kept") == 0
    await client.aclose()


def test_a_non_ascii_limit_name_is_refused_at_definition():
    with pytest.raises(ValueError, match="limit name"):
        sliding_window("dé", 1, timedelta(seconds=1))
    with pytest.raises(ValueError, match="limit name"):
        sliding_window("a\tb", 1, timedelta(seconds=1))


def test_the_first_sync_cluster_use_checks_the_module_once(cluster):
    """16 threads on a fresh limiter: one COMMAND INFO per primary, not 16."""
    from concurrent.futures import ThreadPoolExecutor

    client = RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    before = [n.client().info("commandstats").get("cmdstat_command|info", {}).get("calls", 0) for n in cluster.nodes]
    rl = RateLimiter(client)
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda i: rl.decide(Policy("once16", WINDOW), f"k{i}"), range(16)))
    after = [n.client().info("commandstats").get("cmdstat_command|info", {}).get("calls", 0) for n in cluster.nodes]
    assert [a - b for a, b in zip(after, before)] == [1, 1, 1]
    client.close()


def test_the_module_gone_under_backend_auto_switches_to_the_library_and_health_says_functions():
    """The same failover with ``backend="auto"``: decided by the Functions
    library (loaded on the spot), not by the Redis-down mode; health() is UP
    naming the backend that decides."""
    with Server(args=["--enable-module-command", "yes"]) as s:
        rl = RateLimiter(s.client(), backend="auto")
        rl.ensure_module()
        guard = Guard(rl)
        p = Policy("gone-auto", WINDOW)
        assert guard.decide(p, "k") is not None
        name = s.client().module_list()[0][b"name"]
        s.client().execute_command("MODULE", "UNLOAD", name)
        assert guard.decide(p, "k") is not None
        assert guard.health() == {"status": "UP", "backend": "functions"}
