"""The Django adapter against a real server, through Django's own test
clients (the sync handler and the async one): the decorator on sync and
async views, the middleware in both modes, scopes that settle (also after a
stream), several policies in one call, bad input, and Redis down."""

from __future__ import annotations

import json
import sys
import time
import types
from datetime import timedelta

import django
import pytest
import redis
import redis.asyncio
from django.conf import settings

if not settings.configured:
    settings.configure(DEBUG=False, ALLOWED_HOSTS=["testserver"], ROOT_URLCONF="rl_django_test_urls",
                       MIDDLEWARE=["rl_django_test_urls.RateLimitMiddleware"], DATABASES={}, INSTALLED_APPS=[],
                       USE_TZ=True)
    django.setup()

from django.http import HttpResponse, JsonResponse, StreamingHttpResponse  # noqa: E402
from django.test import AsyncClient, Client  # noqa: E402
from django.urls import clear_url_caches, path  # noqa: E402

from redis_rl import (FAIL_OPEN, AsyncRateLimiter, Policy, RateLimiter, concurrency, quota,  # noqa: E402
                      sliding_window)
from redis_rl.adapters.django import DjangoRateLimits, ProblemError  # noqa: E402

S = timedelta(seconds=1)
URLS = types.ModuleType("rl_django_test_urls")
sys.modules[URLS.__name__] = URLS


def install(limits: DjangoRateLimits, prefix: str) -> None:
    """The test project: views of every kind, routed in URLS (Django's ROOT_URLCONF)."""
    per_ip = Policy("ip", [sliding_window("custom", 2, 30 * S)], prefix=prefix)
    opened = Policy("open", [sliding_window("default", 2, 30 * S)], prefix=prefix, fail=FAIL_OPEN)
    jobs = Policy("jobs", [concurrency("inflight", 1, 60 * S), quota("units", "UTC", "day", 100, metered=True)],
                  prefix=prefix)
    per_user = Policy("user", [sliding_window("user", 1, 30 * S)], prefix=prefix)
    mw = Policy("mw", [sliding_window("mw", 1, 30 * S)], prefix=prefix)

    def used(request):
        return int(request.GET.get("used", "0"))

    def digits(request):
        value = request.GET.get("n", "")
        if not value.isdigit():
            raise ValueError("n must be digits")  # a resolver's validation error: 400
        return value

    @limits.limit(per_ip, key=limits.client_ip, x_ratelimit=True)
    def sync_ip(request):
        return JsonResponse({"ip": limits.client_ip(request)})

    @limits.limit(per_ip, key=lambda r: "async-" + limits.client_ip(r))
    async def async_ip(request):
        return JsonResponse({"async": True})

    @limits.limit(opened, key=lambda r: "all")
    async def async_open(request):
        return HttpResponse("ok")

    @limits.limit(opened, key=lambda r: "all")
    def sync_open(request):
        return HttpResponse("ok")

    def estimate(request):  # ?noest: the request gives none (a 400 naming the field, not a charge of 1)
        return None if "noest" in request.GET else 10

    @limits.limit(jobs, key=lambda r: "aj", scope=True, estimate=estimate)
    async def async_job(request):
        if request.rate_limit_permit is not None:
            request.rate_limit_permit.used(used(request))
        if request.GET.get("fail"):
            raise RuntimeError("job failed")
        return HttpResponse("done")

    @limits.limit(jobs, key=lambda r: "sj", scope=True, estimate=estimate)
    def sync_job(request):
        request.rate_limit_permit.used(used(request))
        if request.GET.get("fail"):
            raise RuntimeError("job failed")
        return HttpResponse("done")

    @limits.limit(jobs, key=lambda r: "as", scope=True, estimate=lambda r: 10)
    async def async_stream(request):
        permit = request.rate_limit_permit

        async def lines():
            for i in range(3):
                permit.used(i + 1)
                yield f"{i}\n".encode()
        return StreamingHttpResponse(lines(), content_type="application/x-ndjson")

    @limits.limit(jobs, key=lambda r: "ss", scope=True, estimate=lambda r: 10)
    def sync_stream(request):
        permit = request.rate_limit_permit

        def lines():
            for i in range(2):
                permit.used(i + 4)
                yield f"{i}\n".encode()
        return StreamingHttpResponse(lines())

    @limits.limit([limits.bind(per_ip, limits.client_ip), limits.bind(per_user, limits.header("X-User"))])
    async def both(request):
        return HttpResponse("both")

    @limits.limit(per_user, key=digits)
    def checked(request):
        return HttpResponse("checked")

    def unlimited(request):
        return HttpResponse("mw")

    # A 429's RateLimit items (test_refusal_headers.py): a cost from ?cost.
    costly = [Policy("one", [sliding_window("w", 5, 30 * S)], prefix=prefix),
              Policy("two", [sliding_window("short", 5, 30 * S), sliding_window("long", 100, 3600 * S)], prefix=prefix)]
    one, two = (limits.limit(p, key=lambda r: "k", cost=lambda r: int(r.GET["cost"]))(lambda request: HttpResponse("ok"))
                for p in costly)

    URLS.RateLimitMiddleware = limits.middleware({"/mw": (mw, limits.client_ip)})
    URLS.urlpatterns = [path("sync/ip", sync_ip), path("async/ip", async_ip), path("async/open", async_open),
                        path("sync/open", sync_open), path("async/job", async_job), path("sync/job", sync_job),
                        path("async/stream", async_stream), path("sync/stream", sync_stream),
                        path("both", both), path("checked", checked), path("mw", unlimited),
                        path("one", one), path("two", two)]
    clear_url_caches()


