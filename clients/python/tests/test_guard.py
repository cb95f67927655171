"""The Redis-down guard: after the first failure requests stop touching
Redis (no reconnect per request) and one probe PINGs every 250 ms; the first
answer closes the circuit. Driven by a stand-in limiter that counts calls."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
import redis

from redis_rl import Policy, sliding_window
from redis_rl.guard import AsyncGuard, Guard

POLICY = Policy("p", [sliding_window("w", 1, timedelta(seconds=1))], budget=timedelta(milliseconds=100))


class Down:
    def __init__(self):
        self.decides = 0
        self.pings = 0
        self.up = False
        self.redis = self

    def decide(self, *a, **kw):
        self.decides += 1
        raise redis.exceptions.ConnectionError("Connection refused")

    def ping(self):
        self.pings += 1
        if not self.up:
            raise redis.exceptions.ConnectionError("Connection refused")
        return True


class AsyncDown(Down):
    async def decide(self, *a, **kw):
        return Down.decide(self)

    async def ping(self):
        return Down.ping(self)


def test_sync_guard_one_failure_then_circuit_then_probe_recovers():
    down = Down()
    guard = Guard(down)  # type: ignore[arg-type]
    assert [guard.decide(POLICY, "k") for _ in range(100)] == [None] * 100
    assert down.decides == 1  # 99 requests never touched Redis
    t0 = time.monotonic()
    while down.pings < 2:
        assert time.monotonic() - t0 < 3.0
        time.sleep(0.01)
    assert down.pings <= (time.monotonic() - t0) / 0.25 + 2  # one probe, every 250 ms
    down.up = True
    t0 = time.monotonic()
    while guard.open:
        assert time.monotonic() - t0 < 1.0
        time.sleep(0.01)
    assert guard.decide(POLICY, "k") is None
    assert down.decides == 2  # closed again: the next decision went to Redis


@pytest.mark.anyio
async def test_async_guard_times_out_within_budget_and_recovers():
    class Slow(AsyncDown):
        async def decide(self, *a, **kw):
            self.decides += 1
            await asyncio.sleep(10)  # accepted, never answered

    slow = Slow()
    guard = AsyncGuard(slow)  # type: ignore[arg-type]
    t0 = time.monotonic()
    results = await asyncio.gather(*(guard.decide(POLICY, "k") for _ in range(20)))
    assert results == [None] * 20 and time.monotonic() - t0 < 1.0  # the 100 ms budget, all at once
    assert [await guard.decide(POLICY, "k") for _ in range(50)] == [None] * 50
    assert slow.decides == 20  # the concurrent first wave only; none once open
    slow.up = True
    t0 = time.monotonic()
    while guard.open:
        assert time.monotonic() - t0 < 1.0
        await asyncio.sleep(0.01)
