"""The seed services (shared/SERVICES.md) as a one-file Django project with
redis_rl's Django adapter: the view decorator on async views (and on a sync
one: endpoint 4's login, decided through the sync client), the middleware,
scopes — no RL command written by hand. Served by uvicorn (ASGI). Run:
`make example-django` (PORT, REDIS_URL or REDIS_CLUSTER, RL_PREFIX,
RL_BACKEND: module (default), functions or auto).
The same policies, keys and answers as examples/python (FastAPI): the two
apps are one service on one Redis."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sys
import zoneinfo
from datetime import timedelta
from typing import Any

import django
import redis
import redis.asyncio
from django.conf import settings

settings.configure(
    DEBUG=False, ALLOWED_HOSTS=["127.0.0.1", "localhost"], ROOT_URLCONF=__name__, DATABASES={}, INSTALLED_APPS=[],
    USE_TZ=True, SECRET_KEY="example-django: no sessions, no signing",
    # endpoint 3's two IP-keyed APIs are limited by the middleware
    MIDDLEWARE=[f"{__name__}.RateLimitMiddleware"])
django.setup()

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.http import require_http_methods  # noqa: E402
from redis.asyncio.cluster import ClusterNode, RedisCluster  # noqa: E402
from redis.asyncio.retry import Retry  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402
from redis.cluster import ClusterNode as SyncNode  # noqa: E402
from redis.cluster import RedisCluster as SyncCluster  # noqa: E402

from redis_rl import (FAIL_OPEN, AsyncRateLimiter, Policy, RateLimiter, concurrency, lockout, quota,  # noqa: E402
                      sliding_window, token_bucket)
from redis_rl.adapters.django import DjangoRateLimits, ProblemError  # noqa: E402
from redis_rl.args import zone_arg  # noqa: E402
from redis_rl.backend import backend_arg, functions_zone  # noqa: E402

PREFIX = os.environ.get("RL_PREFIX", "")
try:  # a bad setting is one line and a non-zero exit at start (as the module missing), not a traceback
    BACKEND = backend_arg(os.environ.get("RL_BACKEND") or "module")
except ValueError as e:
    sys.exit(f"example-django: RL_BACKEND: {e}")
URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
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


try:
    CLUSTER = cluster_seeds(os.environ["REDIS_CLUSTER"]) if os.environ.get("REDIS_CLUSTER") else []
except ValueError as e:
    sys.exit(f"example-django: REDIS_CLUSTER: {e}")


def async_client() -> Any:
    # As examples/python: the 500 ms budget bounds each decision; the socket
    # waits 11 s (budget + 10 s) so a late reply is read and given back.
    if CLUSTER:
        return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in CLUSTER], socket_timeout=11.0,
                            socket_connect_timeout=0.5)
    return redis.asyncio.from_url(URL, socket_timeout=11.0, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 1),
                                  retry_on_error=[redis.exceptions.ConnectionError])


def sync_client() -> Any:
    # The sync views' budget is the socket timeout (redis_rl's sync guard).
    if CLUSTER:
        return SyncCluster(startup_nodes=[SyncNode(h, p) for h, p in CLUSTER], socket_timeout=0.5,
                           socket_connect_timeout=0.5)
    return redis.from_url(URL, socket_timeout=0.5, socket_connect_timeout=0.5)


try:
    client = async_client()
    sync = sync_client()
except ValueError as e:  # a malformed REDIS_URL (redis-py's own check)
    sys.exit(f"example-django: REDIS_URL: {e}")
limiter = AsyncRateLimiter(client, backend=BACKEND)
sync_limiter = RateLimiter(sync, backend=BACKEND)
limits = DjangoRateLimits(sync_limiter, async_limiter=limiter)

# --- policies (SERVICES.md "Endpoints"), as examples/python declares them ---
sms = Policy("sms", [sliding_window("short", 2, 10 * S), sliding_window("long", 5, 3600 * S),
                     sliding_window("duplicate", 1, 5 * S, subkey=True, problem="duplicate")], prefix=PREFIX)
ocr = Policy("ocr", [quota("day", SHANGHAI, "day", 20), quota("hour", SHANGHAI, "hour", 5)], prefix=PREFIX)
api_default = Policy("api-default", [sliding_window("default", 10, 60 * S)], prefix=PREFIX, fail=FAIL_OPEN)
api_custom = Policy("api-custom", [sliding_window("custom", 5, 30 * S)], prefix=PREFIX)
api_user = Policy("api-user", [sliding_window("user", 3, 60 * S)], prefix=PREFIX)
login = Policy("login", [lockout("login", 5, 10 * S, 30 * S)], prefix=PREFIX)
llm = Policy("llm", [token_bucket("rate", 60, 60 * S, burst=10), concurrency("inflight", 2, 60 * S),
                     quota("tokens", None, "day", 100_000, metered=True),
                     sliding_window("global", 1000, 60 * S, shared=True)], prefix=PREFIX, tag="llm")

# OCR limits changed at run time (PUT /admin/limits/ocr, on any instance of any
# example app) are the client's runtime limits (<prefix>ratelimit:limits, read
# before the first decision and every 250 ms; redis_rl.overrides).

RateLimitMiddleware = limits.middleware({"/seed002/api/default": (api_default, limits.client_ip),
                                         "/seed002/api/custom": (api_custom, limits.client_ip)}, x_ratelimit=True)


def problem(status: int, kind: str, title: str, detail: str) -> HttpResponse:
    body = json.dumps({"type": f"https://redis-ratelimit.dev/problems/{kind}", "title": title, "status": status,
                       "detail": detail})
    return HttpResponse(body, status=status, content_type="application/problem+json")


def json_body(request: HttpRequest) -> Any:
    try:
        return json.loads(request.body)
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's stack (~1000 deep)
        raise ProblemError.bad_request("the body is not valid JSON") from None


def phone(request: HttpRequest) -> str:
    body = json_body(request)
    value = body.get("phone") if isinstance(body, dict) else None
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{1,20}", value):
        raise ProblemError.bad_request("phone must be 1 to 20 digits")
    return value


def body_digest(request: HttpRequest) -> dict[str, str]:
    return {"duplicate": hashlib.sha256(request.body).hexdigest()[:32]}


def llm_zone(request: HttpRequest) -> str:
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


def max_tokens(request: HttpRequest) -> int:
    body = json_body(request)
    n = body.get("max_tokens") if isinstance(body, dict) else None
    if type(n) is not int or not 1 <= n <= 100_000:
        raise ProblemError.bad_request("max_tokens must be an integer from 1 to 100000")
    return n


def llm_key(request: HttpRequest) -> str:
    key = DjangoRateLimits.header("X-Api-Key")(request)
    llm_zone(request)
    max_tokens(request)
    return key


# The knobs' caps, as the other example apps: a sleep no longer than the
# longest a Node timer waits (2^31-1 ms), a stream of at most 10,000 lines.
MAX_SLEEP_MS = 2**31 - 1
MAX_LINES = 10_000


def header_int(request: HttpRequest, name: str, default: int, cap: int) -> int:
    """The fake model's knobs: a non-negative integer header (above `cap` counts as `cap`), else the default."""
    value = request.headers.get(name, "")
    if not (value.isascii() and value.isdigit()):  # "²" is a digit to isdigit, not to int
        return default
    # More digits than the cap has is above it (int() refuses beyond 4300 digits).
    return cap if len(value.lstrip("0")) > len(str(cap)) else min(int(value), cap)


