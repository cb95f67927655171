"""SERVICES.md's endpoints 3, 5 and 6 (and /health) on Flask with redis_rl's
sync adapter (FlaskRateLimits over redis-py): the Python sync column of
docs/guides/faults.md's fault table (integration/faults_table.py starts it).
The same policies, keys and answers as examples/python (FastAPI).
Run: `make example-flask` (PORT, REDIS_URL or REDIS_CLUSTER, RL_PREFIX,
RL_BACKEND: module (default), functions or auto)."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

import flask
import redis
from redis.cluster import ClusterNode, RedisCluster
from redis_rl import (FAIL_OPEN, Policy, RateLimiter, concurrency, quota, sliding_window, token_bucket)
from redis_rl.adapters.flask import FlaskRateLimits
from redis_rl.args import zone_arg

PREFIX = os.environ.get("RL_PREFIX", "")
S = timedelta(seconds=1)


def redis_client():
    # The sync guard's budget is the socket timeout (README "Redis down"): 0.5 s, as the
    # decision budget of the other apps; a reply later than that is dropped (CLIENTS.md
    # exempts the sync guard from the late give-back).
    opts = dict(socket_timeout=0.5, socket_connect_timeout=0.5)
    cluster = os.environ.get("REDIS_CLUSTER")
    if cluster:
        seeds = [ClusterNode(h, int(p)) for h, p in (s.rsplit(":", 1) for s in cluster.split(",") if s)]
        return RedisCluster(startup_nodes=seeds, **opts)
    return redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"), **opts)


limiter = RateLimiter(redis_client(), backend=os.environ.get("RL_BACKEND") or "module")
limits = FlaskRateLimits(limiter)

api_default = Policy("api-default", [sliding_window("default", 10, 60 * S)], prefix=PREFIX, fail=FAIL_OPEN)
api_custom = Policy("api-custom", [sliding_window("custom", 5, 30 * S)], prefix=PREFIX)
api_user = Policy("api-user", [sliding_window("user", 3, 60 * S)], prefix=PREFIX)
llm = Policy("llm", [token_bucket("rate", 60, 60 * S, burst=10), concurrency("inflight", 2, 60 * S),
                     quota("tokens", None, "day", 100_000, metered=True),
                     sliding_window("global", 1000, 60 * S, shared=True)], prefix=PREFIX, tag="llm")

app = flask.Flask(__name__)


class BadInput(Exception):
    pass


@app.errorhandler(BadInput)
def bad_input(e: BadInput):
    body = {"type": "https://redis-ratelimit.dev/problems/bad-request", "title": "Bad Request", "status": 400,
            "detail": str(e)}
    return flask.Response(json.dumps(body), status=400, mimetype="application/problem+json")


# The knobs' caps, as the other example apps: a sleep no longer than the
# longest a Node timer waits (2^31-1 ms), a stream of at most 10,000 lines.
MAX_SLEEP_MS = 2**31 - 1
MAX_LINES = 10_000


def header_int(name: str, default: int, cap: int) -> int:
    """The fake model's knobs: a non-negative integer header (above `cap` counts as `cap`), else the default."""
    value = flask.request.headers.get(name, "")
    if not (value.isascii() and value.isdigit()):  # "²" is a digit to isdigit, not to int
        return default
    # More digits than the cap has is above it (int() refuses beyond 4300 digits).
    return cap if len(value.lstrip("0")) > len(str(cap)) else min(int(value), cap)


def max_tokens() -> int:
    try:
        body = flask.request.get_json(silent=True)
    except RecursionError:  # nested past the interpreter's stack (~1000 deep): silent=True catches only ValueError
        body = None
    n = body.get("max_tokens") if isinstance(body, dict) else None
    if type(n) is not int or not 1 <= n <= 100_000:
        raise BadInput("max_tokens must be an integer from 1 to 100000")
    return n


def llm_zone() -> str:
    zone = flask.request.headers.get("X-Zone", "")
    try:
        if zone[:1] in ("+", "-"):
            raise ValueError(zone)
        return zone_arg(zone)
    except ValueError:
        raise BadInput("X-Zone must be an IANA time zone") from None


# Missing or empty: a 401 problem+json (SERVICES.md), before any Redis call.
llm_key = limits.header("X-Api-Key")


@app.get("/health")
def health():
    return {"status": "up"}


@app.get("/seed002/api/default")
@limits.limit(api_default, key=limits.client_ip, x_ratelimit=True)
def api_default_endpoint():
    return {"endpoint": "default"}


@app.get("/seed002/api/custom")
@limits.limit(api_custom, key=limits.client_ip, x_ratelimit=True)
def api_custom_endpoint():
    return {"endpoint": "custom"}


@app.get("/seed002/api/user/<user_id>")
@limits.limit(api_user, key=lambda: flask.request.view_args["user_id"], x_ratelimit=True)
def api_user_endpoint(user_id: str):
    return {"user": user_id}


@app.post("/llm/complete")
@limits.limit(llm, key=llm_key, zone=llm_zone, estimate=max_tokens, scope=True)
def complete():
    n = max_tokens()
    time.sleep(header_int("X-Sleep-Ms", 100, MAX_SLEEP_MS) / 1000)
    if flask.request.headers.get("X-Fail") == "1":
        raise RuntimeError("the model failed")
    used = min(n, header_int("X-Used-Tokens", n // 2, n))
    if flask.g.rate_limit_permit is not None:
        flask.g.rate_limit_permit.used(used)
    return {"used_tokens": used}


@app.post("/llm/stream")
@limits.limit(llm, key=llm_key, zone=llm_zone, estimate=max_tokens, scope=True)
def stream():
    # The adapter's scope ends when this view returns, before Flask sends the
    # streamed body: the lease and the estimate are settled then, not after the
    # last byte (what the fault table's stream row measures).
    n = max_tokens()
    if flask.request.headers.get("X-Fail") == "1":
        raise RuntimeError("the model failed")
    used = min(n, header_int("X-Used-Tokens", n // 2, n))
    lines = max(1, header_int("X-Sleep-Ms", 100, MAX_LINES * 100) // 100)
    permit = flask.g.rate_limit_permit
    if permit is not None:
        permit.used(used)

    def ndjson():
        sent = 0
        for i in range(lines):
            time.sleep(0.1)
            k = used - sent if i == lines - 1 else used // lines
            yield json.dumps({"tokens": k}) + "\n"
            sent += k
        yield json.dumps({"used_tokens": used}) + "\n"
    return flask.Response(ndjson(), mimetype="application/x-ndjson")


def main() -> None:
    try:
        limiter.ensure_module()  # the module (or, for functions/auto, the library loaded) at start
    except Exception as e:  # noqa: BLE001 (one line, then a non-zero exit: SERVICES.md)
        print(f"example-flask: {e}", file=sys.stderr)
        sys.exit(1)
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8080")), threaded=True)


if __name__ == "__main__":
    main()
