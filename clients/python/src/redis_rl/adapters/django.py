"""Django: a view decorator (``@limits.limit(policy, key=limits.client_ip)``)
for sync and async views, and a middleware (``limits.middleware({path:
(policy, key)})``), answering as clients/DESIGN.md says: 429 problem JSON +
Retry-After + RateLimit headers, 503 when Redis is down and the policy fails
closed, 400/401 for bad input. Sync views decide through the sync
``RateLimiter`` (its client's ``socket_timeout`` is the budget, as Flask),
async views through the ``AsyncRateLimiter`` (the policy's budget, a late
reply given back). ``scope=True`` holds the lease and the estimate for the
view (``request.rate_limit_permit.used(n)``; None when failing open) and
settles when the view returns or raises — for a streaming response, when
its last chunk is sent or the client goes away."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse

from .. import http
from ..client import AsyncRateLimiter, RateLimiter
from ..combined import CombinedPolicy, PolicyCall
from ..errors import ModuleNotLoadedError, RateLimitError
from ..exempt import Refusal, exemption, refusal_of
from ..outcome import note_outcome
from ..guard import AsyncGuard, Guard
from ..local import LocalRedis  # in process: no socket, so no budget to warn about
from ..policy import Policy, PolicyDecision
from ..scope import AsyncPermit, Permit

log = logging.getLogger("redis_rl")

Resolver = Callable[[HttpRequest], Any]  # an async view's may return an awaitable
Answer = tuple["PolicyDecision | None", list[tuple[str, str]]]


class ProblemError(Exception):
    """An HTTP problem answer (400, 401, ...) raised by a key resolver."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        super().__init__(status)
        self.status, self.headers, self.body = status, headers, body

    def response(self) -> HttpResponse:
        return _response(self.status, self.headers, self.body)

    @classmethod
    def bad_request(cls, detail: str) -> "ProblemError":
        return cls(*http.bad_request(detail))

    @classmethod
    def unauthorized(cls, detail: str) -> "ProblemError":
        return cls(*http.unauthorized(detail))


class _CustomRefusal(ProblemError):
    """The HttpResponse of the project's ``on_refused``, through ProblemError's paths."""

    def __init__(self, response: HttpResponseBase) -> None:
        super().__init__(response.status_code, [], b"")
        self._response = response

    def response(self) -> HttpResponseBase:  # type: ignore[override]
        return self._response


@dataclass(frozen=True)
class Bound:
    """A policy with the resolvers of its key, cost, estimate, ... (``DjangoRateLimits.bind``)."""

    policy: Policy
    key: Resolver
    kw: Mapping[str, Resolver]


def _response(status: int, headers: list[tuple[str, str]], body: bytes) -> HttpResponse:
    r = HttpResponse(body, status=status)
    for k, v in headers:
        r.headers[k] = v
    return r


def _socket_timeout(client: Any) -> float | None:
    """The redis-py client's socket_timeout (standalone or Cluster); 0 when unknown."""
    for holder in (getattr(client, "connection_pool", None), getattr(client, "nodes_manager", None)):
        kwargs = getattr(holder, "connection_kwargs", None)
        if isinstance(kwargs, dict):
            return kwargs.get("socket_timeout")
    return 0


def _bounds(policy: "Policy | Sequence[Bound]", key: Resolver | None, kw: Mapping[str, Resolver]) -> list[Bound]:
    if isinstance(policy, Policy):
        if key is None:
            raise TypeError("a key resolver is needed: limit(policy, key=...)")
        return [Bound(policy, key, dict(kw))]
    bounds = list(policy)
    if key is not None or kw:
        raise TypeError("with a list of limits.bind(...), give the key (and cost, ...) to each bind")
    if not bounds or not all(isinstance(b, Bound) for b in bounds):
        raise TypeError("expected a Policy or a non-empty list of limits.bind(policy, key, ...)")
    return bounds


def _bad_input(e: Exception) -> HttpResponse:
    """A resolver's (or the policy's) refusal of the request's input: 400."""
    detail = "; ".join(e.messages) if isinstance(e, ValidationError) else str(e)
    return _response(*http.bad_request(detail))


