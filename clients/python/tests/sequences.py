"""Runs a golden *sequence* case of clients/conformance/sequences/ (its README
section is the schema): a series of calls over a controlled clock, each with
the decision and headers expected — against the local backend
(redis_rl.local) and against the real module, so both decide alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import redis

from conformance import limit
from redis_rl import Policy, RateLimiter
from redis_rl.http import rate_limit_headers, refusal
from redis_rl.local import ManualClock
from redis_rl.scope import Permit

SEQUENCES = Path(__file__).resolve().parents[2] / "conformance" / "sequences"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: every case starts here


def load() -> list[dict[str, Any]]:
    return [c for f in sorted(SEQUENCES.glob("*.json")) for c in json.loads(f.read_text())["cases"]]


def policy(d: dict[str, Any], prefix: str = "") -> Policy:
    kw: dict[str, Any] = {"prefix": prefix + d.get("prefix", "")}
    for k in ("tag", "counts"):
        if k in d:
            kw[k] = d[k]
    return Policy(d["name"], [limit(x) for x in d["limits"]], **kw)


class ClockedRedis(redis.Redis):
    """The real server, with every ``now`` (``*``) sent as the case's clock:
    the module decides at the time the sequence says."""

    def __init__(self, clock: ManualClock, **kw: Any) -> None:
        super().__init__(**kw)
        self.clock = clock

    def _at(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(str(self.clock()) if a == "*" else a for a in args)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        return super().execute_command(*self._at(args), **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        send = pipe.execute_command
        pipe.execute_command = lambda *args, **kw: send(*self._at(args), **kw)  # type: ignore[method-assign]
        return pipe


def run(case: dict[str, Any], client: redis.Redis, clock: ManualClock, prefix: str = "") -> list[str]:
    """Every difference between the case's expectations and the decisions; [] when none."""
    policies = {p["name"]: policy(p, prefix) for p in case["policies"]}
    rl = RateLimiter(client)
    held: dict[str, Permit] = {}
    wrong: list[str] = []
    for n, step in enumerate(case["steps"], 1):
        if "advance" in step:
            clock.advance(step["advance"])
            continue
        if "close" in step:
            permit = held.pop(step["close"])
            if "used" in step:
                permit.used(step["used"])
            permit.close()
            continue
        c = step["call"]
        d = rl.decide(policies[c["policy"]], c["key"], **{k: c[k] for k in ("cost", "estimate") if k in c})
        headers = dict(rate_limit_headers(d))
        if d.limited:
            headers.update((k, v) for k, v in refusal(d)[1] if k == "Retry-After")
        got = {"limited": d.limited, "binding": d.binding, "headers": headers,
               "retry_after_ms": None if d.retry_after is None else int(d.retry_after.total_seconds() * 1000)}
        want = step["expect"]
        for k, v in want.items():
            g = {h: got["headers"].get(h) for h in v} if k == "headers" else got[k]
            if g != v:
                wrong.append(f"step {n}: {k} {g!r}, expected {v!r}")
        if d.limited:
            continue
        permit = Permit(rl, d, renew=False)  # the clock is the case's: no renewal timer
        if step.get("outcome") == "success":
            permit.succeeded()
        elif step.get("outcome") == "failure":
            permit.failed()
        if "hold" in step:
            held[step["hold"]] = permit
        else:
            if "used" in step:
                permit.used(step["used"])
            permit.close()
    for permit in held.values():
        permit.close()
    return wrong
