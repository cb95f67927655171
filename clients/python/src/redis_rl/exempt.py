"""Exempt callers and custom refusals for the HTTP adapters — the names and
semantics of the Node adapters' (express, Fastify): ``skip`` (a request
never limited: a health check), ``exempt`` (callers never limited: addresses
and CIDR ranges of the client IP, and resolved keys), ``on_refused`` (a
custom answer to a refusal, given the decision and the answer the adapter
would send). An exempt or skipped request is decided by nobody: it writes
nothing, gets no headers and no permit (None, as when failing open)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import http
from .policy import PolicyDecision

__all__ = ["Exemptions", "Refusal", "exemption", "refusal_of"]


@dataclass(frozen=True)
class Exemptions:
    """``ips``: addresses or CIDR ranges (``"10.0.0.0/8"``, ``"::1"``); ``keys``: resolved caller keys."""
    ips: Sequence[str] = ()
    keys: Sequence[str] = ()


@dataclass(frozen=True)
class Refusal:
    """What ``on_refused(request, refusal)`` is given: the decision and the
    answer the adapter would send (``body``: the problem JSON as a dict)."""
    decision: PolicyDecision
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)


def refusal_of(decision: PolicyDecision, headers: list[tuple[str, str]], x_ratelimit: bool = False) -> Refusal:
    status, more, body = http.refusal(decision, x_ratelimit=x_ratelimit)
    return Refusal(decision, status, list(more), json.loads(body))


def exemption(spec: "Exemptions | Mapping[str, Iterable[str]] | None") -> Callable[[str | None, Sequence[str]], bool]:
    """``(ip, keys) -> exempt``, built once: a malformed address or range is a
    ValueError here, at start (``error.field == "exempt"``)."""
    if spec is None:
        return lambda ip, keys: False
    ips = spec.ips if isinstance(spec, Exemptions) else spec.get("ips", ())
    keys = spec.keys if isinstance(spec, Exemptions) else spec.get("keys", ())
    nets = []
    for entry in ips:
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            e = ValueError(f"exempt ips: {entry!r} is not an address or a CIDR range")
            e.field = "exempt"  # type: ignore[attr-defined]
            raise e from None
    known = frozenset(keys)

    def exempt(ip: str | None, resolved: Sequence[str]) -> bool:
        if ip:
            try:
                addr = ipaddress.ip_address(ip)
            except ValueError:
                addr = None
            if addr is not None:
                if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
                    addr = addr.ipv4_mapped  # an IPv4 client on a dual-stack socket
                if any(addr in n for n in nets if n.version == addr.version):
                    return True
        return any(k in known for k in resolved)
    return exempt