def _misconfigured(e: ModuleNotLoadedError) -> HttpResponse:
    log.error("redis_rl: %s", e)  # a problem+json 500 naming it, not Django's plain page
    return _response(*http.misconfigured(str(e)))


class _Decider:
    """What decides a request for one decorated view or middleware route."""

    def __init__(self, owner: "DjangoRateLimits", bounds: list[Bound], x_ratelimit: bool) -> None:
        self.owner, self.bounds, self.x_ratelimit = owner, bounds, x_ratelimit
        self.policy = bounds[0].policy if len(bounds) == 1 else CombinedPolicy([b.policy for b in bounds])

    def answer(self, decision: PolicyDecision | None, request: HttpRequest) -> Answer:
        """The decision and its headers, or a ProblemError (429, 503)."""
        if decision is None:
            if self.policy.fail == "closed":
                raise ProblemError(*http.unavailable(self.policy))
            return None, []  # fail open: proceed without rate-limit headers
        if decision.limited:
            if self.owner.on_refused is not None:
                raise _CustomRefusal(self.owner.on_refused(request, refusal_of(decision, [], self.x_ratelimit)))
            raise ProblemError(*http.refusal(decision, x_ratelimit=self.x_ratelimit))
        return decision, http.rate_limit_headers(decision, x_ratelimit=self.x_ratelimit)

    def passes(self, request: HttpRequest, keys: Sequence[str] = ()) -> bool:
        """Skipped or exempt: decided by nobody (no write, no headers, no permit)."""
        o = self.owner
        if not keys:
            return bool(o.skip and o.skip(request)) or o._exempt(o.client_ip(request), ())
        return o._exempt(None, keys)

    def decide(self, request: HttpRequest) -> Answer:
        guard = self.owner.sync_guard()
        if self.passes(request):
            return None, []
        calls = [b.policy.bind(b.key(request), **http.resolved({n: r(request) for n, r in b.kw.items()}))
                 for b in self.bounds]
        if self.passes(request, [c.key for c in calls]):
            return None, []
        try:
            decision = _decide(guard, calls)
        except ModuleNotLoadedError:
            raise  # _answered names it
        except RateLimitError as e:  # OOM, NOPERM, WRONGTYPE, ...: not Redis down
            raise ProblemError(*http.redis_refused(self.policy, e)) from None
        return self.answer(decision, request)

    async def adecide(self, request: HttpRequest) -> Answer:
        guard = self.owner.async_guard()
        if self.passes(request):
            return None, []
        calls = []
        for b in self.bounds:
            key = await _value(b.key, request)
            calls.append(b.policy.bind(key, **http.resolved({n: await _value(r, request) for n, r in b.kw.items()})))
        if self.passes(request, [c.key for c in calls]):
            return None, []
        try:
            if len(calls) == 1:
                x = calls[0]
                decision = await guard.decide(x.policy, x.key, cost=x.cost, estimate=x.estimate, zone=x.zone,
                                              subkeys=x.subkeys, overrides=x.overrides)
            else:
                decision = await guard.decide_all(calls)
        except ModuleNotLoadedError:
            raise  # _aanswered names it
        except RateLimitError as e:  # as decide
            raise ProblemError(*http.redis_refused(self.policy, e)) from None
        return self.answer(decision, request)


def _decide(guard: Guard, calls: list[PolicyCall]) -> PolicyDecision | None:
    if len(calls) == 1:
        x = calls[0]
        return guard.decide(x.policy, x.key, cost=x.cost, estimate=x.estimate, zone=x.zone, subkeys=x.subkeys,
                            overrides=x.overrides)
    return guard.decide_all(calls)


async def _value(resolver: Resolver, request: HttpRequest) -> Any:
    v = resolver(request)
    return await v if inspect.isawaitable(v) else v


def _answered(call: Callable[[], Answer]) -> "Answer | HttpResponse":
    """A decision's answer, or the response that ends the request here."""
    try:
        return call()
    except ProblemError as e:
        return e.response()
    except ModuleNotLoadedError as e:
        return _misconfigured(e)
    except (ValueError, ValidationError) as e:  # the request's key, cost or estimate: before any call
        return _bad_input(e)


