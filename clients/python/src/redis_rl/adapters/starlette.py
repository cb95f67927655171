"""FastAPI / Starlette: a dependency (``RateLimits.depends``/``RateLimits.scope``)
and a middleware (``RateLimitMiddleware``), both answering as clients/DESIGN.md
says: 429 problem JSON + Retry-After + RateLimit headers, 503 when Redis is
down and the policy fails closed. ``RateLimits.install(app)`` registers the
handler that renders ``ProblemError``."""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import Response

from .. import http
from ..client import AsyncRateLimiter
from ..combined import CombinedPolicy
from ..exempt import Refusal, exemption, refusal_of
from ..errors import ModuleNotLoadedError, RateLimitError
from ..guard import AsyncGuard, check_socket_timeout
from ..policy import Policy, PolicyDecision
from ..outcome import note_outcome
from ..scope import AsyncPermit

Resolver = Callable[[Request], Any]  # may return a value or an awaitable


@dataclass(frozen=True)
class Bound:
    """A policy with the resolvers of its key, cost, estimate, ... (``RateLimits.bind``)."""

    policy: Policy
    key: Resolver
    kw: Mapping[str, Resolver | None]


def _no_permit(policy: Policy, where: str) -> None:
    # Decided without a scope, a lease or an estimate is never given back:
    # every request would hold a lease for its TTL and spend its estimate.
    if policy.needs_permit:
        raise ValueError(f"policy {policy.name!r} holds a lease or an estimate: {where} cannot give it back; "
                         "use RateLimits.scope(...)")


def _policies(policy: "Policy | Sequence[Bound]") -> list[Policy]:
    return [policy] if isinstance(policy, Policy) else [b.policy for b in policy if isinstance(b, Bound)]


def _misconfigured(exc: Exception) -> Response:
    # Not a plain-text 500: the answer names what is wrong (the module missing).
    logging.getLogger("redis_rl").error("redis_rl: %s", exc)
    r = Response(http.misconfigured(str(exc))[2], status_code=500)
    r.headers["Content-Type"] = http.PROBLEM_JSON
    return r


