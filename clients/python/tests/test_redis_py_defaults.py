"""redis-py 8 gives every client ``socket_timeout=5`` by default (5.x: none).
The guard refuses a socket timeout shorter than the budget + 10 s that the
app chose, but not redis-py's own default: ``Redis(host=...)`` must keep
working on whichever redis-py pip picks (pyproject allows ``<9``), with one
warning saying what the default costs. The suite pins redis 5.2.1, so
redis-py 8's defaults are put in place here, in the constructors the guard
reads them from (their keyword defaults)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
import redis
import redis.asyncio
import redis.asyncio.connection
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from redis_rl import AsyncRateLimiter, Policy
from redis_rl.adapters.starlette import RateLimits
from redis_rl.guard import check_socket_timeout
from redis_rl.local import AsyncLocalRedis, LocalRedis


@pytest.fixture
def redis8_defaults(monkeypatch):
    """redis-py 8.x's defaults: ``socket_timeout=5`` in ``redis.asyncio.Redis``
    and in its connections (what ``from_url`` leaves to them)."""
    for init in (redis.asyncio.Redis.__init__, redis.asyncio.connection.AbstractConnection.__init__,
                 redis.Redis.__init__):
        if init.__kwdefaults__ and "socket_timeout" in init.__kwdefaults__:
            monkeypatch.setitem(init.__kwdefaults__, "socket_timeout", 5)
    assert redis.asyncio.Redis(port=1).connection_pool.connection_kwargs["socket_timeout"] == 5


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "redis_rl" and r.levelno == logging.WARNING]


def test_redis_py_default_timeout_is_warned_once_not_refused(redis8_defaults, caplog):
    caplog.set_level(logging.WARNING, logger="redis_rl")
    client = redis.asyncio.Redis(port=1)  # the app set no timeout
    limits = RateLimits(AsyncRateLimiter(client, check_module=False))
    limits.depends(Policy("p", "3/minute", budget=timedelta(seconds=2)), lambda request: "k")  # checks the policy's budget too
    [w] = _warnings(caplog)
    assert "default, 5 s (the app set none)" in w and "later than 5 s is dropped" in w
    assert "stays charged" in w and "leases come back by token" in w
    assert "socket_timeout=None" in w and "at least the budget + 10 s (10.5 s)" in w


def test_from_url_gets_the_connections_default_and_is_warned(redis8_defaults, caplog):
    caplog.set_level(logging.WARNING, logger="redis_rl")
    client = redis.asyncio.from_url("redis://127.0.0.1:1")
    assert "socket_timeout" not in client.connection_pool.connection_kwargs  # left to the connection class
    check_socket_timeout(client, 0.5)
    [w] = _warnings(caplog)
    assert "5 s" in w


def test_a_chosen_timeout_too_small_is_still_refused(redis8_defaults, caplog):
    with pytest.raises(ValueError, match="socket_timeout=4 s drops replies"):
        RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1, socket_timeout=4), check_module=False))
    with pytest.raises(ValueError, match="socket_timeout=2.0 s drops replies"):
        check_socket_timeout(redis.asyncio.from_url("redis://127.0.0.1:1?socket_timeout=2"), 0.5)
    check_socket_timeout(redis.asyncio.Redis(port=1, socket_timeout=None), 0.5)
    check_socket_timeout(redis.asyncio.Redis(port=1, socket_timeout=10.5), 0.5)
    assert _warnings(caplog) == []


def test_the_local_backends_have_no_socket_timeout(redis8_defaults, caplog):
    """The README's "Tests without Redis" app, as written, on redis-py 8's defaults."""
    caplog.set_level(logging.WARNING, logger="redis_rl")
    assert AsyncLocalRedis().connection_pool.connection_kwargs["socket_timeout"] is None
    assert LocalRedis().connection_pool.connection_kwargs["socket_timeout"] is None
    app = FastAPI()
    limits = RateLimits(AsyncRateLimiter(AsyncLocalRedis()))
    limits.install(app)

    @app.post("/login", dependencies=[Depends(limits.depends(Policy("login", "3/minute"), limits.client_ip))])
    async def log_in():
        return {"ok": True}

    client = TestClient(app)
    assert [client.post("/login").status_code for _ in range(4)] == [200, 200, 200, 429]
    assert _warnings(caplog) == []


def test_flask_does_not_ask_the_local_backend_for_a_socket_timeout(caplog):
    """The sync guard's budget is the socket timeout, so Flask warns about a
    client without one; the local backend has no socket and never blocks."""
    from redis_rl import RateLimiter
    from redis_rl.adapters.flask import FlaskRateLimits
    caplog.set_level(logging.WARNING, logger="redis_rl")
    FlaskRateLimits(RateLimiter(LocalRedis()))
    assert _warnings(caplog) == []
    FlaskRateLimits(RateLimiter(redis.Redis(port=1)))  # a real client without one is still warned about
    [w] = _warnings(caplog)
    assert "no socket_timeout" in w