def problem(r, status, kind):
    assert r.status_code == status, r.content
    assert r.headers["Content-Type"] == "application/problem+json"
    body = json.loads(r.content)
    assert body["type"].endswith("/" + kind) and body["status"] == status and body["title"] and body["detail"]
    return body


def peek(raw, prefix, key):
    units = raw.execute_command("RL.QUOTAPEEK", f"{prefix}jobs:{{{key}}}:units", "*", "UTC", "DAY", 100, "COST", 0)
    lease = raw.execute_command("RL.LEASEPEEK", f"{prefix}jobs:{{{key}}}:inflight", "*", 1, "COST", 0)
    return 100 - units[3], 1 - lease[3]  # units taken, leases held


@pytest.fixture
def limits(server, key):
    limits = DjangoRateLimits(RateLimiter(redis.Redis(port=server.port, socket_timeout=0.5)),
                              async_limiter=AsyncRateLimiter(redis.asyncio.Redis(port=server.port)))
    install(limits, key)
    return limits


def test_sync_views_and_middleware(limits, raw, key):
    c = Client()
    xff = {"HTTP_X_FORWARDED_FOR": "203.0.113.1, 198.51.100.2"}
    r = c.get("/sync/ip", **xff)
    assert r.status_code == 200 and json.loads(r.content) == {"ip": "198.51.100.2"}
    assert r.headers["RateLimit-Policy"] == '"custom";q=2;w=30'
    assert r.headers["RateLimit"] == '"custom";r=1;t=30' and r.headers["X-RateLimit-Remaining"] == "1"
    c.get("/sync/ip", **xff)
    refused = c.get("/sync/ip", **xff)
    problem(refused, 429, "rate-limited")
    assert refused.headers["Retry-After"] == "30" and refused.headers["RateLimit"] == '"custom";r=0;t=30'
    # an untrusted peer's X-Forwarded-For is ignored: the peer is the client
    other = c.get("/sync/ip", REMOTE_ADDR="192.0.2.9", **xff)
    assert other.status_code == 200 and json.loads(other.content) == {"ip": "192.0.2.9"}

    assert c.get("/sync/job?used=3").status_code == 200
    with pytest.raises(RuntimeError):  # the test client re-raises the view's exception
        c.get("/sync/job?used=4&fail=1")
    assert peek(raw, key, "sj") == (7, 0)  # 3 used, then 4 reported before the failure; no lease held
    streamed = c.get("/sync/stream")
    assert peek(raw, key, "ss") == (10, 1)  # the stream not sent yet: its permit holds
    assert b"".join(streamed.streaming_content) == b"0\n1\n"
    streamed.close()
    assert peek(raw, key, "ss") == (5, 0)

    assert c.get("/mw").status_code == 200
    second = c.get("/mw")
    problem(second, 429, "rate-limited")
    assert second.headers["RateLimit-Policy"] == '"mw";q=1;w=30'
    problem(c.get("/checked?n=x"), 400, "bad-request")
    assert c.get("/checked?n=1").status_code == 200