class ProblemError(Exception):
    """An HTTP problem answer (429, 503, 400, 401) raised from a dependency."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        super().__init__(status)
        self.status, self.headers, self.body = status, headers, body

    def response(self) -> Response:
        r = Response(self.body, status_code=self.status)
        for k, v in self.headers:
            r.headers[k] = v
        return r

    @classmethod
    def bad_request(cls, detail: str) -> "ProblemError":
        return cls(*http.bad_request(detail))

    @classmethod
    def unauthorized(cls, detail: str) -> "ProblemError":
        return cls(*http.unauthorized(detail))


try:  # FastAPI's own validation error, when FastAPI is there (a resolver may use its models)
    from fastapi.exceptions import RequestValidationError as _FrameworkValidation
except ImportError:  # Starlette alone
    class _FrameworkValidation(Exception):  # type: ignore[no-redef]
        pass


async def _value(resolver: Resolver | None, request: Request) -> Any:
    """A resolver's value. Its validation error — a value or decode error
    (bad JSON, ``int("x")``, a pydantic ValidationError) or the framework's
    own — is the client's: 400 (CLIENTS.md §5). Anything else is a bug in
    the resolver and stays a 500."""
    if resolver is None:
        return None
    try:
        v = resolver(request)
        return await v if inspect.isawaitable(v) else v
    except ProblemError:
        raise
    except (ValueError, _FrameworkValidation) as e:
        raise ProblemError.bad_request(f"invalid request: {e}") from None


class RateLimits:
    """One per app: the limiter, its Redis-down guard and the trusted proxies."""

    def __init__(self, limiter: AsyncRateLimiter, *,
                 trusted_proxies: Iterable[str | http.Network] = ("127.0.0.0/8", "::1/128"),
                 skip: Callable[[Request], bool] | None = None, exempt: Any = None,
                 on_refused: Callable[[Request, Refusal], Response] | None = None) -> None:
        """``skip(request)``: requests never limited; ``exempt``: callers never
        limited (``Exemptions(ips=[...], keys=[...])`` or a dict of those);
        ``on_refused(request, refusal)``: the Response of a refusal (redis_rl.exempt)."""
        self.limiter = limiter
        self.guard = AsyncGuard(limiter)  # refuses a socket_timeout that drops late replies
        self.trusted = http.networks(trusted_proxies)
        self.skip, self._exempt, self.on_refused = skip, exemption(exempt), on_refused

    def _passes(self, request: Request, keys: Sequence[str] = ()) -> bool:
        """Skipped or exempt: decided by nobody (no write, no headers, no permit)."""
        if not keys:
            return bool(self.skip and self.skip(request)) or self._exempt(self.client_ip(request), ())
        return self._exempt(None, keys)

    def health(self) -> dict[str, Any]:
        """The guard's ``health()``: DOWN while a node's circuit is open or
        the module is missing (named). For a readiness check, not liveness."""
        return self.guard.health()

    def install(self, app: Any) -> None:
        # The status of the answer the endpoint returned (a JSONResponse(status_code=401)
        # is a failure too), for the scopes' counts="failures"/"successes".
        app.add_middleware(_StatusRecorder)

        async def handler(request: Request, exc: Exception) -> Response:
            assert isinstance(exc, ProblemError)
            return exc.response()
        app.add_exception_handler(ProblemError, handler)

        async def module_missing(request: Request, exc: Exception) -> Response:
            return _misconfigured(exc)
        app.add_exception_handler(ModuleNotLoadedError, module_missing)

    # key resolvers
    def client_ip(self, request: Request) -> str:
        peer = request.client.host if request.client else None
        return http.client_ip(peer, request.headers.get("x-forwarded-for"), self.trusted)

    @staticmethod
    def header(name: str, *, problem: str = "unauthorized") -> Callable[[Request], str]:
        """A key from a request header (e.g. the user); missing: 401 (or 400)."""
        def resolve(request: Request) -> str:
            value = request.headers.get(name)
            if not value:
                raise (ProblemError.unauthorized if problem == "unauthorized" else ProblemError.bad_request)(
                    f"the {name} header is required")
            return value
        return resolve

    @staticmethod
    def bind(policy: Policy, key: Resolver, *, cost: Resolver | None = None, estimate: Resolver | None = None,
             zone: Resolver | None = None, subkeys: Resolver | None = None,
             overrides: Resolver | None = None) -> "Bound":
        """A policy and the resolvers of its key (cost, estimate, ...), for
        several policies on one route decided in one call:
        ``limits.depends([limits.bind(per_ip, limits.client_ip), limits.bind(per_phone, phone)])``."""
        return Bound(policy, key, {"cost": cost, "estimate": estimate, "zone": zone, "subkeys": subkeys,
                                   "overrides": overrides})

    async def _decide(self, request: Request, policy: Policy, key: Resolver, kw: Mapping[str, Resolver | None],
                      x_ratelimit: bool) -> tuple[PolicyDecision | None, list[tuple[str, str]]]:
        if self._passes(request):
            return None, []
        k = await _value(key, request)
        if self._passes(request, [k]):
            return None, []
        args = {name: await _value(r, request) for name, r in kw.items() if r is not None}
        try:
            decision = await self.guard.decide(policy, k, **http.resolved(args))
        except ValueError as e:  # the request's key, cost or estimate is out of the policy's range: before any call
            raise ProblemError.bad_request(str(e)) from None
        except ModuleNotLoadedError:
            raise  # install()'s handler (the middleware: its own) names it
        except RateLimitError as e:  # OOM, NOPERM, WRONGTYPE, ...: not Redis down, a 500 naming it (Spring's)
            raise ProblemError(*http.redis_refused(policy, e)) from None
        return self._answer(policy, decision, x_ratelimit, request)

    async def _decide_all(self, request: Request, bounds: "Sequence[Bound]", combined: Policy,
                          x_ratelimit: bool) -> tuple[PolicyDecision | None, list[tuple[str, str]]]:
        if self._passes(request):
            return None, []
        calls = []
        for b in bounds:
            k = await _value(b.key, request)
            args = {name: await _value(r, request) for name, r in b.kw.items() if r is not None}
            try:
                calls.append(b.policy.bind(k, **http.resolved(args)))
            except ValueError as e:  # as in _decide
                raise ProblemError.bad_request(str(e)) from None
        if self._passes(request, [c.key for c in calls]):
            return None, []
        try:
            decision = await self.guard.decide_all(calls)
        except ValueError as e:  # as in _decide: the request's input, before any call
            raise ProblemError.bad_request(str(e)) from None
        except ModuleNotLoadedError:
            raise
        except RateLimitError as e:  # as in _decide
            raise ProblemError(*http.redis_refused(combined, e)) from None
        return self._answer(combined, decision, x_ratelimit, request)

    def _decider(self, policy: "Policy | Sequence[Bound]", key: Resolver | None, kw: Mapping[str, Resolver | None],
                 x_ratelimit: bool) -> Callable[[Request], Awaitable[tuple[PolicyDecision | None,
                                                                          list[tuple[str, str]]]]]:
        """One policy and its resolvers, or a list of ``bind(...)``: what decides a request."""
        for p in _policies(policy):
            check_socket_timeout(self.limiter.redis, p.budget.total_seconds())
        if isinstance(policy, Policy):
            if key is None:
                raise TypeError("a key resolver is needed: depends(policy, key=...)")
            return lambda request: self._decide(request, policy, key, kw, x_ratelimit)
        bounds = list(policy)
        if key is not None or any(v is not None for v in kw.values()):
            raise TypeError("with a list of limits.bind(...), give the key (and cost, estimate, ...) to each bind")
        if not bounds or not all(isinstance(b, Bound) for b in bounds):
            raise TypeError("expected a Policy or a non-empty list of limits.bind(policy, key, ...)")
        if len(bounds) == 1:
            b = bounds[0]
            return lambda request: self._decide(request, b.policy, b.key, b.kw, x_ratelimit)
        combined = CombinedPolicy([b.policy for b in bounds])  # checks the bindings once, names the 503
        return lambda request: self._decide_all(request, bounds, combined, x_ratelimit)

    def _answer(self, policy: Policy, decision: PolicyDecision | None, x_ratelimit: bool,
                request: Request) -> tuple[PolicyDecision | None, list[tuple[str, str]]]:
        if decision is None:
            if policy.fail == "closed":
                raise ProblemError(*http.unavailable(policy))
            return None, []  # fail open: proceed without rate-limit headers
        if decision.limited:
            if self.on_refused is not None:
                raise _CustomRefusal(self.on_refused(request, refusal_of(decision, [], x_ratelimit)))
            raise ProblemError(*http.refusal(decision, x_ratelimit=x_ratelimit))
        return decision, http.rate_limit_headers(decision, x_ratelimit=x_ratelimit)

    def depends(self, policy: "Policy | Sequence[Bound]", key: Resolver | None = None, *, x_ratelimit: bool = False,
                cost: Resolver | None = None, zone: Resolver | None = None, subkeys: Resolver | None = None,
                overrides: Resolver | None = None) -> Callable[..., Awaitable[PolicyDecision | None]]:
        """``Depends(limits.depends(policy, key=limits.client_ip))``: decides
        before the endpoint; the endpoint gets the decision (None when failing open).
        Several policies on one route: a list of ``limits.bind(policy, key, ...)``,
        decided in one call (two ``Depends`` are two separate decisions)."""
        for p in _policies(policy):
            _no_permit(p, "depends()")
        decide = self._decider(policy, key, {"cost": cost, "zone": zone, "subkeys": subkeys,
                                             "overrides": overrides}, x_ratelimit)

        async def dependency(request: Request, response: Response) -> PolicyDecision | None:
            decision, headers = await decide(request)
            for k, v in headers:
                response.headers[k] = v
            return decision
        return dependency

    def scope(self, policy: "Policy | Sequence[Bound]", key: Resolver | None = None, *, x_ratelimit: bool = False,
              estimate: Resolver | None = None, zone: Resolver | None = None, subkeys: Resolver | None = None,
              overrides: Resolver | None = None) -> Callable[..., AsyncIterator[AsyncPermit | None]]:
        """``Depends(limits.scope(policy, key=..., estimate=...))``: takes the
        lease and the estimate before the endpoint and, when the endpoint ends
        (return, exception, cancellation), releases and settles to
        ``permit.used(n)``. None when failing open. A list of
        ``limits.bind(...)``: one decision, one permit for every policy."""
        decide = self._decider(policy, key, {"estimate": estimate, "zone": zone, "subkeys": subkeys,
                                             "overrides": overrides}, x_ratelimit)
        budget = (policy if isinstance(policy, Policy) else CombinedPolicy([b.policy for b in policy])).budget

        async def dependency(request: Request, response: Response) -> AsyncIterator[AsyncPermit | None]:
            decision, headers = await decide(request)
            for k, v in headers:
                response.headers[k] = v
            if decision is None:
                yield None
                return
            permit = AsyncPermit(self.limiter, decision)
            try:
                yield permit
                # counts="failures"/"successes" (outcome.py): the status answered (the
                # endpoint's own Response, recorded by install()'s middleware), else the
                # one set on the injected Response
                note_outcome(permit, _answered_status(request) or response.status_code or 200)
            except BaseException:  # the endpoint raised (an HTTPException included): a failure
                note_outcome(permit, None)
                raise
            finally:  # return, exception or cancellation: release and settle
                await self.guard.close(permit, budget.total_seconds())
        return dependency


class _CustomRefusal(ProblemError):
    """The Response of the app's ``on_refused``, through ProblemError's paths."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code, [], b"")
        self._response = response

    def response(self) -> Response:
        return self._response


