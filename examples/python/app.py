"""The seed services (shared/SERVICES.md) with redis_rl's ordinary API:
policies, the FastAPI dependency, scope and middleware — no RL command
written by hand. Run: `make example-python` (PORT, REDIS_URL or
REDIS_CLUSTER, RL_PREFIX, RL_BACKEND: module (default), functions or auto)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import sys
import zoneinfo
from datetime import timedelta
from typing import Any

import redis
import redis.asyncio
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import StreamingResponse
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from redis_rl import (FAIL_OPEN, AsyncRateLimiter, Policy, concurrency, lockout, quota, sliding_window,
                      token_bucket)
from redis_rl.adapters.starlette import ProblemError, RateLimitMiddleware, RateLimits
from redis_rl.args import zone_arg
from redis_rl.backend import backend_arg, functions_zone

PREFIX = os.environ.get("RL_PREFIX", "")
S = timedelta(seconds=1)
SHANGHAI = zoneinfo.ZoneInfo("Asia/Shanghai")


def cluster_seeds(value: str) -> list[tuple[str, int]]:
    """REDIS_CLUSTER's ``host:port,host:port,...``; ValueError saying what is wrong (a typo is a
    one-line refusal at start, not a traceback)."""
    seeds = []
    for s in value.split(","):
        host, colon, port = s.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port,host:port,... but one seed is {s!r}")
        seeds.append((host, int(port)))
    return seeds


def redis_client() -> Any:
    # One retry on a broken connection (a restarted Redis leaves stale pooled
    # sockets). The 500 ms budget bounds every decision; the socket waits
    # 11 s (at least the budget + 10 s: shorter is refused at start), so a
    # reply that lands after the budget is still read and the guard gives
    # the whole admission back (a socket timeout would drop it).
    opts: dict[str, Any] = dict(socket_timeout=11.0, socket_connect_timeout=0.5,
                                retry=Retry(NoBackoff(), 1),
                                retry_on_error=[redis.exceptions.ConnectionError])
    cluster = os.environ.get("REDIS_CLUSTER")
    if cluster:
        seeds = [ClusterNode(h, p) for h, p in cluster_seeds(cluster)]
        return RedisCluster(startup_nodes=seeds, socket_timeout=11.0, socket_connect_timeout=0.5)
    return redis.asyncio.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"), **opts)


try:  # a bad setting is one line and a non-zero exit at start (as the module missing), not a traceback
    BACKEND = backend_arg(os.environ.get("RL_BACKEND") or "module")
except ValueError as e:
    sys.exit(f"example-python: RL_BACKEND: {e}")
try:
    client = redis_client()
except ValueError as e:  # a malformed REDIS_CLUSTER or REDIS_URL (redis-py's own check of the URL)
    sys.exit(f"example-python: {'REDIS_CLUSTER' if os.environ.get('REDIS_CLUSTER') else 'REDIS_URL'}: {e}")
limiter = AsyncRateLimiter(client, backend=BACKEND)
limits = RateLimits(limiter)

# --- policies (SERVICES.md "Endpoints") ---
sms = Policy("sms", [sliding_window("short", 2, 10 * S), sliding_window("long", 5, 3600 * S),
                     sliding_window("duplicate", 1, 5 * S, subkey=True, problem="duplicate")], prefix=PREFIX)
ocr = Policy("ocr", [quota("day", SHANGHAI, "day", 20), quota("hour", SHANGHAI, "hour", 5)],
             prefix=PREFIX)
api_default = Policy("api-default", [sliding_window("default", 10, 60 * S)], prefix=PREFIX, fail=FAIL_OPEN)
api_custom = Policy("api-custom", [sliding_window("custom", 5, 30 * S)], prefix=PREFIX)
api_user = Policy("api-user", [sliding_window("user", 3, 60 * S)], prefix=PREFIX)
login = Policy("login", [lockout("login", 5, 10 * S, 30 * S)], prefix=PREFIX)
llm = Policy("llm", [token_bucket("rate", 60, 60 * S, burst=10), concurrency("inflight", 2, 60 * S),
                     quota("tokens", None, "day", 100_000, metered=True),
                     sliding_window("global", 1000, 60 * S, shared=True)], prefix=PREFIX, tag="llm")


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI):
    # The limits set at run time (PUT /admin/limits/ocr, on any instance of any
    # example app) are the client's runtime limits (<prefix>ratelimit:limits,
    # re-read every 250 ms): read once before serving, so an instance started
    # later uses them from its first request (Redis down: read again every 250 ms).
    await limiter.runtime_limits.load(ocr)
    yield
    limiter.runtime_limits.close()


app = FastAPI(lifespan=lifespan)
limits.install(app)


class ModelError(Exception):
    """The fake model's failure (X-Fail: 1): the scope sees it and settles to 0."""


