"""A 429's ``RateLimit`` items in every adapter (FastAPI, Flask; Django: test_django.py): the
refused rule shows what is left, which a refusal does not change (1 left, a
cost of 2 refused: ``r=1``, not 0 nor what a charge would leave), and a rule
that would admit shows what it would leave with the request counted
(SERVICES.md, CLIENTS.md §5; the golden cases ``d-window-refuse-cost-left``
and ``d-windows-refuse-cost-left`` check the same from replies)."""

from __future__ import annotations

import re
from datetime import timedelta

import flask
import redis
import redis.asyncio
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from redis_rl import AsyncRateLimiter, Policy, RateLimiter, sliding_window
from redis_rl.adapters.flask import FlaskRateLimits
from redis_rl.adapters.starlette import RateLimits

S = timedelta(seconds=1)
COSTS = [2, 2, 2]  # 5 - 2 - 2 = 1 left; the third (2) is refused


def policies(prefix):
    one = Policy("one", [sliding_window("w", 5, 30 * S)], prefix=prefix)
    two = Policy("two", [sliding_window("short", 5, 30 * S), sliding_window("long", 100, 3600 * S)], prefix=prefix)
    return one, two


def check(answers):
    """``answers[name]``: (status, RateLimit) per call; only ``r`` is compared (``t`` moves with the clock)."""
    answers = {name: [(status, re.sub(r";t=\d+", "", h)) for status, h in calls] for name, calls in answers.items()}
    (a1, h1), (a2, h2), (a3, h3) = answers["one"]
    assert [a1, a2, a3] == [200, 200, 429]
    assert h2 == '"w";r=1' and h3 == '"w";r=1', (h2, h3)
    (b1, _), (b2, g2), (b3, g3) = answers["two"]
    assert [b1, b2, b3] == [200, 200, 429]
    assert g2 == '"short";r=1, "long";r=96'
    assert g3 == '"short";r=1, "long";r=94', g3


def test_fastapi(server, key):
    limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(port=server.port)))
    app = FastAPI()
    limits.install(app)
    cost = lambda r: int(r.query_params["cost"])  # noqa: E731
    for p in policies(key):
        app.add_api_route(f"/{p.name}", lambda: {}, dependencies=[Depends(limits.depends(p, key=lambda r: "k", cost=cost))])
    with TestClient(app) as c:
        check({name: [(r.status_code, r.headers["RateLimit"]) for r in (c.get(f"/{name}?cost={n}") for n in COSTS)]
               for name in ("one", "two")})


def test_flask(server, key):
    limits = FlaskRateLimits(RateLimiter(redis.Redis(port=server.port, socket_timeout=0.5)))
    app = flask.Flask(__name__)
    for p in policies(key):
        app.add_url_rule(f"/{p.name}", p.name, limits.limit(p, key=lambda: "k",
                                                            cost=lambda: int(flask.request.args["cost"]))(lambda: "ok"))
    c = app.test_client()
    check({name: [(r.status_code, r.headers["RateLimit"]) for r in (c.get(f"/{name}?cost={n}") for n in COSTS)]
           for name in ("one", "two")})