@pytest.mark.anyio
async def test_async_views_and_middleware(limits, raw, key):
    c = AsyncClient()
    r = await c.get("/async/ip")
    assert r.status_code == 200 and r.headers["RateLimit"] == '"custom";r=1;t=30'
    await c.get("/async/ip")
    problem(await c.get("/async/ip"), 429, "rate-limited")
    # a sync view in the async handler (Django runs it in a thread): decided the same
    assert (await c.get("/sync/ip")).headers["RateLimit"] == '"custom";r=1;t=30'

    assert (await c.get("/async/job?used=3")).status_code == 200
    with pytest.raises(RuntimeError):
        await c.get("/async/job?used=4&fail=1")
    assert peek(raw, key, "aj") == (7, 0)
    streamed = await c.get("/async/stream")
    assert [chunk async for chunk in streamed.streaming_content] == [b"0\n", b"1\n", b"2\n"]
    for _ in range(100):  # settled after the last chunk, in the background of the stream's end
        if peek(raw, key, "as") == (3, 0):
            break
        time.sleep(0.01)
    assert peek(raw, key, "as") == (3, 0)

    # several policies, one call: headers of both, in binding order
    ok = await c.get("/both", headers={"X-User": "u1"}, REMOTE_ADDR="192.0.2.77")
    assert ok.status_code == 200
    assert ok.headers["RateLimit-Policy"] == '"custom";q=2;w=30, "user";q=1;w=30'
    refused = await c.get("/both", headers={"X-User": "u1"}, REMOTE_ADDR="192.0.2.77")
    problem(refused, 429, "rate-limited")
    assert refused.headers["RateLimit"].startswith('"custom";r=0;') and '"user";r=0;' in refused.headers["RateLimit"]
    problem(await c.get("/both", REMOTE_ADDR="192.0.2.78"), 401, "unauthorized")

    assert (await c.get("/mw")).status_code == 200
    problem(await c.get("/mw"), 429, "rate-limited")


def test_a_refusals_ratelimit_items_are_the_state_it_leaves(limits, key):
    from test_refusal_headers import COSTS, check
    c = Client()
    check({name: [(r.status_code, r.headers["RateLimit"]) for r in (c.get(f"/{name}?cost={n}") for n in COSTS)]
           for name in ("one", "two")})


def test_an_estimate_resolver_giving_none_is_a_400_naming_it_before_any_call(limits, raw, key):
    assert "estimate" in problem(Client().get("/sync/job?noest=1"), 400, "bad-request")["detail"]
    assert peek(raw, key, "sj") == (0, 0)


@pytest.mark.anyio
async def test_an_estimate_resolver_giving_none_is_a_400_naming_it_async(limits, raw, key):
    assert "estimate" in problem(await AsyncClient().get("/async/job?noest=1"), 400, "bad-request")["detail"]
    assert peek(raw, key, "aj") == (0, 0)


@pytest.mark.anyio
async def test_redis_down_open_and_closed_both_kinds_of_view():
    limits = DjangoRateLimits(RateLimiter(redis.Redis(port=1, socket_timeout=0.5, socket_connect_timeout=0.5)),
                              async_limiter=AsyncRateLimiter(redis.asyncio.Redis(port=1, socket_connect_timeout=0.5)))
    install(limits, "down:")
    c = AsyncClient()
    t0 = time.monotonic()
    problem(await c.get("/async/ip"), 503, "unavailable")
    opened = await c.get("/async/open")
    assert opened.status_code == 200 and "RateLimit" not in opened.headers
    job = await c.get("/async/job")  # a scope failing... closed: jobs fails closed
    problem(job, 503, "unavailable")
    problem(await c.get("/mw"), 503, "unavailable")
    assert time.monotonic() - t0 < 1.0
    s = Client()
    t0 = time.monotonic()
    problem(s.get("/sync/ip"), 503, "unavailable")
    opened = s.get("/sync/open")
    assert opened.status_code == 200 and "RateLimit" not in opened.headers
    assert time.monotonic() - t0 < 1.0


