"""The Flask decorator: headers on admission, 429 problem JSON with
Retry-After, the client IP behind trusted proxies, a scope that settles, and
fail open / closed when Redis cannot be reached (fast, once per outage)."""

from __future__ import annotations

import time
from datetime import timedelta

import flask
import redis

from redis_rl import FAIL_OPEN, Policy, RateLimiter, concurrency, quota, sliding_window
from redis_rl.adapters.flask import FlaskRateLimits

S = timedelta(seconds=1)


def make_app(client, prefix):
    app = flask.Flask(__name__)
    limits = FlaskRateLimits(RateLimiter(client))
    per_ip = Policy("ip", [sliding_window("custom", 2, 30 * S)], prefix=prefix)
    opened = Policy("open", [sliding_window("default", 2, 30 * S)], prefix=prefix, fail=FAIL_OPEN)
    jobs = Policy("jobs", [concurrency("inflight", 1, 60 * S), quota("units", "UTC", "day", 100, metered=True)],
                  prefix=prefix)

    @app.get("/ip")
    @limits.limit(per_ip, key=limits.client_ip, x_ratelimit=True)
    def ip():
        return {"ip": limits.client_ip()}

    @app.get("/open")
    @limits.limit(opened, key=lambda: "all")
    def open_():
        return "ok"

    @app.post("/job")
    @limits.limit(jobs, key=lambda: "j", scope=True, estimate=lambda: 10)
    def job():
        flask.g.rate_limit_permit.used(int(flask.request.args.get("used", "0")))
        if flask.request.args.get("fail"):
            raise RuntimeError("job failed")
        return "done"

    open_jobs = Policy("open-jobs", [concurrency("inflight", 1, 60 * S)], prefix=prefix, fail=FAIL_OPEN)

    @app.post("/open-job")
    @limits.limit(open_jobs, key=lambda: "j", scope=True)
    def open_job():
        permit = flask.g.rate_limit_permit  # None when failing open
        return "done" if permit is None else f"held {permit.token is not None}"

    app.config["PROPAGATE_EXCEPTIONS"] = False
    return app


def test_flask_decorator_answers(server, raw, key):
    app = make_app(server.client(), key)
    c = app.test_client()
    xff = {"X-Forwarded-For": "203.0.113.1, 198.51.100.2"}
    r = c.get("/ip", headers=xff, environ_base={"REMOTE_ADDR": "127.0.0.1"})
    assert r.status_code == 200 and r.json == {"ip": "198.51.100.2"}
    assert r.headers["RateLimit-Policy"] == '"custom";q=2;w=30'
    assert r.headers["RateLimit"] == '"custom";r=1;t=30' and r.headers["X-RateLimit-Remaining"] == "1"
    c.get("/ip", headers=xff, environ_base={"REMOTE_ADDR": "127.0.0.1"})
    refused = c.get("/ip", headers=xff, environ_base={"REMOTE_ADDR": "127.0.0.1"})
    assert refused.status_code == 429 and refused.headers["Content-Type"] == "application/problem+json"
    assert refused.json["type"].endswith("/rate-limited") and refused.headers["Retry-After"] == "30"
    # an untrusted peer's X-Forwarded-For is ignored: the peer is the client
    other = c.get("/ip", headers=xff, environ_base={"REMOTE_ADDR": "192.0.2.9"})
    assert other.status_code == 200 and other.json == {"ip": "192.0.2.9"}

    assert c.post("/job?used=3").status_code == 200
    assert c.post("/job?used=4&fail=1").status_code == 500
    units = raw.execute_command("RL.QUOTAPEEK", f"{key}jobs:{{j}}:units", "*", "UTC", "DAY", 100, "COST", 0)
    assert 100 - units[3] == 7  # 3 used, then 4 reported before the failure
    assert raw.execute_command("RL.LEASEPEEK", f"{key}jobs:{{j}}:inflight", "*", 1, "COST", 0)[3] == 1


