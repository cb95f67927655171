"""A pytest plugin (registered as ``redis_rl`` under ``pytest11``): endpoint
tests without Redis, on the local backend (``redis_rl.local``).

The fixture ``rl_local`` gives a ``LocalBackend``: one in-process keyspace
with a hand-moved clock (``rl_local.clock.advance(ms)``), and the clients
that decide on it — ``rl_local.redis`` (a ``redis.Redis``) and
``rl_local.async_redis`` (a ``redis.asyncio.Redis``), both over the same
keys — to give the app where it would take its Redis client::

    def test_login_is_limited(rl_local):
        app = create_app(rl_local.redis)          # the app's factory takes the client
        client = app.test_client()
        ...
        rl_local.clock.advance(60_000)            # a minute later

The decisions are the module's (the golden sequence cases run against both).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from .client import AsyncRateLimiter, RateLimiter
from .local import AsyncLocalRedis, LocalEngine, LocalRedis, ManualClock

__all__ = ["LocalBackend", "rl_local"]


class LocalBackend:
    """One local keyspace, its clock and the clients over it."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        self.clock = ManualClock(start_ms)
        self.engine = LocalEngine(self.clock)
        self.redis = LocalRedis(engine=self.engine)
        self.async_redis = AsyncLocalRedis(engine=self.engine)

    def limiter(self, **kw: object) -> RateLimiter:
        """A ``RateLimiter`` on this backend (keyword arguments as ``RateLimiter``'s)."""
        return RateLimiter(self.redis, **kw)  # type: ignore[arg-type]

    def async_limiter(self, **kw: object) -> AsyncRateLimiter:
        return AsyncRateLimiter(self.async_redis, **kw)  # type: ignore[arg-type]

    def advance(self, by: int | timedelta) -> None:
        """Moves the clock: ``by`` ms or a ``timedelta``."""
        self.clock.advance(by)

    def reset(self) -> None:
        """Forgets every key (the clock stays)."""
        self.engine.reset()


@pytest.fixture
def rl_local() -> Iterator[LocalBackend]:
    """A fresh local backend per test, its clock at 2026-01-01T00:00:00Z."""
    yield LocalBackend()
