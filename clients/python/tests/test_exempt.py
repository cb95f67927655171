"""skip, exempt callers (IP/CIDR, keys) and on_refused in the FastAPI and
Flask adapters — express's and Fastify's names and semantics — on the local
backend (no server). Django's: test_django.py."""

from __future__ import annotations

import flask
import pytest
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from redis_rl import Policy
from redis_rl.adapters.flask import FlaskRateLimits
from redis_rl.adapters.starlette import RateLimits
from redis_rl.exempt import Exemptions, exemption


def test_exemptions_match_addresses_ranges_and_keys():
    ex = exemption({"ips": ["10.0.0.0/8", "2001:db8::/32", "192.0.2.7"], "keys": ["internal"]})
    assert [ex(ip, ()) for ip in ("10.1.2.3", "::ffff:10.9.9.9", "2001:db8::1", "192.0.2.7", "192.0.2.8", "11.0.0.1")] \
        == [True, True, True, True, False, False]
    assert ex(None, ["a", "internal"]) and not ex(None, ["a"]) and not ex("not an ip", ())
    with pytest.raises(ValueError) as e:
        exemption(Exemptions(ips=["10.0.0.0/33"]))
    assert e.value.field == "exempt"


def test_fastapi_skip_exempt_and_a_custom_refusal(rl_local):
    def busy(request: Request, refusal) -> JSONResponse:
        retry = dict(refusal.headers)["Retry-After"]
        return JSONResponse({"busy": refusal.decision.binding, "title": refusal.body["title"]}, status_code=503,
                            headers={"Retry-After": retry})

    limits = RateLimits(rl_local.async_limiter(), skip=lambda r: r.query_params.get("health") == "1",
                        exempt={"ips": ["10.0.0.0/8"], "keys": ["internal"]}, on_refused=busy)
    app = FastAPI()
    limits.install(app)
    p = Policy("api", "1/minute")

    @app.get("/x", dependencies=[Depends(limits.depends(p, lambda r: r.headers.get("X-Key", "anon")))])
    async def x():
        return {"ok": True}

    with TestClient(app) as c:
        assert c.get("/x", headers={"X-Key": "k"}).status_code == 200
        r = c.get("/x", headers={"X-Key": "k"})
        assert (r.status_code, r.headers["Retry-After"], r.json()["busy"]) == (503, "60", "1-per-1m")
        assert c.get("/x?health=1", headers={"X-Key": "k"}).status_code == 200  # skipped
        assert [c.get("/x", headers={"X-Key": "internal"}).status_code for _ in range(3)] == [200] * 3
    with TestClient(app, client=("10.1.2.3", 50000)) as c:  # a caller in an exempt range
        assert [c.get("/x", headers={"X-Key": "z"}).status_code for _ in range(3)] == [200] * 3
    assert len(rl_local.engine.keys) == 1  # exempt and skipped calls wrote nothing


def test_flask_skip_exempt_and_a_custom_refusal(rl_local):
    app = flask.Flask("exempt")
    limits = FlaskRateLimits(rl_local.limiter(), skip=lambda r: r.args.get("health") == "1",
                             exempt=Exemptions(ips=["10.0.0.0/8"], keys=["internal"]),
                             on_refused=lambda r, refusal: ({"busy": refusal.decision.binding}, 503,
                                                            dict(refusal.headers)))
    p = Policy("api", "1/minute")

    @app.get("/x")
    @limits.limit(p, key=lambda: flask.request.headers.get("X-Key", "anon"))
    def x():
        return {"ok": True}

    c = app.test_client()
    assert c.get("/x", headers={"X-Key": "k"}).status_code == 200
    r = c.get("/x", headers={"X-Key": "k"})
    assert (r.status_code, r.headers["Retry-After"], r.json["busy"]) == (503, "60", "1-per-1m")
    assert c.get("/x?health=1", headers={"X-Key": "k"}).status_code == 200
    assert [c.get("/x", headers={"X-Key": "internal"}).status_code for _ in range(3)] == [200] * 3
    assert [c.get("/x", headers={"X-Key": "z"}, environ_base={"REMOTE_ADDR": "10.1.2.3"}).status_code
            for _ in range(3)] == [200] * 3
    assert len(rl_local.engine.keys) == 1


def test_a_default_limit_for_every_route_fastapi_flask(rl_local):
    """FastAPI: RateLimitMiddleware(default=...) limits every path not in
    routes (None opts one out); Flask: limits.init_app(app, default=...) every
    view without its own @limits.limit (@limits.exempt opts one out)."""
    from redis_rl.adapters.starlette import RateLimitMiddleware

    limits = RateLimits(rl_local.async_limiter())
    app = FastAPI()
    limits.install(app)
    per_ip = Policy("ip", "2/minute")
    app.add_middleware(RateLimitMiddleware, limits=limits, default=(per_ip, limits.client_ip), routes={"/health": None})

    @app.get("/a")
    async def a():
        return {}

    @app.get("/b")
    async def b():
        return {}

    @app.get("/health")
    async def health():
        return {}

    with TestClient(app) as c:
        assert [c.get(p).status_code for p in ("/a", "/b", "/a", "/health", "/health", "/health")] \
            == [200, 200, 429, 200, 200, 200]
        assert c.get("/health").headers.get("RateLimit") is None

    fl = flask.Flask("defaults")
    flimits = FlaskRateLimits(rl_local.limiter())
    flimits.init_app(fl, default=Policy("fip", "2/minute"), key=lambda: "caller")
    own = Policy("own", "5/minute")

    @fl.get("/a")
    def fa():
        return "a"

    @fl.get("/own")
    @flimits.limit(own, key=lambda: "caller")
    def fown():
        return "own"

    @fl.get("/health")
    @flimits.exempt
    def fhealth():
        return "ok"

    c = fl.test_client()
    r = c.get("/a")
    assert (r.status_code, r.headers["RateLimit"]) == (200, '"2-per-1m";r=1;t=60')
    assert [c.get(p).status_code for p in ("/a", "/a", "/own", "/own", "/health", "/health")] \
        == [200, 429, 200, 200, 200, 200]
    assert c.get("/own").headers["RateLimit"] == '"5-per-1m";r=2;t=60'  # its own limit, not the default
