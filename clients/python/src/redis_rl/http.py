"""HTTP mapping shared by the adapters (clients/DESIGN.md "HTTP answers"):
problem JSON (RFC 9457), Retry-After, RateLimit-Policy / RateLimit
(draft-ietf-httpapi-ratelimit-headers, structured-field lists), opt-in
X-RateLimit-*, and the client IP behind trusted proxies."""

from __future__ import annotations

import ipaddress
import json
import logging
import math
from datetime import timedelta
from typing import Any, Iterable, Sequence

from . import args as a
from .policy import Policy, PolicyDecision

PROBLEM_BASE = "https://redis-ratelimit.dev/problems/"
PROBLEM_JSON = "application/problem+json"


def _seconds_up(d: timedelta) -> int:
    return math.ceil(d / timedelta(milliseconds=1) / 1000)


def policy_header(policy: Policy) -> str:
    items = []
    for lim in policy.limits:
        w = lim.header_w
        items.append(f'"{lim.name}";q={lim.header_q}' + (f";w={w}" if w is not None else ""))
    return ", ".join(items)


def rate_limit_headers(decision: PolicyDecision, *, x_ratelimit: bool = False) -> list[tuple[str, str]]:
    """RateLimit-Policy (every limit, the policy's order, ``q`` as decided) and
    RateLimit (each limit's ``r`` remaining and ``t`` reset seconds rounded up)."""
    p = decision.policy
    # q as decided (a limit changed at run time shows its new value; a token
    # bucket's q is its rate, not the burst its reply names).
    q = {lim.name: decision.q(lim.name) for lim in p.limits}
    pol = []
    for lim in p.limits:
        w = lim.header_w
        pol.append(f'"{lim.name}";q={q[lim.name]}' + (f";w={w}" if w is not None else ""))
    rl = [f'"{lim.name}";r={known.remaining};t={_seconds_up(known.reset_after)}'
          for lim in p.limits if (known := decision.states.get(lim.name)) is not None]
    out = [("RateLimit-Policy", ", ".join(pol))]
    if rl:
        out.append(("RateLimit", ", ".join(rl)))
    if x_ratelimit:
        st = decision.states.get(decision.binding, decision.state)
        out += [("X-RateLimit-Limit", str(q[decision.binding])), ("X-RateLimit-Remaining", str(st.remaining)),
                ("X-RateLimit-Reset", str(_seconds_up(st.reset_after)))]
    return out


def problem(status: int, kind: str, title: str, detail: str) -> bytes:
    return json.dumps({"type": PROBLEM_BASE + kind, "title": title, "status": status, "detail": detail}).encode()


def refusal(decision: PolicyDecision, *, x_ratelimit: bool = False) -> tuple[int, list[tuple[str, str]], bytes]:
    """429 problem JSON with Retry-After (none when waiting cannot help) and the headers."""
    headers = [("Content-Type", PROBLEM_JSON)] + rate_limit_headers(decision, x_ratelimit=x_ratelimit)
    retry = decision.retry_after
    detail = f"limit {decision.binding!r} of {decision.policy.origin(decision.binding).name!r} exceeded"
    if retry is not None:
        headers.append(("Retry-After", str(max(0, _seconds_up(retry)))))
        detail += f"; retry after {_seconds_up(retry)} s"
    else:
        detail += "; waiting cannot help"
    return 429, headers, problem(429, decision.problem, "Too Many Requests", detail)


def unavailable(policy: Policy) -> tuple[int, list[tuple[str, str]], bytes]:
    body = problem(503, "unavailable", "Service Unavailable",
                   f"rate limits of {policy.name!r} cannot be decided: Redis is unreachable")
    return 503, [("Content-Type", PROBLEM_JSON)], body


def misconfigured(detail: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """500 ``…/problems/misconfigured`` (as the Spring starter answers): the
    limits cannot be decided at all, e.g. the module is not loaded."""
    return 500, [("Content-Type", PROBLEM_JSON)], problem(500, "misconfigured", "Internal Server Error", detail)


def redis_refused(policy: Policy, error: Exception) -> tuple[int, list[tuple[str, str]], bytes]:
    """Redis answered the decision with an error reply that is not "Redis
    unavailable" (OOM over maxmemory, NOPERM, WRONGTYPE at a key another app
    wrote, ...): the deployment's mistake, which no Redis-down mode can
    hide. The Spring starter's answer, detail and log: a 500
    ``misconfigured`` naming the policy and the server's text, one line at
    error level."""
    detail = f"Redis refused rate limit {policy.name!r}: {error}"
    logging.getLogger("redis_rl").error("redis_rl: %s", detail)
    return misconfigured(detail)


def bad_request(detail: str) -> tuple[int, list[tuple[str, str]], bytes]:
    return 400, [("Content-Type", PROBLEM_JSON)], problem(400, "bad-request", "Bad Request", detail)


def unauthorized(detail: str) -> tuple[int, list[tuple[str, str]], bytes]:
    return 401, [("Content-Type", PROBLEM_JSON)], problem(401, "unauthorized", "Unauthorized", detail)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
LOOPBACK: tuple[Network, ...] = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def networks(trusted: Iterable[str | Network]) -> tuple[Network, ...]:
    return tuple(t if isinstance(t, (ipaddress.IPv4Network, ipaddress.IPv6Network))
                 else ipaddress.ip_network(t, strict=False) for t in trusted)


def _trusted(addr: str, trusted: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(addr.strip())
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def client_ip(peer: str | None, forwarded_for: str | None, trusted: Sequence[Network] = LOOPBACK) -> str:
    """The client's address: the peer's, unless the peer is a trusted proxy;
    then the right-most ``X-Forwarded-For`` address that is not trusted (a
    client can prepend anything, but not what our proxies appended)."""
    peer = peer or ""
    if not forwarded_for or not _trusted(peer, trusted):
        return peer
    for hop in reversed([h.strip() for h in forwarded_for.split(",") if h.strip()]):
        if not _trusted(hop, trusted):
            return hop
    return peer


def resolved(values: dict[str, Any]) -> dict[str, Any]:
    """The values of a request's resolvers (``cost=``, ``estimate=``, ...). A
    cost or estimate resolver that gives nothing (None: a missing header or
    JSON field) is the client's bad input, refused with an error naming the
    field — a 400 in every adapter, as the Spring starter answers a cost
    expression that is null — not the default of 1 it would silently be
    charged (CLIENTS.md §2, §5). Called without a resolver, a policy's
    estimate is still its cost (the golden case ``llm-no-estimate``)."""
    for name in ("cost", "estimate"):
        if name in values and values[name] is None:
            raise a.invalid(name, f"the request gives no {name}: its resolver returned None")
    return values