def test_configuration_errors(server):
    with pytest.raises(TypeError):
        DjangoRateLimits()
    limits = DjangoRateLimits(async_limiter=AsyncRateLimiter(redis.asyncio.Redis(port=server.port)))
    jobs = Policy("jobs", [concurrency("inflight", 1, 60 * S)])
    with pytest.raises(ValueError, match="scope=True"):
        limits.limit(jobs, key=lambda r: "k")
    with pytest.raises(ValueError, match="middleware"):
        limits.middleware({"/x": (jobs, lambda r: "k")})
    with pytest.raises(TypeError, match="key"):
        limits.limit(jobs, scope=True)
    assert ProblemError.bad_request("x").status == 400


@pytest.mark.anyio
async def test_readme_django_block_runs_as_written(server, raw):
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "DjangoRateLimits(" in b]
    code = block.replace('REDIS_URL = "redis://localhost:6379"', f'REDIS_URL = "redis://127.0.0.1:{server.port}"')
    assert code != block
    for k in raw.keys("django:*"):
        raw.delete(k)
    ns: dict = {"__name__": "readme"}
    exec(compile(code, "README.md", "exec"), ns)
    URLS.RateLimitMiddleware = ns["ExportLimits"]
    URLS.urlpatterns = [path("api/search", ns["search_view"]), path("api/jobs", ns["job_view"]),
                        path("api/export", lambda request: HttpResponse("csv"))]
    clear_url_caches()
    c = AsyncClient()
    got = [await c.get("/api/search") for _ in range(6)]
    assert [r.status_code for r in got] == [200] * 5 + [429]
    assert got[0].headers["RateLimit-Policy"] == '"search";q=5;w=30' and got[0].headers["RateLimit"] == '"search";r=4;t=30'
    problem(got[5], 429, "rate-limited")
    assert [(await c.get("/api/export")).status_code for _ in range(3)] == [200, 200, 429]
    job = await c.get("/api/jobs", headers={"X-Api-Key": "k"})
    assert job.status_code == 200 and json.loads(job.content) == {"used": 420}
    tokens = raw.execute_command("RL.QUOTAPEEK", "django:jobs:{k}:tokens", "*", "UTC", "DAY", 100_000, "COST", 0)
    assert 100_000 - tokens[3] == 420
    assert raw.execute_command("RL.LEASEPEEK", "django:jobs:{k}:inflight", "*", 2, "COST", 0)[3] == 2
    problem(await c.get("/api/jobs"), 401, "unauthorized")


def test_django_an_error_response_or_an_exception_is_a_failure(rl_local):
    """The Django decorator notes the outcome as FastAPI's and Flask's do (it
    did not: every call was a success, so failures were given back)."""
    from django.test import RequestFactory

    limits = DjangoRateLimits(rl_local.limiter())

    @limits.limit(Policy("login-dj", "2 per 15 minutes", counts="failures"), key=lambda r: "ann", scope=True)
    def view(request):
        if request.GET.get("password") == "raise":
            raise RuntimeError("the backend failed")
        return JsonResponse({"ok": request.GET.get("password") == "right"},
                            status=200 if request.GET.get("password") == "right" else 401)

    rf = RequestFactory()
    assert [view(rf.post("/login?password=right")).status_code for _ in range(3)] == [200] * 3
    assert view(rf.post("/login?password=wrong")).status_code == 401
    with pytest.raises(RuntimeError):
        view(rf.post("/login?password=raise"))
    assert view(rf.post("/login?password=right")).status_code == 429


def test_django_skip_exempt_and_a_custom_refusal(rl_local):
    """express's skip / exempt / onRefused, as DjangoRateLimits(skip=, exempt=, on_refused=)."""
    from django.test import RequestFactory

    limits = DjangoRateLimits(rl_local.limiter(), skip=lambda r: r.GET.get("health") == "1",
                              exempt={"ips": ["10.0.0.0/8"], "keys": ["internal"]},
                              on_refused=lambda r, refusal: JsonResponse({"busy": refusal.decision.binding},
                                                                         status=503))

    @limits.limit(Policy("api-dj", "1/minute"), key=lambda r: r.GET.get("key", "anon"))
    def view(request):
        return JsonResponse({"ok": True})

    rf = RequestFactory()
    assert view(rf.get("/x?key=k")).status_code == 200
    r = view(rf.get("/x?key=k"))
    assert (r.status_code, json.loads(r.content)["busy"]) == (503, "1-per-1m")
    assert view(rf.get("/x?key=k&health=1")).status_code == 200
    assert [view(rf.get("/x?key=internal")).status_code for _ in range(3)] == [200] * 3
    assert [view(rf.get("/x?key=z", REMOTE_ADDR="10.1.2.3")).status_code for _ in range(3)] == [200] * 3
    assert len(rl_local.engine.keys) == 1


