"""Counting one outcome (``Policy(counts="failures" | "successes")``): every
call is charged up front, and the permit's close refunds it when its outcome
does not count — exact under concurrency, on a real server."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import redis.asyncio
from fastapi import Response  # module level: the endpoints' annotations are resolved in these globals

from redis_rl import AsyncRateLimiter, Policy, RateLimiter, RateLimitExceeded, lockout, sliding_window

S = timedelta(seconds=1)


class BadPassword(Exception):
    pass


@pytest.mark.anyio
async def test_fifty_concurrent_failing_logins_against_five(server, key):
    rl = AsyncRateLimiter(redis.asyncio.Redis(host="127.0.0.1", port=server.port, max_connections=60))
    p = Policy("login", [sliding_window("fails", 5, 15 * 60 * S)], prefix=key + ":", counts="failures")
    admitted = 0

    async def login() -> None:
        nonlocal admitted
        try:
            async with rl.acquire(p, "alice"):
                admitted += 1
                await asyncio.sleep(0.01)
                raise BadPassword()
        except (BadPassword, RateLimitExceeded):
            pass

    await asyncio.gather(*(login() for _ in range(50)))
    assert admitted == 5
    st = await rl.state(p, "alice")
    assert st.limited is False and st.states["fails"].remaining == 0  # locked out for the window
    assert not (await rl.decide(p, "alice")).allowed


def test_successes_are_given_back_under_failures_only(server, key):
    rl = RateLimiter(server.client())
    p = Policy("login", "3/minute", prefix=key + ":", counts="failures")
    for _ in range(10):  # ten good logins in a row: none counts
        with rl.acquire(p, "bob"):
            pass
    assert rl.state(p, "bob").states["3-per-1m"].remaining == 3
    with rl.acquire(p, "bob") as permit:  # a failure said without an exception
        permit.failed()
    assert rl.state(p, "bob").states["3-per-1m"].remaining == 2


def test_successes_only(server, key):
    rl = RateLimiter(server.client())
    p = Policy("signup", "2/minute", prefix=key + ":", counts="successes")
    for _ in range(5):
        with pytest.raises(ValueError):
            with rl.acquire(p, "10.0.0.1"):
                raise ValueError("form invalid")  # failures do not count
    for _ in range(2):
        with rl.acquire(p, "10.0.0.1"):
            pass
    with pytest.raises(RateLimitExceeded):
        with rl.acquire(p, "10.0.0.1"):
            pass


def test_counts_needs_a_limit_that_refunds():
    with pytest.raises(ValueError) as e:
        Policy("l", [lockout("x", 3, S, S)], counts="failures")
    assert e.value.field == "counts"  # type: ignore[attr-defined]
    with pytest.raises(ValueError) as e:
        Policy("l", "3/minute", counts="errors")
    assert e.value.field == "counts"  # type: ignore[attr-defined]


def _login_policy(key: str) -> Policy:
    # The failures-only login lockout: 3 failed logins in 15 minutes lock the
    # user out until the oldest failure leaves the window; good logins never count.
    return Policy("login", "3 per 15 minutes", prefix=key + ":", counts="failures")


def test_fastapi_login_counts_failures_only(server, key):
    from fastapi import Depends, FastAPI, HTTPException
    from fastapi.testclient import TestClient

    from redis_rl.adapters.starlette import RateLimits

    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(host="127.0.0.1", port=server.port)))
    app = FastAPI()
    limits.install(app)
    login = Depends(limits.scope(_login_policy(key), key=lambda r: r.query_params["user"]))

    @app.post("/login", dependencies=[login])
    async def do_login(user: str, password: str):
        if password != "right":
            raise HTTPException(401, "bad password")
        return {"ok": True}

    with TestClient(app) as c:
        for _ in range(5):
            assert c.post("/login?user=ann&password=right").status_code == 200
        assert [c.post("/login?user=ann&password=wrong").status_code for _ in range(4)] == [401, 401, 401, 429]
        assert c.post("/login?user=ann&password=right").status_code == 429  # locked: even the right one waits
        assert c.post("/login?user=ben&password=right").status_code == 200


def test_flask_login_counts_failures_only(server, key):
    import flask

    from redis_rl.adapters.flask import FlaskRateLimits

    limits = FlaskRateLimits(RateLimiter(server.client()))
    app = flask.Flask(__name__)

    @app.post("/login")
    @limits.limit(_login_policy(key), key=lambda: flask.request.args["user"])  # scope implied by counts
    def do_login():
        if flask.request.args["password"] != "right":
            return {"error": "bad password"}, 401
        return {"ok": True}

    c = app.test_client()
    for _ in range(5):
        assert c.post("/login?user=ann&password=right").status_code == 200
    assert [c.post("/login?user=ann&password=wrong").status_code for _ in range(4)] == [401, 401, 401, 429]


def test_fastapi_a_returned_error_response_is_a_failure(rl_local):
    """Issue 40: an endpoint that returns JSONResponse(status_code=401) (no
    HTTPException) is a failure too; a Response whose status the endpoint set
    on the injected one as well. On the local backend: no server."""
    from fastapi import Depends, FastAPI
    from fastapi.responses import JSONResponse
    from fastapi.testclient import TestClient

    from redis_rl.adapters.starlette import RateLimits

    limits = RateLimits(rl_local.async_limiter())
    app = FastAPI()
    limits.install(app)
    login = Depends(limits.scope(Policy("login", "3 per 15 minutes", counts="failures"),
                                 key=lambda r: r.query_params["user"]))

    @app.post("/login", dependencies=[login])
    async def do_login(user: str, password: str, response: Response):
        if password == "returned":
            return JSONResponse({"error": "bad password"}, status_code=401)
        if password == "set":
            response.status_code = 403
            return {"error": "forbidden"}
        return {"ok": True}

    with TestClient(app) as c:
        assert [c.post("/login?user=ann&password=right").status_code for _ in range(4)] == [200] * 4
        assert [c.post(f"/login?user=ann&password={p}").status_code
                for p in ("returned", "set", "returned", "returned")] == [401, 403, 401, 429]