_STATUS = "redis_rl.status"


class _StatusRecorder:
    """A pure ASGI middleware (``install``): records the status of the answer
    in the request's scope, so a scope closing after the response sees what
    the endpoint returned (a ``JSONResponse(status_code=401)``), not only an
    exception or the injected ``Response``'s status."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        box: list[int | None] = [None]
        scope[_STATUS] = box

        async def recording(message: Any) -> None:
            if message["type"] == "http.response.start":
                box[0] = message["status"]
            await send(message)
        await self.app(scope, receive, recording)


def _answered_status(request: Request) -> int | None:
    box = request.scope.get(_STATUS)
    return box[0] if box else None


class RateLimitMiddleware(BaseHTTPMiddleware):
    """Decides the requests whose path is in ``routes`` (path -> (policy, key
    resolver)) before the app runs; adds the headers to its answer.
    ``default``: the limit of every other path (a path mapped to None opts
    out: a health check, a route with its own ``Depends``)."""

    def __init__(self, app: Any, *, limits: RateLimits,
                 routes: "Mapping[str, tuple[Policy, Resolver] | Sequence[Bound] | None]" = {},
                 default: "tuple[Policy, Resolver] | Sequence[Bound] | None" = None,
                 x_ratelimit: bool = False) -> None:
        super().__init__(app)
        for r in [*routes.values(), default]:
            if r is not None:
                for p in _policies(r[0] if isinstance(r, tuple) else r):
                    _no_permit(p, "RateLimitMiddleware")
        self.limits, self.x_ratelimit = limits, x_ratelimit

        def decider(r: Any) -> Any:  # (policy, key) or a list of limits.bind(...) (decided in one call)
            return None if r is None else limits._decider(
                *((r[0], r[1], {}) if isinstance(r, tuple) else (r, None, {})), x_ratelimit)
        self.routes = {path: decider(r) for path, r in routes.items()}
        self.default = decider(default)

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        decide = self.routes[path] if path in self.routes else self.default
        if decide is None:
            return await call_next(request)
        try:
            _, headers = await decide(request)
        except ProblemError as e:
            return e.response()
        except ModuleNotLoadedError as e:  # raised outside the app's exception handlers
            return _misconfigured(e)
        response = await call_next(request)
        for k, v in headers:
            response.headers[k] = v
        return response
