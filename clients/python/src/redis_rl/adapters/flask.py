"""Flask: ``@limits.limit(policy, key=limits.client_ip)`` decides before the
view and adds the headers to its answer; 429/503 problem JSON as in
clients/DESIGN.md. ``scope=True`` holds the lease and estimate for the view
(``flask.g.rate_limit_permit.used(n)``; None when failing open) and settles
when it returns or raises."""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

import flask

from .. import http
from ..client import RateLimiter
from ..guard import Guard
from ..policy import Policy
from ..scope import Permit


def _response(status: int, headers: list[tuple[str, str]], body: bytes) -> flask.Response:
    r = flask.Response(body, status=status)
    for k, v in headers:
        r.headers[k] = v
    return r


class FlaskRateLimits:
    def __init__(self, limiter: RateLimiter, *,
                 trusted_proxies: Iterable[str | http.Network] = ("127.0.0.0/8", "::1/128")) -> None:
        self.limiter = limiter
        self.guard = Guard(limiter)
        self.trusted = http.networks(trusted_proxies)

    def client_ip(self) -> str:
        return http.client_ip(flask.request.remote_addr, flask.request.headers.get("X-Forwarded-For"), self.trusted)

    def limit(self, policy: Policy, *, key: Callable[[], str], x_ratelimit: bool = False, scope: bool = False,
              **decide_kw: Callable[[], Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(view)
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                kw = {name: fn() for name, fn in decide_kw.items()}
                decision = self.guard.decide(policy, key(), **kw)
                if decision is None:
                    if policy.fail == "closed":
                        return _response(*http.unavailable(policy))
                    if scope:  # failing open: there is no permit (as FastAPI's scope yields None)
                        flask.g.rate_limit_permit = None
                    return view(*args, **kwargs)
                if decision.limited:
                    return _response(*http.refusal(decision, x_ratelimit=x_ratelimit))
                if scope:
                    permit = Permit(self.limiter, decision)
                    flask.g.rate_limit_permit = permit
                    try:
                        rv = view(*args, **kwargs)
                    finally:  # return or exception: release and settle
                        self.guard.close(permit)
                else:
                    rv = view(*args, **kwargs)
                response = flask.make_response(rv)
                for k, v in http.rate_limit_headers(decision, x_ratelimit=x_ratelimit):
                    response.headers[k] = v
                return response
            return wrapped
        return decorator