def test_flask_fail_open_and_closed_without_redis():
    client = redis.Redis(host="127.0.0.1", port=1, socket_timeout=0.5, socket_connect_timeout=0.5)
    app = make_app(client, "x:")
    c = app.test_client()
    t0 = time.monotonic()
    closed = c.get("/ip")
    assert closed.status_code == 503 and closed.json["type"].endswith("/unavailable")
    opened = c.get("/open")
    assert opened.status_code == 200 and "RateLimit" not in opened.headers
    # a scope failing open: the view runs, its permit is None (not missing)
    job = c.post("/open-job")
    assert (job.status_code, job.text) == (200, "done")
    assert time.monotonic() - t0 < 1.0


def test_flask_scope_holds_a_stream_until_its_body_is_sent(server, raw, key):
    """A streamed response is sent after the view returns: its lease stays held
    and its estimate stands until the WSGI response closes, then used(n)
    reported by the stream's end settles it (was: released and refunded when
    the view returned, before the first chunk)."""
    app = flask.Flask(__name__)
    limits = FlaskRateLimits(RateLimiter(server.client()))
    jobs = Policy("stream", [concurrency("inflight", 1, 60 * S), quota("units", "UTC", "day", 100, metered=True)],
                  prefix=key)

    @app.get("/stream")
    @limits.limit(jobs, key=lambda: "s", scope=True, estimate=lambda: 10)
    def stream():
        permit = flask.g.rate_limit_permit

        def body():
            yield "a"
            yield "b"
            permit.used(4)
        return flask.Response(body())

    def free_slots():
        return raw.execute_command("RL.LEASEPEEK", f"{key}stream:{{s}}:inflight", "*", 1, "COST", 0)[3]

    def left():
        return raw.execute_command("RL.QUOTAPEEK", f"{key}stream:{{s}}:units", "*", "UTC", "DAY", 100, "COST", 0)[3]

    c = app.test_client()
    first = c.get("/stream", buffered=False)
    assert first.status_code == 200
    assert free_slots() == 0 and left() == 90  # the view returned; the body is not sent yet
    assert c.get("/stream").status_code == 429  # its slot is still taken
    assert b"".join(first.response) == b"ab"
    first.close()
    assert free_slots() == 1 and left() == 96  # released on close, settled to the 4 used
    again = c.get("/stream")
    assert again.status_code == 200 and again.data == b"ab"
    again.close()  # what a WSGI server does once the body is sent
    assert free_slots() == 1 and left() == 92


def test_flask_header_key_missing_or_empty_is_a_401_problem_before_any_call(server, raw, key):
    # FlaskRateLimits.header(name), as RateLimits.header in FastAPI and
    # DjangoRateLimits.header: the key from a header; missing or empty is a
    # 401 problem+json (or 400 when asked), and nothing reaches Redis.
    app = flask.Flask(__name__)
    limits = FlaskRateLimits(RateLimiter(server.client()))
    per_key = Policy("k", [sliding_window("w", 2, 30 * S)], prefix=key)

    @app.get("/items")
    @limits.limit(per_key, key=limits.header("X-Api-Key"))
    def items():
        return {"ok": True}

    @app.get("/tenant")
    @limits.limit(per_key, key=limits.header("X-Tenant", problem="bad_request"))
    def tenant():
        return {"ok": True}

    c = app.test_client()
    for headers in ({}, {"X-Api-Key": ""}):
        r = c.get("/items", headers=headers)
        assert r.status_code == 401
        assert r.headers["Content-Type"] == "application/problem+json"
        assert r.get_json(force=True)["type"].endswith("/unauthorized")
        assert "X-Api-Key" in r.get_json(force=True)["detail"]
    r = c.get("/tenant")
    assert r.status_code == 400 and r.get_json(force=True)["type"].endswith("/bad-request")
    assert raw.keys(f"{key}*") == []
    assert [c.get("/items", headers={"X-Api-Key": "a"}).status_code for _ in range(3)] == [200, 200, 429]
    assert c.get("/items", headers={"X-Api-Key": "b"}).headers["RateLimit"] == '"w";r=1;t=30'
