"""The example apps' HTTP contract (SERVICES.md) as their tests read it: the
RateLimit header's items, endpoint 6 (`POST /llm/stream`) read line by line,
and waiting for a condition. One copy for examples/python/tests and
examples/services-test, which both put this directory on sys.path (for
servers.py) and both install httpx; nothing in integration/ imports it."""

from __future__ import annotations

import json
import time
from typing import Callable

import httpx

# The client address every check sends (a documentation range, RFC 5737).
XFF = {"X-Forwarded-For": "203.0.113.9"}


def items(field: str | None) -> dict[str, dict[str, int]]:
    """`"short";r=1;t=10, ...` → {"short": {"r": 1, "t": 10}}."""
    out: dict[str, dict[str, int]] = {}
    for item in (field or "").split(","):
        name, *params = item.strip().split(";")
        if name:
            out[json.loads(name)] = {k: int(v) for k, v in (p.split("=") for p in params)}
    return out


def stream(app, key: str, *, n: int = 1000, headers: dict[str, str] | None = None,
           leave_after: int | None = None, on_headers: Callable[[int], object] | None = None) -> dict:
    """Endpoint 6 of ``app`` (anything with a ``url``), its body read line by line; ``leave_after``
    lines: the client goes away; ``on_headers`` gets the status as soon as the headers are in."""
    h = {**XFF, "X-Api-Key": key, "X-Zone": "UTC", **(headers or {})}
    t0 = time.monotonic()
    with httpx.Client(base_url=app.url, timeout=10) as c:
        with c.stream("POST", "/llm/stream", json={"max_tokens": n}, headers=h) as r:
            out = {"status": r.status_code, "headers": r.headers, "lines": [], "to_headers": time.monotonic() - t0}
            if on_headers is not None:
                on_headers(r.status_code)
            if r.status_code != 200:
                r.read()
                return out
            for line in r.iter_lines():
                if not line:
                    continue
                out["lines"].append(json.loads(line))
                out.setdefault("to_first_line", time.monotonic() - t0)
                if leave_after is not None and len(out["lines"]) >= leave_after:
                    return out  # leaving the block closes the connection
    return out


def wait_until(what: str, predicate: Callable[[], bool], timeout: float = 2.0) -> None:
    """Polls ``predicate`` every 50 ms; fails with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
