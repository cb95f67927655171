"""Cluster: every typed call, sync and asyncio, reaches its key's primary with
zero MOVED (errorstat_MOVED after CONFIG RESETSTAT on every primary) and no
COMMAND GETKEYS round trip (cmdstat_command|getkeys stays absent)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from redis_rl import AsyncRateLimiter, Clause, RateLimiter

S = timedelta(seconds=1)


def reset_stats(cluster):
    for node in cluster.nodes:
        c = node.client()
        c.config_resetstat()
        c.close()


def redirects_and_getkeys(cluster):
    moved, getkeys, rl_calls = 0, 0, 0
    for node in cluster.nodes:
        c = node.client()
        moved += int(c.info("errorstats").get("errorstat_MOVED", {}).get("count", 0))
        stats = c.info("commandstats")
        getkeys += int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0))
        rl_calls += sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_rl."))
        c.close()
    return moved, getkeys, rl_calls


def workload_sync(rl, prefix):
    n = 0
    for i in range(12):
        k = f"{prefix}:{i}"
        rl.check(f"{k}:c", [(5, 10 * S)]); rl.peek(f"{k}:c", [(5, 10 * S)])
        rl.throttle(f"{k}:t", [(5, 5, S)]); rl.throttle_peek(f"{k}:t", [(5, 5, S)])
        rl.quota(f"{k}:q", "UTC", {"day": 5}); rl.quota_peek(f"{k}:q", "UTC", {"day": 5})
        rl.dayhour(f"{{{k}}}:d", f"{{{k}}}:h", 5, 5, S * 60, S * 60)
        rl.lockcount(f"{{{k}}}:l", f"{{{k}}}:n", S * 10, 3, S * 30)
        rl.lease(f"{k}:l", 2, S * 30, token="t1"); rl.lease_peek(f"{k}:l", 2)
        rl.renew(f"{k}:l", S * 30, ["t1"]); rl.release(f"{k}:l", ["t1"])
        clauses = [Clause.check(f"{{{k}}}:a", [(5, 10 * S)]), Clause.lease(f"{{{k}}}:b", 2, S * 30, token="t2")]
        rl.all(clauses, details=bool(rl.details_supported)); rl.all_peek(clauses)
        n += 14
    return n


def test_sync_cluster_zero_moved_no_getkeys(cluster):
    rc = cluster.client()
    rl = RateLimiter(rc)
    rl.ensure_module()
    reset_stats(cluster)
    sent = workload_sync(rl, "sync")
    moved, getkeys, calls = redirects_and_getkeys(cluster)
    assert (moved, getkeys) == (0, 0)
    assert calls == sent  # one RL call counted per call sent: no retry
    rc.close()


@pytest.mark.anyio
async def test_async_cluster_zero_moved_no_getkeys(cluster):
    rc = AsyncRedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    rl = AsyncRateLimiter(rc)
    await rl.ensure_module()
    reset_stats(cluster)
    sent = 0
    for i in range(12):
        k = f"async:{i}"
        await rl.check(f"{k}:c", [(5, 10 * S)])
        await rl.quota(f"{k}:q", "UTC", {"day": 5})
        await rl.lease(f"{k}:l", 2, S * 30, token="t1")
        await rl.release(f"{k}:l", "t1")
        clauses = [Clause.throttle(f"{{{k}}}:a", [(5, 5, S)]), Clause.lease(f"{{{k}}}:b", 2, S * 30, token="t2")]
        await rl.all(clauses)
        await rl.all_peek(clauses)
        sent += 6
    moved, getkeys, calls = redirects_and_getkeys(cluster)
    assert (moved, getkeys) == (0, 0)
    assert calls == sent
    await rc.aclose()


def test_keys_are_on_their_slot_owner(cluster):
    rc = cluster.client()
    rl = RateLimiter(rc)
    owners = set()
    for i in range(30):
        key = f"owner:{i}"
        rl.check(key, [(1, 10 * S)])
        slot = rc.keyslot(key)
        node = cluster.slot_owner(slot)
        c = node.client()
        assert c.exists(key) == 1
        c.close()
        owners.add(node.port)
    assert len(owners) == 3
    rc.close()


def test_a_key_that_would_empty_the_hash_tag_is_refused_before_any_call(cluster):
    """`{}` is no hash tag: a caller's key starting with '}' ("}x" ->
    "sms:{}x}:short", "sms:{}x}:duplicate:...") would hash each of the
    policy's keys apart, and its RL.ALL would be CROSSSLOT under Cluster
    only. Refused up front (ValueError), as the Node package refuses it."""
    from redis_rl import Policy, sliding_window

    p = Policy("tagless", [sliding_window("short", 2, 10 * S),
                           sliding_window("duplicate", 1, 5 * S, subkey=True)])
    rc = cluster.client()
    rl = RateLimiter(rc)
    rl.ensure_module()
    assert rl.decide(p, "x}", subkeys={"duplicate": "b"}).allowed  # a '}' elsewhere keeps the tag "x"
    reset_stats(cluster)
    with pytest.raises(ValueError, match="'}'"):
        rl.decide(p, "}x", subkeys={"duplicate": "b"})
    assert redirects_and_getkeys(cluster)[2] == 0  # nothing was sent
    rc.close()