async def _aanswered(call: Callable[[], Awaitable[Answer]]) -> "Answer | HttpResponse":
    try:
        return await call()
    except ProblemError as e:
        return e.response()
    except ModuleNotLoadedError as e:
        return _misconfigured(e)
    except (ValueError, ValidationError) as e:
        return _bad_input(e)


def _with_headers(response: HttpResponseBase, headers: list[tuple[str, str]]) -> HttpResponseBase:
    for k, v in headers:
        response.headers[k] = v
    return response


class DjangoRateLimits:
    """One per project: the limiters (sync views need ``limiter``, async views
    ``async_limiter``), their Redis-down guards, and the trusted proxies."""

    def __init__(self, limiter: RateLimiter | None = None, *, async_limiter: AsyncRateLimiter | None = None,
                 trusted_proxies: Iterable[str | http.Network] = ("127.0.0.0/8", "::1/128"),
                 skip: Callable[[HttpRequest], bool] | None = None, exempt: Any = None,
                 on_refused: Callable[[HttpRequest, Refusal], HttpResponseBase] | None = None) -> None:
        """``skip(request)``: requests never limited; ``exempt``: callers never
        limited (``Exemptions(ips=[...], keys=[...])`` or a dict of those);
        ``on_refused(request, refusal)``: the HttpResponse of a refusal (redis_rl.exempt)."""
        self.skip, self._exempt, self.on_refused = skip, exemption(exempt), on_refused
        if limiter is None and async_limiter is None:
            raise TypeError("give a RateLimiter (sync views), an AsyncRateLimiter (async_limiter=, async views), "
                            "or both")
        if limiter is not None and not isinstance(limiter, RateLimiter):
            raise TypeError("limiter must be a RateLimiter (for async views: async_limiter=AsyncRateLimiter(...))")
        if async_limiter is not None and not isinstance(async_limiter, AsyncRateLimiter):
            raise TypeError("async_limiter must be an AsyncRateLimiter")
        self.limiter, self.async_limiter = limiter, async_limiter
        self._guard = Guard(limiter) if limiter is not None else None
        self._async_guard = AsyncGuard(async_limiter) if async_limiter is not None else None
        self.trusted = http.networks(trusted_proxies)
        if limiter is not None and _socket_timeout(limiter.redis) is None and not isinstance(limiter.redis, LocalRedis):
            # The sync guard's budget is the socket timeout: without one a
            # frozen Redis holds every limited request for as long as it lasts.
            log.warning("redis_rl: the sync Redis client has no socket_timeout, so a sync view's decision has no "
                        "time budget: give it socket_timeout=0.5, socket_connect_timeout=0.5")

    def sync_guard(self) -> Guard:
        if self._guard is None:
            raise ImproperlyConfigured("a sync view or middleware is rate limited, but DjangoRateLimits has no "
                                       "RateLimiter: DjangoRateLimits(RateLimiter(...), ...)")
        return self._guard

    def async_guard(self) -> AsyncGuard:
        if self._async_guard is None:
            raise ImproperlyConfigured("an async view or middleware is rate limited, but DjangoRateLimits has no "
                                       "AsyncRateLimiter: DjangoRateLimits(async_limiter=AsyncRateLimiter(...))")
        return self._async_guard

    def health(self) -> dict[str, Any]:
        """What both guards' ``health()`` say, in their shape (as FastAPI's
        and Flask's ``limits.health()``): DOWN when either is (a node's
        circuit open, the module missing: named); ``open`` every node open
        in either; ``backend`` the engine deciding (``"module (sync),
        functions (async)"`` when they differ). For a readiness check, not
        liveness."""
        reports = [g.health() for g in (self._guard, self._async_guard) if g is not None]
        if len(reports) == 1:
            return reports[0]
        sync, async_ = reports
        out: dict[str, Any] = {"status": "DOWN" if "DOWN" in (sync["status"], async_["status"]) else "UP",
                               "backend": sync["backend"] if sync["backend"] == async_["backend"]
                               else f"{sync['backend']} (sync), {async_['backend']} (async)"}
        nodes = sorted({n for r in reports for n in r.get("open", ())})
        if nodes:
            out["open"] = nodes
        module = sync.get("module") or async_.get("module")
        if module is not None:
            out["module"] = module
        details = list(dict.fromkeys(r["detail"] for r in reports if "detail" in r))  # once when both say it
        if details:
            out["detail"] = "; ".join(details)
        return out

    # key resolvers
    def client_ip(self, request: HttpRequest) -> str:
        return http.client_ip(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR"), self.trusted)

    @staticmethod
    def header(name: str, *, problem: str = "unauthorized") -> Callable[[HttpRequest], str]:
        """A key from a request header (e.g. the user); missing: 401 (or 400)."""
        def resolve(request: HttpRequest) -> str:
            value = request.headers.get(name)
            if not value:
                raise (ProblemError.unauthorized if problem == "unauthorized" else ProblemError.bad_request)(
                    f"the {name} header is required")
            return value
        return resolve

    @staticmethod
    def bind(policy: Policy, key: Resolver, **decide_kw: Resolver) -> Bound:
        """A policy with the resolvers of its key (``cost=``, ``estimate=``,
        ``zone=``, ``subkeys=``, ``overrides=``), for several policies on one
        view decided in one call: ``@limits.limit([limits.bind(per_ip,
        limits.client_ip), limits.bind(per_phone, phone)])``."""
        return Bound(policy, key, dict(decide_kw))

    def limit(self, policy: "Policy | Sequence[Bound]", *, key: Resolver | None = None, x_ratelimit: bool = False,
              scope: bool = False, **decide_kw: Resolver) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Limits a view (sync or async) by ``policy`` keyed by ``key(request)``
        (``decide_kw``: ``cost=``, ``estimate=``, ``zone=``, ... resolvers of
        the request), or by a list of ``limits.bind(...)`` decided in one call."""
        bounds = _bounds(policy, key, decide_kw)
        for b in bounds:
            if b.policy.needs_permit and not scope:
                # Without a scope the lease and the estimate would never be given back.
                raise ValueError(f"policy {b.policy.name!r} holds a lease or an estimate: decorate with scope=True")
        decider = _Decider(self, bounds, x_ratelimit)
        budget = decider.policy.budget.total_seconds()

        def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
            if iscoroutinefunction(view):
                @functools.wraps(view)
                async def async_wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                    got = await _aanswered(lambda: decider.adecide(request))
                    if isinstance(got, HttpResponseBase):
                        return got
                    decision, headers = got
                    if not scope or decision is None:
                        if scope:  # failing open: there is no permit
                            request.rate_limit_permit = None  # type: ignore[attr-defined]
                        return _with_headers(await view(request, *args, **kwargs), headers)
                    assert self.async_limiter is not None
                    permit = AsyncPermit(self.async_limiter, decision)
                    request.rate_limit_permit = permit  # type: ignore[attr-defined]
                    close = functools.partial(self.async_guard().close, permit, budget)
                    try:
                        response = await view(request, *args, **kwargs)
                        note_outcome(permit, response.status_code)  # counts="failures"/"successes" (outcome.py)
                    except BaseException:  # an exception, or the client gone (Django cancels the view)
                        note_outcome(permit, None)
                        await close()
                        raise
                    if isinstance(response, StreamingHttpResponse):
                        _close_after_stream(response, None, close, asyncio.get_running_loop())
                    else:
                        await close()
                    return _with_headers(response, headers)
                return async_wrapped

            @functools.wraps(view)
            def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                got = _answered(lambda: decider.decide(request))
                if isinstance(got, HttpResponseBase):
                    return got
                decision, headers = got
                if not scope or decision is None:
                    if scope:
                        request.rate_limit_permit = None  # type: ignore[attr-defined]
                    return _with_headers(view(request, *args, **kwargs), headers)
                assert self.limiter is not None
                permit = Permit(self.limiter, decision)
                request.rate_limit_permit = permit  # type: ignore[attr-defined]
                close = functools.partial(self.sync_guard().close, permit)
                try:
                    response = view(request, *args, **kwargs)
                    note_outcome(permit, response.status_code)  # counts="failures"/"successes" (outcome.py)
                except BaseException:
                    note_outcome(permit, None)
                    close()
                    raise
                if isinstance(response, StreamingHttpResponse):
                    _close_after_stream(response, close, None, None)
                else:
                    close()
                return _with_headers(response, headers)
            return wrapped
        return decorator

    def middleware(self, routes: "Mapping[str, tuple[Policy, Resolver] | Sequence[Bound] | None]" = {}, *,
                   default: "tuple[Policy, Resolver] | Sequence[Bound] | None" = None,
                   x_ratelimit: bool = False) -> type:
        """A middleware class deciding the requests whose path is in ``routes``
        (path -> (policy, key) or a list of ``limits.bind(...)``) before the
        view; name it in ``settings.MIDDLEWARE`` by its dotted path. It runs
        sync or async as the middleware chain does (Django picks).
        ``default``: the limit of every other path (a path mapped to None
        opts out: a health check, a view with its own ``@limits.limit``)."""
        def decider(r: Any) -> "_Decider | None":
            if r is None:
                return None
            bounds = _bounds(r[0], r[1], {}) if isinstance(r, tuple) else _bounds(r, None, {})
            for b in bounds:
                if b.policy.needs_permit:
                    raise ValueError(f"policy {b.policy.name!r} holds a lease or an estimate: the middleware "
                                     "cannot give it back; use @limits.limit(..., scope=True)")
            return _Decider(self, bounds, x_ratelimit)
        deciders = {path: decider(r) for path, r in routes.items()}
        fallback = decider(default)

        class RateLimitMiddleware:
            sync_capable = True
            async_capable = True

            def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
                self.get_response = get_response
                self.is_async = iscoroutinefunction(get_response)
                if self.is_async:
                    markcoroutinefunction(self)

            def __call__(self, request: HttpRequest) -> Any:
                if self.is_async:
                    return self.__acall__(request)
                path = request.path_info
                decider = deciders[path] if path in deciders else fallback
                if decider is None:
                    return self.get_response(request)
                got = _answered(lambda: decider.decide(request))
                if isinstance(got, HttpResponseBase):
                    return got
                return _with_headers(self.get_response(request), got[1])

            async def __acall__(self, request: HttpRequest) -> Any:
                path = request.path_info
                decider = deciders[path] if path in deciders else fallback
                if decider is None:
                    return await self.get_response(request)
                got = await _aanswered(lambda: decider.adecide(request))
                if isinstance(got, HttpResponseBase):
                    return got
                return _with_headers(await self.get_response(request), got[1])

        return RateLimitMiddleware


def _close_after_stream(response: StreamingHttpResponse, close: Callable[[], None] | None,
                        aclose: Callable[[], Awaitable[None]] | None, loop: asyncio.AbstractEventLoop | None) -> None:
    """The permit of a streaming response closes when its last chunk is sent,
    or when the stream is closed early (the client gone: Django closes the
    iterator and the response). Closing twice does nothing."""
    content = response.streaming_content
    if aclose is not None:
        async def astream() -> Any:
            try:
                if hasattr(content, "__aiter__"):
                    async for chunk in content:
                        yield chunk
                else:
                    for chunk in content:
                        yield chunk
            finally:
                await aclose()
        response.streaming_content = astream()

        def closer() -> None:  # response.close() runs in a worker thread under ASGI
            assert loop is not None
            if not loop.is_closed():
                asyncio.run_coroutine_threadsafe(aclose(), loop)  # type: ignore[arg-type]
    else:
        assert close is not None

        def stream() -> Any:
            try:
                yield from content  # type: ignore[misc]
            finally:
                close()
        response.streaming_content = stream()
        closer = close
    # A stream never iterated (its generator's finally never runs) still
    # closes the permit when Django closes the response.
    response._resource_closers.append(closer)
