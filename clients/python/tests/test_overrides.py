"""Runtime overrides against a real server: a limit set by one limiter is
applied by another within a refresh, counts kept; a later limiter reads it
before its first decision; the last values stay while Redis is down; a
stored value a limit cannot take is ignored (clients/CLIENTS.md §1)."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta

import pytest
import redis.asyncio

from redis_rl import AsyncRateLimiter, Policy, RateLimiter, quota, sliding_window
from redis_rl.http import rate_limit_headers
from servers import Server

S = timedelta(seconds=1)


def ocr(prefix: str) -> Policy:
    return Policy("ocr", [quota("day", "Asia/Shanghai", "day", 20), quota("hour", "Asia/Shanghai", "hour", 5)],
                  prefix=prefix)


def test_set_on_one_limiter_is_applied_by_another_within_a_refresh(server, raw, key):
    one, two = RateLimiter(server.client()), RateLimiter(server.client())
    p = ocr(key)
    assert [two.decide(p, "u").allowed for _ in range(6)] == [True] * 5 + [False]
    one.runtime_limits.set(p, {"hour": 7})
    assert raw.hgetall(f"{key}ratelimit:limits") == {b"ocr/hour": b"7"}
    # Within a refresh (250 ms) and a decision: 0.6 s on an idle machine,
    # stretched by twice the slowest decision seen here (a refresh is a round
    # trip like one), since a loaded 2-core machine can take 100s of ms for one.
    t0, slowest = time.monotonic(), 0.0
    while True:
        t = time.monotonic()
        allowed = two.decide(p, "u").allowed  # the refused ones count nothing
        slowest = max(slowest, time.monotonic() - t)
        if allowed:
            break
        assert time.monotonic() - t0 < 0.6 + 2 * slowest, ("not applied within a refresh and a decision", slowest)
        time.sleep(0.02)
    d = two.decide(p, "u")
    assert d.allowed and d.states["hour"].remaining == 0  # 7 counted: nothing was reset
    assert dict(rate_limit_headers(d))["RateLimit-Policy"] == '"day";q=20;w=86400, "hour";q=7;w=3600'
    assert one.runtime_limits.get(p) == {"day": 20, "hour": 7}
    later = RateLimiter(server.client())  # a limiter started later reads it before its first decision
    assert later.decide(p, "u").allowed is False
    with pytest.raises(ValueError) as e:
        one.runtime_limits.set(p, {"minute": 3})
    assert e.value.field == "limit_name"
    with pytest.raises(ValueError) as e:
        one.runtime_limits.set(Policy("w", [sliding_window("w", 1, S)], prefix=key), {"w": 0})
    assert e.value.field == "q"
    for rl in (one, two, later):
        rl.runtime_limits.close()


def test_a_value_a_limit_cannot_take_is_ignored_and_logged(server, raw, key, caplog):
    p = Policy("api", [sliding_window("user", 2, 60 * S)], prefix=key)
    raw.hset(f"{key}ratelimit:limits", mapping={"api/user": "0", "api/other": "9"})
    rl = RateLimiter(server.client())
    with caplog.at_level(logging.WARNING, "redis_rl"):
        assert [rl.decide(p, "k").allowed for _ in range(3)] == [True, True, False]
    assert any("api/user" in r.getMessage() and "ignoring" in r.getMessage() for r in caplog.records)
    rl.runtime_limits.close()


@pytest.mark.anyio
async def test_the_last_values_stay_while_redis_is_down():
    with Server() as s:
        client = redis.asyncio.Redis(port=s.port, socket_timeout=0.3, socket_connect_timeout=0.3)
        rl = AsyncRateLimiter(client)
        p = ocr("down:")
        await rl.runtime_limits.set(p, {"day": 3})
        await rl.runtime_limits.load(p)
        assert rl.runtime_limits.values(p) == {"day": 3}
        s.stop()
        await asyncio.sleep(0.8)  # refreshes fail meanwhile
        assert rl.runtime_limits.values(p) == {"day": 3}
        rl.runtime_limits.close()
        await client.aclose()
