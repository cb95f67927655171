"""Policies decided in one call and scopes that release the lease and settle
the estimate on return, exception and cancellation (sync, asyncio, Cluster)."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from redis_rl import (AsyncRateLimiter, Policy, RateLimiter, RateLimitExceeded, concurrency, lockout, quota,
                      sliding_window, token_bucket)

from conftest import details_supported

S = timedelta(seconds=1)


def llm_policy(prefix: str) -> Policy:
    return Policy("llm", [
        token_bucket("rate", 60, timedelta(minutes=1), burst=10),
        concurrency("inflight", 2, timedelta(seconds=60)),
        quota("tokens", None, "day", 100_000, metered=True),
        sliding_window("global", 1000, timedelta(minutes=1), shared=True),
    ], prefix=prefix, tag="llm")


def day_used(raw, prefix, key, zone="UTC") -> int:
    d = raw.execute_command("RL.QUOTAPEEK", f"{prefix}llm:{{llm}}:{key}:tokens", "*", zone, "DAY", 100_000,
                            "COST", 0)
    return 100_000 - d[3]


def live_leases(raw, prefix, key) -> int:
    return raw.execute_command("RL.LEASEPEEK", f"{prefix}llm:{{llm}}:{key}:inflight", "*", 2, "COST", 0)[3] * -1 + 2


def test_plan_is_one_call_with_hash_tagged_keys():
    p = llm_policy("app:")
    plan = p.plan("k1", estimate=500, zone="Asia/Shanghai")
    assert plan.call.args[:6] == ("RL.ALL", 4, "app:llm:{llm}:k1:rate", "app:llm:{llm}:k1:inflight",
                                  "app:llm:{llm}:k1:tokens", "app:llm:{llm}:global")
    args = plan.call.args
    assert args[6] == "*" and args[7:12] == ("THROTTLE", 1, 10, 60, 60_000)
    assert ("QUOTA", 3, "Asia/Shanghai", "DAY", 100_000, "COST", 500) == args[18:25]
    single = Policy("api", [sliding_window("default", 10, 60 * S)]).plan("1.2.3.4")
    assert single.call.args == ("RL.CHECK", "api:{1.2.3.4}:default", "*", 10, 60_000)
    grouped = Policy("sms", [sliding_window("short", 2, 10 * S), sliding_window("long", 5, timedelta(hours=1)),
                             sliding_window("duplicate", 1, 5 * S, subkey=True, problem="duplicate")])
    g = grouped.plan("123", subkeys={"duplicate": "abc"}, details=True)
    assert g.call.args == ("RL.ALL", 2, "sms:{123}:short", "sms:{123}:duplicate:abc", "*",
                           "CHECK", 1, 2, 10_000, 5, 3_600_000, "CHECK", 2, 1, 5_000, "DETAILS")


def test_policy_construction_refuses_bad_shapes():
    with pytest.raises(ValueError, match="tag"):
        Policy("p", [sliding_window("a", 1, S), sliding_window("g", 1, S, shared=True)])
    with pytest.raises(ValueError, match="alone"):
        Policy("p", [lockout("l", 5, S, S), sliding_window("a", 1, S)])
    with pytest.raises(ValueError, match="share a name"):
        Policy("p", [sliding_window("a", 1, S), quota("a", "UTC", "day", 1)])
    with pytest.raises(ValueError, match="braces"):
        Policy("p", [sliding_window("a", 1, S)], prefix="x{y}")
    with pytest.raises(ValueError, match="same period"):
        Policy("p", [token_bucket("a", 1, S), token_bucket("b", 2, S)])
    with pytest.raises(ValueError, match="zone"):
        Policy("p", [quota("a", None, "day", 1)]).plan("k")
    with pytest.raises(ValueError, match="invalid zone"):
        Policy("p", [quota("a", None, "day", 1)]).plan("k", zone="Not/AZone")
    with pytest.raises(ValueError, match="subkeys"):
        Policy("p", [sliding_window("d", 1, S, subkey=True)]).plan("k")
    with pytest.raises(ValueError, match="overrides"):
        Policy("p", [sliding_window("d", 1, S)]).plan("k", overrides={"nope": 1})


def test_scope_settles_to_usage_and_releases_on_return_and_exception(server, raw, key):
    rl = RateLimiter(server.client())
    p = llm_policy(key + ":")
    with rl.acquire(p, "u1", estimate=1000, zone="UTC") as permit:
        assert live_leases(raw, key + ":", "u1") == 1
        assert day_used(raw, key + ":", "u1") == 1000  # the estimate, up front
        permit.used(300)
    assert live_leases(raw, key + ":", "u1") == 0
    assert day_used(raw, key + ":", "u1") == 300
    for _ in range(3):  # the README recipe's leak: a model call that raises
        with pytest.raises(RuntimeError):
            with rl.acquire(p, "u1", estimate=2000, zone="UTC"):
                raise RuntimeError("model failed")
    assert live_leases(raw, key + ":", "u1") == 0
    assert day_used(raw, key + ":", "u1") == 300
    with rl.acquire(p, "u1", estimate=100, zone="UTC") as permit:
        permit.used(150)  # more than estimated: debited
    assert day_used(raw, key + ":", "u1") == 450


def test_inflight_refusal_answers_one_second_and_changes_nothing(server, raw, key):
    rl = RateLimiter(server.client())
    p = llm_policy(key + ":")
    with rl.acquire(p, "u2", estimate=10, zone="UTC"), rl.acquire(p, "u2", estimate=10, zone="UTC"):
        with pytest.raises(RateLimitExceeded) as e:
            with rl.acquire(p, "u2", estimate=10, zone="UTC"):
                pytest.fail("admitted a third")
        d = e.value.decision
        assert d.binding == "inflight" and d.retry_after == S and d.problem == "rate-limited"
        assert d.state.retry_after > 50 * S  # the lease TTL: not what a client should wait
        assert day_used(raw, key + ":", "u2") == 20  # the refused estimate was not taken
    assert live_leases(raw, key + ":", "u2") == 0 and day_used(raw, key + ":", "u2") == 0


@pytest.mark.anyio
async def test_async_scope_settles_on_cancellation(server, raw, key):
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    rl = AsyncRateLimiter(client)
    p = llm_policy(key + ":")
    entered = asyncio.Event()

    async def job():
        async with rl.acquire(p, "u3", estimate=5000, zone="UTC") as permit:
            entered.set()
            await asyncio.sleep(30)
            permit.used(5000)

    task = asyncio.create_task(job())
    await entered.wait()
    assert live_leases(raw, key + ":", "u3") == 1 and day_used(raw, key + ":", "u3") == 5000
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert live_leases(raw, key + ":", "u3") == 0
    assert day_used(raw, key + ":", "u3") == 0
    async with rl.acquire(p, "u3", estimate=50, zone="UTC") as permit:
        permit.used(7)
    with pytest.raises(ValueError):
        async with rl.acquire(p, "u3", estimate=50, zone="UTC") as permit:
            raise ValueError("boom")
    assert day_used(raw, key + ":", "u3") == 7 and live_leases(raw, key + ":", "u3") == 0
    await client.aclose()


def test_fifty_threads_on_one_policy_admit_exactly_the_limit(server, key):
    rl = RateLimiter(server.client(max_connections=60))
    rl.ensure_module()
    p = Policy("sms", [sliding_window("short", 7, 10 * S), sliding_window("long", 30, timedelta(hours=1)),
                       token_bucket("rate", 100, S, burst=40)], prefix=key)
    results, barrier = [], threading.Barrier(50)

    def call():
        barrier.wait()
        results.append(rl.decide(p, "phone").allowed)

    threads = [threading.Thread(target=call) for _ in range(50)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert results.count(True) == 7


def test_lockout_policy(server, key):
    rl = RateLimiter(server.client())
    p = Policy("login", [lockout("login", 5, 10 * S, 30 * S)], prefix=key)
    got = [rl.decide(p, "1.2.3.4") for _ in range(7)]
    assert [d.allowed for d in got] == [True] * 5 + [False] * 2
    assert [d.state.remaining for d in got[:5]] == [4, 3, 2, 1, 0]
    assert got[5].problem == "locked" and got[5].retry_after == 30 * S
    assert got[6].state.remaining == 0 and 29 * S < got[6].retry_after <= 30 * S


def test_overrides_change_limits_without_reset(server, key):
    rl = RateLimiter(server.client())
    p = Policy("ocr", [quota("day", "Asia/Shanghai", "day", 20), quota("hour", "Asia/Shanghai", "hour", 5)],
               prefix=key)
    assert all(rl.decide(p, "alice").allowed for _ in range(3))
    low = rl.decide(p, "alice", overrides={"hour": 2})
    assert low.limited and low.binding == "hour"
    off = rl.decide(p, "alice", overrides={"day": 0})
    assert off.limited and off.binding == "day" and off.retry_after is None and off.state.waiting_cannot_help
    assert rl.decide(p, "alice").allowed  # back to 5: the 3 counted are still there
    assert rl.decide(p, "alice").allowed and rl.decide(p, "alice").limited


def test_details_give_every_limit_state(server, raw, key):
    # This tree's engine has DETAILS: a probe that fails is a failure, not a skip.
    assert details_supported(raw), "the module at $RL_MODULE answers no RL.ALL DETAILS"
    rl = RateLimiter(server.client())
    p = Policy("sms", [sliding_window("short", 2, 10 * S), sliding_window("long", 5, timedelta(hours=1)),
                       sliding_window("duplicate", 1, 5 * S, subkey=True, problem="duplicate")], prefix=key)
    a = rl.decide(p, "123", subkeys={"duplicate": "x"})
    assert set(a.states) == {"short", "long", "duplicate"}
    assert (a.states["short"].remaining, a.states["long"].remaining, a.states["duplicate"].remaining) == (1, 4, 0)
    b = rl.decide(p, "123", subkeys={"duplicate": "x"})
    assert b.limited and b.problem == "duplicate" and b.states["short"].allowed
    c = rl.decide(p, "123", subkeys={"duplicate": "y"})
    assert c.allowed and c.states["short"].remaining == 0
    d = rl.decide(p, "123", subkeys={"duplicate": "y"})
    assert d.limited and d.problem == "duplicate" and d.states["short"].limited


def test_cluster_scopes_zero_moved(cluster):
    rc = cluster.client()
    rl = RateLimiter(rc)
    rl.ensure_module()
    for node in cluster.nodes:
        node.client().config_resetstat()
    p = llm_policy("cl:")
    for i in range(10):
        with rl.acquire(p, f"user{i}", estimate=100, zone="UTC") as permit:
            permit.used(40)
    moved = sum(int(n.client().info("errorstats").get("errorstat_MOVED", {}).get("count", 0)) for n in cluster.nodes)
    assert moved == 0
    owner = cluster.slot_owner(rc.keyslot("llm:{llm}:user3:tokens")).client()
    assert 100_000 - owner.execute_command("RL.QUOTAPEEK", "cl:llm:{llm}:user3:tokens", "*", "UTC", "DAY", 100_000,
                                           "COST", 0)[3] == 40
    rc.close()


@pytest.mark.anyio
async def test_async_cluster_scope(cluster):
    rc = AsyncRedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    rl = AsyncRateLimiter(rc)
    await rl.ensure_module()
    for node in cluster.nodes:
        node.client().config_resetstat()
    p = llm_policy("acl:")
    for i in range(5):
        async with rl.acquire(p, f"user{i}", estimate=100, zone="UTC") as permit:
            permit.used(10)
    moved = sum(int(n.client().info("errorstats").get("errorstat_MOVED", {}).get("count", 0)) for n in cluster.nodes)
    getkeys = sum(int(n.client().info("commandstats").get("cmdstat_command|getkeys", {}).get("calls", 0))
                  for n in cluster.nodes)
    assert (moved, getkeys) == (0, 0)
    await rc.aclose()
