"""Flask: ``@limits.limit(policy, key=limits.client_ip)`` decides before the
view and adds the headers to its answer; 429/503 problem JSON as in
clients/DESIGN.md. ``scope=True`` holds the lease and estimate for the view
(``flask.g.rate_limit_permit.used(n)``; None when failing open) and settles
when it returns or raises. Several policies on one view (a list of
``limits.bind(...)``, or stacked decorators) are decided in one call."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import flask
from werkzeug.exceptions import BadRequest

from .. import http
from ..exempt import Refusal, exemption, refusal_of
from ..client import RateLimiter
from ..guard import Guard
from ..combined import CombinedPolicy
from ..errors import ModuleNotLoadedError, RateLimitError
from ..local import LocalRedis  # in process: no socket, so no budget to warn about
from ..policy import Policy, PolicyDecision
from ..outcome import note_outcome
from ..scope import Permit


def _response(status: int, headers: list[tuple[str, str]], body: bytes) -> flask.Response:
    r = flask.Response(body, status=status)
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


_PASSES = object()  # a skipped or exempt request


class ProblemError(Exception):
    """An HTTP problem answer (400, 401, ...) raised by a key resolver, as in
    the FastAPI and Django adapters: ``limits.header(name)`` raises it, and so
    may a resolver of the app's own."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        super().__init__(status)
        self.status, self.headers, self.body = status, headers, body

    def response(self) -> flask.Response:
        return _response(self.status, self.headers, self.body)

    @classmethod
    def bad_request(cls, detail: str) -> "ProblemError":
        return cls(*http.bad_request(detail))

    @classmethod
    def unauthorized(cls, detail: str) -> "ProblemError":
        return cls(*http.unauthorized(detail))


def _passed() -> flask.Response:
    """The default limit's stand-in view (init_app): admitted, the real view runs next."""
    r = flask.Response()
    flask.g._redis_rl_passed = r
    return r


