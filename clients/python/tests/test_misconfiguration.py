"""Configuration that could only fail (or leak) at run time is refused when
it is written: a budget that answers every decision "unavailable", a key
whose hash tag is empty, and a policy that holds a lease or an estimate
decided where nothing gives it back."""

from __future__ import annotations

from datetime import timedelta

import flask
import pytest
import redis
import redis.asyncio
from starlette.applications import Starlette
from starlette.testclient import TestClient

from redis_rl import AsyncRateLimiter, Policy, RateLimiter, concurrency, quota, sliding_window
from redis_rl.adapters.flask import FlaskRateLimits
from redis_rl.adapters.starlette import RateLimitMiddleware, RateLimits

S = timedelta(seconds=1)
WINDOW = [sliding_window("w", 5, S)]


@pytest.mark.parametrize("budget", [timedelta(0), -S, 0.5, 500])
def test_a_budget_that_is_not_a_positive_timedelta_is_refused(budget):
    with pytest.raises(ValueError, match="budget"):
        Policy("p", WINDOW, budget=budget)


def test_a_negative_inflight_retry_after_is_refused():
    with pytest.raises(ValueError, match="inflight_retry_after"):
        Policy("p", WINDOW, inflight_retry_after=-S)


def test_a_key_starting_with_a_closing_brace_is_refused():
    # "p:{}x}:a" and "p:{}x}:b" hash apart (an empty tag hashes the whole key):
    # under Cluster RL.ALL would answer CROSSSLOT for a caller-chosen key.
    policy = Policy("p", [sliding_window("a", 5, S), concurrency("b", 1, S)])
    with pytest.raises(ValueError, match="invalid key"):
        policy.plan("}x")
    assert policy.plan("x}y").call.args[2] == "p:{x}y}:a"  # a brace later keeps the tag "x"


LEASE = Policy("lease", [concurrency("inflight", 2, 60 * S)])
METERED = Policy("metered", [quota("tokens", "UTC", "day", 100, metered=True)])


@pytest.mark.parametrize("policy", [LEASE, METERED])
def test_starlette_depends_refuses_a_policy_that_needs_a_scope(policy):
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1), check_module=False))
    with pytest.raises(ValueError, match="use RateLimits.scope"):
        limits.depends(policy, key=lambda r: "k")
    limits.scope(policy, key=lambda r: "k")  # the scope gives them back: accepted


@pytest.mark.parametrize("policy", [LEASE, METERED])
def test_starlette_middleware_refuses_a_policy_that_needs_a_scope(policy):
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1), check_module=False))
    app = Starlette()
    app.add_middleware(RateLimitMiddleware, limits=limits, routes={"/x": (policy, lambda r: "k")})
    with pytest.raises(ValueError, match="holds a lease or an estimate"):
        with TestClient(app) as c:  # the middleware stack is built on start
            c.get("/x")


@pytest.mark.parametrize("policy", [LEASE, METERED])
def test_flask_limit_without_scope_refuses_a_policy_that_needs_one(policy):
    limits = FlaskRateLimits(RateLimiter(redis.Redis(port=1), check_module=False))
    with pytest.raises(ValueError, match="scope=True"):
        limits.limit(policy, key=lambda: "k")
    app = flask.Flask(__name__)
    app.get("/x")(limits.limit(policy, key=lambda: "k", scope=True)(lambda: "ok"))


def _assert_misconfigured(status, content_type, body):
    import json
    assert status == 500 and content_type == "application/problem+json"
    doc = json.loads(body)
    assert doc["type"] == "https://redis-ratelimit.dev/problems/misconfigured" and doc["status"] == 500
    assert "module is not loaded" in doc["detail"]
    assert 'backend="functions"' in doc["detail"]  # the way without the module, named as Spring does


def test_without_the_module_the_adapters_answer_a_problem_naming_it():
    """A server without the module: each adapter answers a problem+json 500
    that says so (Spring's /misconfigured), not a plain-text 500."""
    from fastapi import Depends, FastAPI
    from fastapi.testclient import TestClient as FastClient
    from servers import Server

    with Server(module=False) as s:
        limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=s.port)))
        app = FastAPI()
        limits.install(app)
        app.add_middleware(RateLimitMiddleware, limits=limits, routes={"/mw": (Policy("mw", WINDOW), lambda r: "k")})

        @app.get("/dep", dependencies=[Depends(limits.depends(Policy("dep", WINDOW), key=lambda r: "k"))])
        async def dep():
            return {}

        @app.get("/mw")
        async def mw():
            return {}

        with FastClient(app) as c:
            for path in ("/dep", "/mw"):
                r = c.get(path)
                _assert_misconfigured(r.status_code, r.headers["content-type"], r.content)

        flimits = FlaskRateLimits(RateLimiter(redis.Redis(port=s.port)))
        fapp = flask.Flask(__name__)
        fapp.get("/x")(flimits.limit(Policy("fl", WINDOW), key=lambda: "k")(lambda: "ok"))
        r = fapp.test_client().get("/x")
        _assert_misconfigured(r.status_code, r.headers["Content-Type"], r.data)


