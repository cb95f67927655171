"""Key administration on a real server: state by peeks that write nothing,
reset (one DEL of the key's own counters and leases), penalty and reward
(DEBIT/REFUND), sync and asyncio."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis.asyncio

from redis_rl import AsyncRateLimiter, Policy, RateLimiter, concurrency, lockout, quota, sliding_window, token_bucket

S = timedelta(seconds=1)


def api(prefix: str) -> Policy:
    return Policy("api", [sliding_window("minute", 5, 60 * S), token_bucket("burst", 10, S, burst=10),
                          quota("day", "UTC", "day", 100), concurrency("inflight", 2, 60 * S),
                          sliding_window("global", 1000, 60 * S, shared=True)], prefix=prefix, tag="api")


def test_state_reads_without_writing(server, raw, key):
    rl = RateLimiter(server.client())
    p = api(key + ":")
    before = {k: raw.dump(k) for k in raw.keys(key + "*")}
    fresh = rl.state(p, "u1")
    assert {k: raw.dump(k) for k in raw.keys(key + "*")} == before == {}  # nothing written
    assert fresh.allowed and {n: s.remaining for n, s in fresh.states.items()} == {
        "minute": 5, "burst": 10, "day": 100, "inflight": 2, "global": 1000}
    for _ in range(2):
        rl.finish(rl.decide(p, "u1"))
    now = rl.state(p, "u1")
    assert now.states["minute"].remaining == 3 and now.states["day"].remaining == 98
    assert now.states["global"].remaining == 998
    assert rl.state(p, "u1").states["minute"].remaining == 3  # a peek again: still 3


def test_reset_unlocks_the_key_and_nothing_else(server, raw, key):
    rl = RateLimiter(server.client())
    p = api(key + ":")
    for _ in range(5):
        rl.finish(rl.decide(p, "u1"))
    rl.finish(rl.decide(p, "u2"))
    assert not rl.decide(p, "u1").allowed  # the window is full
    permit_key = rl.decide(p, "u1")  # still refused: nothing held
    assert not permit_key.allowed
    deleted = rl.reset(p, "u1")
    assert deleted == 3  # the window, the bucket and the day quota of u1 (no lease held, shared left alone)
    assert rl.state(p, "u1").states["minute"].remaining == 5
    assert rl.state(p, "u2").states["minute"].remaining == 4  # another key untouched
    assert rl.state(p, "u1").states["global"].remaining == 1000 - 6  # the shared counter kept


def test_reset_unlocks_a_lockout(server, raw, key):
    rl = RateLimiter(server.client())
    p = Policy("login", [lockout("fails", 3, 60 * S, 600 * S)], prefix=key + ":")
    for _ in range(4):
        rl.decide(p, "alice")
    locked = rl.state(p, "alice")
    assert locked.limited and locked.retry_after is not None and locked.retry_after > 590 * S
    assert rl.reset(p, "alice") >= 1  # :lock (and :count, while the window runs)
    assert raw.keys(key + "*") == []
    open_ = rl.state(p, "alice")
    assert open_.allowed and open_.states["fails"].remaining == 3
    rl.decide(p, "alice")
    assert rl.state(p, "alice").states["fails"].remaining == 2


def test_penalty_and_reward(server, key):
    rl = RateLimiter(server.client())
    p = Policy("api", [sliding_window("minute", 5, 60 * S), quota("day", "UTC", "day", 100)], prefix=key + ":")
    after = rl.penalty(p, "u1", 5)
    assert after.states["minute"].remaining == 0 and after.states["day"].remaining == 95
    assert not rl.decide(p, "u1").allowed
    back = rl.reward(p, "u1", 2)
    assert back.states["minute"].remaining == 2 and back.states["day"].remaining == 97
    assert rl.reward(p, "u1", 50).states["minute"].remaining == 5  # never below empty
    with pytest.raises(ValueError) as e:
        rl.penalty(p, "u1", 10_001)  # RL.CHECK's DEBIT cap (one member per unit)
    assert e.value.field == "cost"  # type: ignore[attr-defined]
    with pytest.raises(ValueError) as e:
        rl.penalty(Policy("l", [lockout("x", 1, S, S)], prefix=key), "u1")
    assert e.value.field == "limits"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_async_admin(server, key):
    rl = AsyncRateLimiter(redis.asyncio.Redis(host="127.0.0.1", port=server.port))
    p = Policy("api", "2/minute", prefix=key + ":")
    assert (await rl.penalty(p, "u1", 2)).states["2-per-1m"].remaining == 0
    assert not (await rl.decide(p, "u1")).allowed
    assert (await rl.reward(p, "u1")).states["2-per-1m"].remaining == 1
    assert await rl.reset(p, "u1") == 1
    assert (await rl.state(p, "u1")).states["2-per-1m"].remaining == 2
