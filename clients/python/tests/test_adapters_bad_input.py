"""A request whose key, cost or estimate the policy refuses (ValueError,
raised before any Redis call) is a 400 problem in both adapters, as the
Node middleware answers a RangeError -- not a 500."""

from __future__ import annotations

from datetime import timedelta

import flask
import redis
import redis.asyncio
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from redis_rl import AsyncRateLimiter, Policy, RateLimiter, quota, sliding_window
from redis_rl.adapters.flask import FlaskRateLimits
from redis_rl.adapters.starlette import RateLimits

POLICY = Policy("bad", [sliding_window("w", 5, timedelta(seconds=10))])
CASES = ["/x?k=%7Da", "/x?k=a&cost=0", "/x?k=a&cost=6"]  # key '}a' (an empty hash tag); cost 0; cost above 5


def test_fastapi_answers_400():
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1), check_module=False))  # never reached
    app = FastAPI()
    limits.install(app)

    @app.get("/x", dependencies=[Depends(limits.depends(POLICY, key=lambda r: r.query_params["k"],
                                                        cost=lambda r: int(r.query_params.get("cost", "1"))))])
    async def x():
        return {}

    with TestClient(app) as c:
        for url in CASES:
            r = c.get(url)
            assert r.status_code == 400 and r.json()["type"].endswith("/bad-request"), (url, r.text)


def test_flask_answers_400():
    limits = FlaskRateLimits(RateLimiter(redis.Redis(port=1), check_module=False))
    app = flask.Flask(__name__)

    @app.get("/x")
    @limits.limit(POLICY, key=lambda: flask.request.args["k"], cost=lambda: int(flask.request.args.get("cost", "1")))
    def x():
        return "ok"

    c = app.test_client()
    for url in CASES:
        r = c.get(url)
        assert r.status_code == 400 and r.json["type"].endswith("/bad-request"), (url, r.text)


def test_a_resolver_s_validation_error_is_400_any_other_error_500():
    """CLIENTS.md §5: input read by the application's own resolvers — bad
    JSON (a decode error), int("x") (a value error), Flask's own BadRequest
    from get_json() — is a 400 problem; any other exception in a resolver is
    a bug and stays a 500."""
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1), check_module=False))
    app = FastAPI()
    limits.install(app)

    async def from_json(request):
        return str((await request.json())["k"])

    @app.post("/x", dependencies=[Depends(limits.depends(POLICY, key=from_json))])
    async def x():
        return {}

    @app.post("/bug", dependencies=[Depends(limits.depends(POLICY, key=lambda r: 1 / 0))])
    async def bug():
        return {}

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/x", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json", r.text
        assert c.post("/bug").status_code == 500

    flimits = FlaskRateLimits(RateLimiter(redis.Redis(port=1), check_module=False))
    fapp = flask.Flask(__name__)

    @fapp.post("/x")
    @flimits.limit(POLICY, key=lambda: str(flask.request.get_json()["k"]))
    def fx():
        return "ok"

    r = fapp.test_client().post("/x", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.headers["Content-Type"] == "application/problem+json", r.data


def test_a_cost_or_estimate_resolver_giving_none_is_a_400_naming_the_field():
    """A resolver of the cost or the estimate that gives nothing (a missing
    header or JSON field) is bad input: 400 naming the field, before any
    Redis call — as the Spring starter answers a null cost expression and the
    Node adapters an undefined one — never a silent charge of 1."""
    metered = Policy("m", [quota("tokens", "UTC", "day", 1000, metered=True)])
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=1), check_module=False))  # never reached
    app = FastAPI()
    limits.install(app)
    n = lambda r: r.headers.get("X-N") and int(r.headers["X-N"])  # noqa: E731

    @app.get("/scope")
    async def scoped(p=Depends(limits.scope(metered, key=lambda r: "k", estimate=n))):
        return {}

    @app.get("/cost", dependencies=[Depends(limits.depends(POLICY, key=lambda r: "k", cost=n))])
    async def costed():
        return {}

    @app.get("/both")
    async def both(p=Depends(limits.scope([limits.bind(metered, lambda r: "k", estimate=n),
                                           limits.bind(POLICY, lambda r: "j")]))):
        return {}

    with TestClient(app) as c:
        for url, field in (("/scope", "estimate"), ("/cost", "cost"), ("/both", "estimate")):
            r = c.get(url)
            assert r.status_code == 400 and r.json()["type"].endswith("/bad-request"), (url, r.text)
            assert field in r.json()["detail"], (url, r.text)

    flimits = FlaskRateLimits(RateLimiter(redis.Redis(port=1), check_module=False))
    fapp = flask.Flask(__name__)
    fn = lambda: flask.request.headers.get("X-N") and int(flask.request.headers["X-N"])  # noqa: E731

    @fapp.get("/scope")
    @flimits.limit(metered, key=lambda: "k", estimate=fn, scope=True)
    def fscoped():
        return "ok"

    @fapp.get("/cost")
    @flimits.limit(POLICY, key=lambda: "k", cost=fn)
    def fcosted():
        return "ok"

    fc = fapp.test_client()
    for url, field in (("/scope", "estimate"), ("/cost", "cost")):
        r = fc.get(url)
        assert r.status_code == 400 and r.json["type"].endswith("/bad-request") and field in r.json["detail"], r.text