class FlaskRateLimits:
    def __init__(self, limiter: RateLimiter, *,
                 trusted_proxies: Iterable[str | http.Network] = ("127.0.0.0/8", "::1/128"),
                 skip: Callable[[flask.Request], bool] | None = None, exempt: Any = None,
                 on_refused: Callable[[flask.Request, Refusal], Any] | None = None) -> None:
        """``skip(request)``: requests never limited; ``exempt``: callers never
        limited (``Exemptions(ips=[...], keys=[...])`` or a dict of those);
        ``on_refused(request, refusal)``: the answer to a refusal, anything a
        view may return (redis_rl.exempt)."""
        self.limiter = limiter
        self.guard = Guard(limiter)
        self.trusted = http.networks(trusted_proxies)
        self.skip, self._exempt, self.on_refused = skip, exemption(exempt), on_refused
        if _socket_timeout(limiter.redis) is None and not isinstance(limiter.redis, LocalRedis):
            # The sync guard's budget is the socket timeout: without one a
            # frozen Redis holds every limited request for as long as it lasts.
            logging.getLogger("redis_rl").warning(
                "redis_rl: the Redis client has no socket_timeout, so a decision has no time budget (a frozen "
                "Redis holds each limited request until it answers): give it socket_timeout=0.5, "
                "socket_connect_timeout=0.5")

    def health(self) -> dict[str, Any]:
        """The guard's ``health()``: DOWN while a node's circuit is open or
        the module is missing (named). For a readiness check, not liveness."""
        return self.guard.health()

    def init_app(self, app: flask.Flask, *, default: "Policy | Sequence[Bound]",
                 key: Callable[[], str] | None = None, x_ratelimit: bool = False) -> None:
        """``default``: the limit of every view of ``app`` that has no
        ``@limits.limit`` of its own (``@limits.exempt`` opts a view out),
        decided before the view (a ``before_request`` hook); a policy with a
        lease, an estimate or ``counts`` needs the decorator (scope)."""
        limited = self.limit(default, key=key, x_ratelimit=x_ratelimit)(_passed)

        def before() -> Any:
            view = app.view_functions.get(flask.request.endpoint or "")
            if view is None or getattr(view, "__rate_limited__", None) is not None or getattr(view, "__rate_limit_exempt__", False):
                return None
            rv = limited()
            if rv is not flask.g.get("_redis_rl_passed"):
                return rv  # 429, 503, 400: the answer
            flask.g._redis_rl_headers = [(k, v) for k, v in rv.headers.items() if k.lower().startswith(("ratelimit", "x-ratelimit"))]
            return None

        def after(response: flask.Response) -> flask.Response:
            for k, v in flask.g.pop("_redis_rl_headers", []):
                response.headers[k] = v
            return response
        app.before_request(before)
        app.after_request(after)

    @staticmethod
    def exempt(view: Callable[..., Any]) -> Callable[..., Any]:
        """A view the app's default limit (``init_app``) leaves alone."""
        view.__rate_limit_exempt__ = True  # type: ignore[attr-defined]
        return view

    def client_ip(self) -> str:
        return http.client_ip(flask.request.remote_addr, flask.request.headers.get("X-Forwarded-For"), self.trusted)

    @staticmethod
    def header(name: str, *, problem: str = "unauthorized") -> Callable[[], str]:
        """A key from a request header (e.g. the user or an API key); missing
        or empty: a 401 problem (or 400 with ``problem="bad_request"``), before
        any Redis call — ``RateLimits.header`` of the FastAPI adapter."""
        def resolve() -> str:
            value = flask.request.headers.get(name)
            if not value:
                raise (ProblemError.unauthorized if problem == "unauthorized" else ProblemError.bad_request)(
                    f"the {name} header is required")
            return value
        return resolve

    @staticmethod
    def bind(policy: Policy, key: Callable[[], str], **decide_kw: Callable[[], Any]) -> "Bound":
        """A policy with the resolvers of its key (cost, estimate, ...), for
        several policies on one view decided in one call:
        ``@limits.limit([limits.bind(per_ip, key=limits.client_ip), limits.bind(per_phone, key=phone)])``."""
        return Bound(policy, key, dict(decide_kw))

    def limit(self, policy: "Policy | Sequence[Bound]", *, key: Callable[[], str] | None = None,
              x_ratelimit: bool = False, scope: bool = False,
              **decide_kw: Callable[[], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Limits a view by ``policy`` keyed by ``key()`` (decide_kw: ``cost=``,
        ``estimate=``, ``zone=``, ... as zero-argument callables); or by a list
        of ``limits.bind(...)``, decided in one call. Stacked ``@limits.limit``
        decorators combine too: one decision for all (the upper one's limits first)."""
        if isinstance(policy, Policy):
            if key is None:
                raise TypeError("a key resolver is needed: limit(policy, key=...)")
            bounds = [Bound(policy, key, dict(decide_kw))]
        else:
            bounds = list(policy)
            if key is not None or decide_kw:
                raise TypeError("with a list of limits.bind(...), give the key (and cost, ...) to each bind")
            if not bounds or not all(isinstance(b, Bound) for b in bounds):
                raise TypeError("expected a Policy or a non-empty list of limits.bind(policy, key, ...)")
        # Counting one outcome needs the permit's close, which knows the answer's status.
        scope = scope or any(b.policy.counts for b in bounds)
        for b in bounds:
            if b.policy.needs_permit and not scope:
                # Without a scope the lease and the estimate would never be given back.
                raise ValueError(f"policy {b.policy.name!r} holds a lease or an estimate: decorate with scope=True")

        def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
            inner: _Limited | None = getattr(view, "__rate_limits__", None)
            # A @limits.limit right below (not a decorator between that copied
            # its attributes): one decision for both.
            if inner is not None and inner.owner is self and getattr(view, "__rate_limited__", None) is view:
                return self._wrap(inner.view, bounds + inner.bounds, x_ratelimit or inner.x_ratelimit,
                                  scope or inner.scope)
            return self._wrap(view, bounds, x_ratelimit, scope)
        return decorator

    def _wrap(self, view: Callable[..., Any], bounds: list["Bound"], x_ratelimit: bool,
              scope: bool) -> Callable[..., Any]:
        # One policy: decided as before; several: one call (RateLimiter.decide_all).
        policy = bounds[0].policy if len(bounds) == 1 else CombinedPolicy([b.policy for b in bounds])

        def decide() -> "PolicyDecision | None | object":
            if (self.skip and self.skip(flask.request)) or self._exempt(self.client_ip(), ()):
                return _PASSES
            calls = [b.policy.bind(b.key(), **http.resolved({name: fn() for name, fn in b.kw.items()})) for b in bounds]
            if self._exempt(None, [c.key for c in calls]):
                return _PASSES
            if len(calls) == 1:
                x = calls[0]
                return self.guard.decide(x.policy, x.key, cost=x.cost, estimate=x.estimate, zone=x.zone,
                                         subkeys=x.subkeys, overrides=x.overrides)
            return self.guard.decide_all(calls)

        @functools.wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                decision = decide()
            except ProblemError as e:  # a resolver's own answer (limits.header: 401 when missing)
                return e.response()
            except ModuleNotLoadedError as e:  # a problem+json 500 naming it, not Flask's plain page
                logging.getLogger("redis_rl").error("redis_rl: %s", e)
                return _response(*http.misconfigured(str(e)))
            except RateLimitError as e:  # OOM, NOPERM, WRONGTYPE, ...: not Redis down, a 500 naming it (Spring's)
                return _response(*http.redis_refused(policy, e))
            except ValueError as e:  # the request's key, cost or estimate is out of range: before any call
                return _response(*http.bad_request(str(e)))
            except BadRequest as e:  # a resolver's request.get_json() on bad JSON, ...: 400 problem JSON
                return _response(*http.bad_request(f"invalid request: {e.description}"))
            if decision is _PASSES:  # skipped or exempt: decided by nobody (redis_rl.exempt)
                if scope:
                    flask.g.rate_limit_permit = None
                return view(*args, **kwargs)
            if decision is None:
                if policy.fail == "closed":
                    return _response(*http.unavailable(policy))
                if scope:  # failing open: there is no permit (as FastAPI's scope yields None)
                    flask.g.rate_limit_permit = None
                return view(*args, **kwargs)
            if decision.limited:
                if self.on_refused is not None:
                    return flask.make_response(self.on_refused(flask.request, refusal_of(decision, [], x_ratelimit)))
                return _response(*http.refusal(decision, x_ratelimit=x_ratelimit))
            if scope:
                permit = Permit(self.limiter, decision)
                flask.g.rate_limit_permit = permit
                deferred = False
                try:
                    rv = flask.make_response(view(*args, **kwargs))
                    note_outcome(permit, rv.status_code)  # counts="failures"/"successes" (outcome.py)
                    if rv.is_streamed:
                        # A streamed body is produced after the view returns: the
                        # lease and the estimate are held until the WSGI server
                        # closes the response (body sent, or the client gone),
                        # so a stream's permit.used(n) at its end still settles.
                        rv.call_on_close(lambda: self.guard.close(permit))
                        deferred = True
                except BaseException:
                    note_outcome(permit, None)
                    raise
                finally:  # return or exception: release and settle (a stream: on close)
                    if not deferred:
                        self.guard.close(permit)
            else:
                rv = view(*args, **kwargs)
            response = flask.make_response(rv)
            for k, v in http.rate_limit_headers(decision, x_ratelimit=x_ratelimit):
                response.headers[k] = v
            return response
        wrapped.__rate_limits__ = _Limited(self, view, bounds, x_ratelimit, scope)  # type: ignore[attr-defined]
        wrapped.__rate_limited__ = wrapped  # type: ignore[attr-defined]
        return wrapped


@dataclass(frozen=True)
class Bound:
    """A policy with the resolvers of its key, cost, estimate, ... (``FlaskRateLimits.bind``)."""

    policy: Policy
    key: Callable[[], str]
    kw: Mapping[str, Callable[[], Any]]


@dataclass(frozen=True)
class _Limited:
    """What a ``@limits.limit`` view holds, so a decorator stacked on it combines."""

    owner: FlaskRateLimits
    view: Callable[..., Any]
    bounds: list[Bound]
    x_ratelimit: bool
    scope: bool