def test_flask_warns_when_the_client_has_no_socket_timeout(caplog, cluster):
    """The sync guard's budget is the socket timeout: a client without one
    lets a frozen Redis hold each request (measured: 4.0 s for a 4 s SIGSTOP,
    budget 0.5 s). Said when the adapter is set up, not found in production."""
    FlaskRateLimits(RateLimiter(redis.Redis(port=1), check_module=False))
    assert "has no socket_timeout" in caplog.text
    caplog.clear()
    FlaskRateLimits(RateLimiter(redis.Redis(port=1, socket_timeout=0.5), check_module=False))
    assert "socket_timeout" not in caplog.text
    from redis.cluster import RedisCluster
    port = cluster.nodes[0].port
    FlaskRateLimits(RateLimiter(RedisCluster(host="127.0.0.1", port=port, socket_timeout=0.5), check_module=False))
    assert "socket_timeout" not in caplog.text
    FlaskRateLimits(RateLimiter(RedisCluster(host="127.0.0.1", port=port), check_module=False))
    assert "has no socket_timeout" in caplog.text


def redis_refuses(raw, prefix, how):
    """Make the server refuse the next decisions of ``prefix`` with an error
    reply that is not "unavailable": WRONGTYPE (another app's string at the
    policy's key, under every key the test uses) or OOM (maxmemory 1,
    noeviction; undone by the returned callable)."""
    if how == "WRONGTYPE":
        for name in ("dep", "mw", "scope", "fl", "fl-scope"):
            raw.set(f"{prefix}{name}:{{k}}:w", "another app's value")
        return lambda: None
    policy = raw.config_get("maxmemory-policy")["maxmemory-policy"]
    raw.config_set("maxmemory-policy", "noeviction")
    raw.config_set("maxmemory", 1)

    def undo():
        raw.config_set("maxmemory", 0)
        raw.config_set("maxmemory-policy", policy)
    return undo


def assert_redis_refused(status, content_type, body, policy, how):
    """Spring's answer: 500 problem+json misconfigured, the detail naming the policy and Redis's error."""
    import json
    assert (status, content_type) == (500, "application/problem+json"), body
    doc = json.loads(body)
    assert doc["type"] == "https://redis-ratelimit.dev/problems/misconfigured" and doc["status"] == 500
    assert doc["title"] == "Internal Server Error"
    assert doc["detail"].startswith(f"Redis refused rate limit '{policy}': {how} "), doc["detail"]


@pytest.mark.parametrize("how", ["WRONGTYPE", "OOM"])
def test_a_redis_error_reply_is_a_misconfigured_500_in_fastapi_and_flask(server, raw, key, how, caplog):
    """An error reply that is not "Redis unavailable" (OOM over maxmemory,
    WRONGTYPE at a key another app wrote, NOPERM, ...) is the deployment's
    mistake: a problem+json 500 naming it, logged once at error level (as the
    Spring starter), never the framework's own 500 page nor the Redis-down mode."""
    from fastapi import Depends, FastAPI
    from fastapi.testclient import TestClient as FastClient

    caplog.set_level("ERROR", logger="redis_rl")
    prefix = key + ":"
    window = [sliding_window("w", 5, S)]
    dep, mw = Policy("dep", window, prefix=prefix), Policy("mw", window, prefix=prefix)
    held = Policy("scope", [*window, concurrency("c", 1, 60 * S)], prefix=prefix)
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=server.port)))
    app = FastAPI()
    limits.install(app)
    app.add_middleware(RateLimitMiddleware, limits=limits, routes={"/mw": (mw, lambda r: "k")})

    @app.get("/dep", dependencies=[Depends(limits.depends(dep, key=lambda r: "k"))])
    async def dep_():
        return {}

    @app.get("/scope")
    async def scope_(permit=Depends(limits.scope(held, key=lambda r: "k"))):
        return {}

    @app.get("/mw")
    async def mw_():
        return {}

    flimits = FlaskRateLimits(RateLimiter(redis.Redis(port=server.port, socket_timeout=0.5)))
    fapp = flask.Flask(__name__)
    fapp.get("/x", endpoint="x")(flimits.limit(Policy("fl", window, prefix=prefix), key=lambda: "k")(lambda: "ok"))
    fapp.get("/s", endpoint="s")(flimits.limit(Policy("fl-scope", [*window, concurrency("c", 1, 60 * S)],
                                                      prefix=prefix), key=lambda: "k", scope=True)(lambda: "ok"))
    with FastClient(app) as c:
        assert c.get("/dep").status_code == 200  # the first use's module check passed: Redis decides
        fc = fapp.test_client()
        assert fc.get("/x").status_code == 200
        caplog.clear()
        undo = redis_refuses(raw, prefix, how)
        try:
            answers = [(p, c.get(f"/{p}")) for p in ("dep", "scope", "mw")]
            fanswers = [(p, fc.get(u)) for p, u in (("fl", "/x"), ("fl-scope", "/s"))]
        finally:
            undo()
    for policy, r in answers:
        assert_redis_refused(r.status_code, r.headers["content-type"], r.content, policy, how)
    for policy, r in fanswers:
        assert_redis_refused(r.status_code, r.headers["Content-Type"], r.data, policy, how)
    errors = [r for r in caplog.records if r.levelname == "ERROR" and r.name == "redis_rl"]
    assert [r.getMessage().split(":")[1].strip() for r in errors] == ["Redis refused rate limit 'dep'",
                                                                       "Redis refused rate limit 'scope'",
                                                                       "Redis refused rate limit 'mw'",
                                                                       "Redis refused rate limit 'fl'",
                                                                       "Redis refused rate limit 'fl-scope'"]
    assert limits.health()["status"] == flimits.health()["status"] == "UP"  # not the Redis-down mode
