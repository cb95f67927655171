"""The local backend (redis_rl.local) and its pytest fixture ``rl_local``:
what the sequence cases cannot drive against the real module (a lockout
lifting by the clock, the async client, a Flask endpoint), without Redis."""

from __future__ import annotations

import flask
import pytest

from redis_rl import Policy, RateLimitExceeded, concurrency, lockout, quota
from redis_rl.adapters.flask import FlaskRateLimits
from redis_rl.local import LocalRedis, ManualClock


def test_a_lockout_lifts_when_the_clock_passes_its_lock_time(rl_local):
    rl = rl_local.limiter()
    p = Policy("login", [lockout("l", 2, 60_000, 30_000)])
    assert [rl.decide(p, "ann").limited for _ in range(3)] == [False, False, True]
    rl_local.advance(29_999)
    d = rl.decide(p, "ann")
    assert d.limited and d.retry_after.total_seconds() == 0.001
    rl_local.advance(1)
    assert not rl.decide(p, "ann").limited


def test_state_reset_penalty_on_the_local_backend(rl_local):
    rl = rl_local.limiter()
    p = Policy("api", "5/minute")
    rl.decide(p, "bob")
    assert rl.state(p, "bob").states["5-per-1m"].remaining == 4
    assert rl.penalty(p, "bob", 4).states["5-per-1m"].remaining == 0
    assert rl.decide(p, "bob").limited
    rl.reset(p, "bob")
    assert rl.state(p, "bob").states["5-per-1m"].remaining == 5


@pytest.mark.anyio
async def test_the_async_client_shares_the_keyspace(rl_local):
    p = Policy("jobs", [concurrency("inflight", 1, 60_000)])
    arl = rl_local.async_limiter()
    async with arl.acquire(p, "k"):
        assert rl_local.limiter().decide(p, "k").limited  # the sync client sees the lease
        with pytest.raises(RateLimitExceeded):
            async with arl.acquire(p, "k"):
                pass
    async with arl.acquire(p, "k"):  # released on exit
        pass


def test_a_quota_turns_over_at_local_midnight():
    clock = ManualClock(1_767_225_600_000 - 3_600_000)  # 2025-12-31T23:00Z = 2026-01-01T00:00+01:00 in Paris
    rl_clock = LocalRedis(clock)
    from redis_rl import RateLimiter
    rl = RateLimiter(rl_clock)
    p = Policy("q", [quota("day", "Europe/Paris", "day", 1)])
    assert not rl.decide(p, "k").limited
    d = rl.decide(p, "k")
    assert d.limited and d.retry_after.total_seconds() == 86_400
    clock.advance(86_400_000)
    assert not rl.decide(p, "k").limited


def test_a_flask_endpoint_without_redis(rl_local):
    app = flask.Flask("local")
    limits = FlaskRateLimits(rl_local.limiter())
    p = Policy("api", "2/second")

    @app.get("/")
    @limits.limit(p, key=lambda: "k")
    def index():
        return "ok"

    client = app.test_client()
    assert [client.get("/").status_code for _ in range(3)] == [200, 200, 429]
    rl_local.advance(1000)
    assert client.get("/").status_code == 200