async def health(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "up"})


@require_http_methods(["POST"])
@limits.limit(sms, key=phone, subkeys=body_digest)
async def send_sms(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"sent": True})


@require_http_methods(["POST"])
@limits.limit(ocr, key=DjangoRateLimits.header("X-User"))
async def run_ocr(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"done": True})


@require_http_methods(["GET", "PUT"])
async def ocr_limits_view(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return JsonResponse(await limiter.runtime_limits.get(ocr))
    try:
        body = json_body(request)
    except ProblemError as e:
        return e.response()
    if (not isinstance(body, dict) or set(body) != {"day", "hour"}
            or not all(type(v) is int and v >= 0 for v in body.values())):
        return ProblemError.bad_request('expected {"day": D, "hour": H} with integers >= 0').response()
    try:
        await limiter.runtime_limits.set(ocr, body)
    except ValueError as e:  # above 2^53-1
        return ProblemError.bad_request(str(e)).response()
    return HttpResponse(status=204)


async def api_default_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"endpoint": "default"})


async def api_custom_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"endpoint": "custom"})


# Async: a late reply is given back (SERVICES.md). Through the sync client
# (budget = socket timeout) a reply after the budget is lost and counts.
@limits.limit(api_user, key=lambda r: r.resolver_match.kwargs["user_id"], x_ratelimit=True)
async def api_user_view(request: HttpRequest, user_id: str) -> HttpResponse:
    return JsonResponse({"user": user_id})