def test_django_middleware_default_limit(rl_local):
    """limits.middleware(routes, default=...): every other path takes the default; None opts a path out."""
    from django.test import RequestFactory

    limits = DjangoRateLimits(rl_local.limiter())
    mw = limits.middleware({"/health": None}, default=(Policy("ip-dj", "1/minute"), limits.client_ip))(
        lambda request: HttpResponse("ok"))
    rf = RequestFactory()
    assert [mw(rf.get(p)).status_code for p in ("/a", "/b", "/health", "/health")] == [200, 429, 200, 200]


def test_health_reports_the_sync_and_the_async_guard(server):
    """``limits.health()`` as FastAPI's and Flask's: one answer of the same
    shape for both guards, DOWN when either is (here the sync views' Redis)."""
    policy = Policy("h", [sliding_window("h", 2, 30 * S)], prefix="health:")
    limits = DjangoRateLimits(RateLimiter(redis.Redis(port=1, socket_timeout=0.5, socket_connect_timeout=0.5)),
                              async_limiter=AsyncRateLimiter(redis.asyncio.Redis(port=server.port)))
    assert limits.health() == {"status": "UP", "backend": "module"}
    assert limits.sync_guard().decide(policy, "k") is None  # refused: the sync guard's circuit opens
    assert limits.health() == {"status": "DOWN", "backend": "module", "open": ["*"],
                               "detail": "Redis cannot be reached: circuit open for *"}
    assert limits.async_guard().health()["status"] == "UP"  # what the async views' guard alone says
    only_async = DjangoRateLimits(async_limiter=AsyncRateLimiter(redis.asyncio.Redis(port=server.port)))
    assert only_async.health() == only_async.async_guard().health() == {"status": "UP", "backend": "module"}


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["OOM", "WRONGTYPE"])
async def test_a_redis_error_reply_is_a_misconfigured_500_not_djangos_page(limits, raw, key, how, caplog):
    """OOM over maxmemory (the new-user trial: Django's 500 text/html) or
    WRONGTYPE at a key another app wrote: not "Redis unavailable", the
    deployment's mistake: a problem+json 500 naming the policy and Redis's
    error, logged once at error level — the Spring starter's answer — from
    sync and async views, scopes, several policies and the middleware."""
    c, s = AsyncClient(), Client()
    assert (await c.get("/async/ip")).status_code == 200  # the first use's module check passed
    assert s.get("/sync/ip").status_code == 200
    caplog.clear()
    caplog.set_level("ERROR", logger="redis_rl")
    undo = lambda: None  # noqa: E731
    if how == "WRONGTYPE":
        for k in ("ip:{127.0.0.1}:custom", "ip:{async-127.0.0.1}:custom", "jobs:{sj}:inflight",
                  "jobs:{aj}:inflight", "mw:{127.0.0.1}:mw"):
            raw.set(key + k, "another app's value")
    else:
        policy = raw.config_get("maxmemory-policy")["maxmemory-policy"]
        raw.config_set("maxmemory-policy", "noeviction")
        raw.config_set("maxmemory", 1)

        def undo():
            raw.config_set("maxmemory", 0)
            raw.config_set("maxmemory-policy", policy)
    try:
        answers = [("ip", s.get("/sync/ip")), ("ip", await c.get("/async/ip")), ("jobs", s.get("/sync/job")),
                   ("jobs", await c.get("/async/job")), ("ip+user", await c.get("/both", headers={"X-User": "u"})),
                   ("mw", s.get("/mw")), ("mw", await c.get("/mw"))]
    finally:
        undo()
    for name, r in answers:
        body = problem(r, 500, "misconfigured")
        assert body["title"] == "Internal Server Error"
        assert body["detail"].startswith(f"Redis refused rate limit '{name}': {how} "), body["detail"]
    logged = [r.getMessage() for r in caplog.records if r.name == "redis_rl" and r.levelname == "ERROR"]
    assert [m.split(":")[1].strip() for m in logged] == [f"Redis refused rate limit '{n}'" for n, _ in answers]
    assert limits.health()["status"] == "UP"  # not the Redis-down mode: no circuit opened