@app.exception_handler(ModelError)
async def model_failed(request: Request, exc: ModelError) -> Response:
    body = json.dumps({"type": "https://redis-ratelimit.dev/problems/model-failed", "title": "Internal Server Error",
                       "status": 500, "detail": str(exc)})
    return Response(body, status_code=500, media_type="application/problem+json")

app.add_middleware(RateLimitMiddleware, limits=limits, x_ratelimit=True, routes={
    "/seed002/api/default": (api_default, limits.client_ip),
    "/seed002/api/custom": (api_custom, limits.client_ip),
})


async def json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's stack (~1000 deep)
        raise ProblemError.bad_request("the body is not valid JSON") from None


async def phone(request: Request) -> str:
    body = await json_body(request)
    value = body.get("phone") if isinstance(body, dict) else None
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{1,20}", value):
        raise ProblemError.bad_request("phone must be 1 to 20 digits")
    return value


async def body_digest(request: Request) -> dict[str, str]:
    return {"duplicate": hashlib.sha256(await request.body()).hexdigest()[:32]}


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "up"}


@app.post("/seed000/sms", dependencies=[Depends(limits.depends(sms, key=phone, subkeys=body_digest))])
async def send_sms() -> dict[str, bool]:
    return {"sent": True}


@app.post("/seed001/ocr", dependencies=[Depends(limits.depends(ocr, key=limits.header("X-User")))])
async def run_ocr() -> dict[str, bool]:
    return {"done": True}


@app.put("/admin/limits/ocr", status_code=204)
async def set_ocr_limits(request: Request) -> Response:
    body = await json_body(request)
    if (not isinstance(body, dict) or set(body) != {"day", "hour"}
            or not all(type(v) is int and v >= 0 for v in body.values())):
        raise ProblemError.bad_request('expected {"day": D, "hour": H} with integers >= 0')
    try:
        await limiter.runtime_limits.set(ocr, body)
    except ValueError as e:  # above 2^53-1
        raise ProblemError.bad_request(str(e)) from None
    return Response(status_code=204)


@app.get("/admin/limits/ocr")
async def get_ocr_limits() -> dict[str, int]:
    return await limiter.runtime_limits.get(ocr)


@app.get("/seed002/api/default")
async def api_default_endpoint() -> dict[str, str]:
    return {"endpoint": "default"}


@app.get("/seed002/api/custom")
async def api_custom_endpoint() -> dict[str, str]:
    return {"endpoint": "custom"}


@app.get("/seed002/api/user/{user_id}",
         dependencies=[Depends(limits.depends(api_user, key=lambda r: r.path_params["user_id"], x_ratelimit=True))])
async def api_user_endpoint(user_id: str) -> dict[str, str]:
    return {"user": user_id}


@app.post("/seed004/login",
          dependencies=[Depends(limits.depends(login, key=lambda r: f"{limits.client_ip(r)}:{r.url.path}"))])
async def do_login() -> dict[str, bool]:
    return {"ok": True}


async def llm_zone(request: Request) -> str:
    zone = request.headers.get("X-Zone", "")
    try:
        if zone[:1] in ("+", "-"):  # a fixed offset: RL.QUOTA takes it, but it is no IANA zone
            raise ValueError(zone)
        zone = zone_arg(zone)  # the package's own check, before any Redis call
    except ValueError:
        raise ProblemError.bad_request("X-Zone must be an IANA time zone") from None
    if limiter.backend == "functions":
        try:
            functions_zone(zone)  # the library takes fixed-offset zones only: daylight saving is refused
        except ValueError as e:
            raise ProblemError.bad_request(str(e)) from None
    return zone


async def max_tokens(request: Request) -> int:
    body = await json_body(request)
    n = body.get("max_tokens") if isinstance(body, dict) else None
    if type(n) is not int or not 1 <= n <= 100_000:
        raise ProblemError.bad_request("max_tokens must be an integer from 1 to 100000")
    return n