# A sync view: decided through the sync RateLimiter (Django runs it in a thread
# under ASGI). Only the lockout may be: its late call counts anyway (RL.LOCKCOUNT
# has no refund).
@require_http_methods(["POST"])
@limits.limit(login, key=lambda r: f"{limits.client_ip(r)}:{r.path}")
def login_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True})


def model_failed() -> HttpResponse:
    return problem(500, "model-failed", "Internal Server Error", "the model failed")


@require_http_methods(["POST"])
@limits.limit(llm, key=llm_key, estimate=max_tokens, zone=llm_zone, scope=True)
async def complete(request: HttpRequest) -> HttpResponse:
    # The fake model: sleeps, then "uses" X-Used-Tokens (at most N) or fails.
    # A client that goes away cancels it (Django cancels the view): the scope
    # then settles to 0 and gives the lease back.
    n = max_tokens(request)
    await asyncio.sleep(header_int(request, "X-Sleep-Ms", 100, MAX_SLEEP_MS) / 1000)
    if request.headers.get("X-Fail") == "1":
        return model_failed()  # nothing reported: settled to 0
    used = min(n, header_int(request, "X-Used-Tokens", n // 2, n))
    if request.rate_limit_permit is not None:
        request.rate_limit_permit.used(used)
    return JsonResponse({"used_tokens": used})


@require_http_methods(["POST"])
@limits.limit(llm, key=llm_key, estimate=max_tokens, zone=llm_zone, scope=True)
async def stream(request: HttpRequest) -> HttpResponse:
    # Endpoint 6: the same limits, streamed; the permit closes after the last
    # byte (or the client gone), settled to the tokens of the lines sent.
    if request.headers.get("X-Fail") == "1":
        return model_failed()
    n = max_tokens(request)
    used = min(n, header_int(request, "X-Used-Tokens", n // 2, n))
    lines = max(1, header_int(request, "X-Sleep-Ms", 100, MAX_LINES * 100) // 100)
    permit = request.rate_limit_permit

    async def body() -> Any:
        sent = 0
        for i in range(lines):
            await asyncio.sleep(0.1)
            k = used // lines + (used % lines if i == lines - 1 else 0)
            sent += k
            if permit is not None:
                permit.used(sent)
            yield json.dumps({"tokens": k}).encode() + b"\n"
        yield json.dumps({"used_tokens": used}).encode() + b"\n"
    return StreamingHttpResponse(body(), content_type="application/x-ndjson")


urlpatterns = [
    path("health", health),
    path("seed000/sms", send_sms),
    path("seed001/ocr", run_ocr),
    path("admin/limits/ocr", ocr_limits_view),
    path("seed002/api/default", api_default_view),
    path("seed002/api/custom", api_custom_view),
    path("seed002/api/user/<str:user_id>", api_user_view),
    path("seed004/login", login_view),
    path("llm/complete", complete),
    path("llm/stream", stream),
]


def main() -> None:
    import uvicorn
    from django.core.asgi import get_asgi_application

    try:  # the backend check at start (the library loaded for "functions")
        sync_limiter.ensure_module()
        limiter.backend = sync_limiter.backend  # "auto": the engine found at start
    except Exception as e:  # one line, non-zero exit (SERVICES.md)
        print(f"example-django: {e}", file=sys.stderr)
        sys.exit(1)
    uvicorn.run(get_asgi_application(), host="127.0.0.1", port=int(os.environ.get("PORT", "8080")),
                log_level="warning", lifespan="off")


if __name__ == "__main__":
    main()