async def llm_key(request: Request) -> str:
    key = RateLimits.header("X-Api-Key")(request)
    await llm_zone(request)
    await max_tokens(request)
    return key


# The knobs' caps, as the other example apps: a sleep no longer than the
# longest a Node timer waits (2^31-1 ms), a stream of at most 10,000 lines.
MAX_SLEEP_MS = 2**31 - 1
MAX_LINES = 10_000


def header_int(request: Request, name: str, default: int, cap: int) -> int:
    """The fake model's knobs: a non-negative integer header (above `cap` counts as `cap`), else the default."""
    value = request.headers.get(name, "")
    if not (value.isascii() and value.isdigit()):  # "²" is a digit to isdigit, not to int
        return default
    # More digits than the cap has is above it (int() refuses beyond 4300 digits).
    return cap if len(value.lstrip("0")) > len(str(cap)) else min(int(value), cap)


@app.post("/llm/complete")
async def complete(request: Request,
                   # scope="function": the lease and the estimate are settled when the model
                   # call ends, before the answer is sent (not after it).
                   permit=Depends(limits.scope(llm, key=llm_key, estimate=max_tokens, zone=llm_zone), scope="function"),
                   n: int = Depends(max_tokens)):
    # The fake model: sleeps, then "uses" X-Used-Tokens (at most N) or raises.
    await asyncio.sleep(header_int(request, "X-Sleep-Ms", 100, MAX_SLEEP_MS) / 1000)
    if request.headers.get("X-Fail") == "1":
        raise ModelError("the model failed")
    used = min(n, header_int(request, "X-Used-Tokens", n // 2, n))
    if permit is not None:
        permit.used(used)
    return {"used_tokens": used}


def rate_limit_headers(response: Response) -> dict[str, str]:
    """The RateLimit headers the dependency put on FastAPI's response object:
    a Response the endpoint returns itself (a stream) carries them only if given."""
    return {k: v for k, v in response.headers.items() if k.startswith(("ratelimit", "x-ratelimit"))}


@app.post("/llm/stream")
async def stream(request: Request, response: Response,
                 # The default dependency scope: the lease is held until the
                 # stream's last byte is sent, the budget settled after it.
                 permit=Depends(limits.scope(llm, key=llm_key, estimate=max_tokens, zone=llm_zone)),
                 n: int = Depends(max_tokens)) -> StreamingResponse:
    if request.headers.get("X-Fail") == "1":
        raise ModelError("the model failed")  # a 500 before the first byte; settled to 0
    used = min(n, header_int(request, "X-Used-Tokens", n // 2, n))
    lines = max(1, header_int(request, "X-Sleep-Ms", 100, MAX_LINES * 100) // 100)

    async def ndjson():
        sent = 0
        try:
            for i in range(lines):
                await asyncio.sleep(0.1)
                if await request.is_disconnected():  # the caller left: stop, settled to what was sent
                    return
                k = used - sent if i == lines - 1 else used // lines
                yield json.dumps({"tokens": k}) + "\n"
                sent += k
            yield json.dumps({"used_tokens": used}) + "\n"
        finally:  # also when Starlette stops the stream of a client that left
            if permit is not None:
                permit.used(sent)
    return StreamingResponse(ndjson(), media_type="application/x-ndjson", headers=rate_limit_headers(response))


def main() -> None:
    import uvicorn

    from redis.cluster import ClusterNode as SyncNode
    from redis.cluster import RedisCluster as SyncCluster

    from redis_rl import RateLimiter
    cluster = os.environ.get("REDIS_CLUSTER")
    try:  # the backend check at start (the library loaded for "functions"), with a sync client (the app's own is bound to uvicorn's loop)
        if cluster:
            seeds = [SyncNode(h, p) for h, p in cluster_seeds(cluster)]
            sync = SyncCluster(startup_nodes=seeds)
        else:
            sync = redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
        checker = RateLimiter(sync, backend=BACKEND)
        checker.ensure_module()
        limiter.backend = checker.backend  # "auto": the engine found at start
        sync.close()
    except Exception as e:  # one line, non-zero exit (SERVICES.md)
        print(f"example-python: {e}", file=sys.stderr)
        sys.exit(1)
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8080")), log_level="warning")


if __name__ == "__main__":
    main()
