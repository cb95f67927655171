"""Runs one case of clients/conformance/ (its README is the schema) through
the Python client, against a fake Redis that records every command and
answers the case's replies: what the package sends, decides and answers."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from redis_rl import Policy, RateLimiter, concurrency, lockout, quota, sliding_window, token_bucket
from redis_rl.http import rate_limit_headers, refusal
from redis_rl.scope import Permit

CASES = Path(__file__).resolve().parents[2] / "conformance" / "cases"
TOKEN = re.compile(r"[\x21-\x22\x24-\x7e]{1,64}")


def load() -> list[dict[str, Any]]:
    cases = []
    for f in sorted(CASES.glob("*.json")):
        for c in json.loads(f.read_text())["cases"]:
            cases.append(dict(c, file=f.name))
    return cases


def limit(d: dict[str, Any]):
    kind, name = d["kind"], d["name"]
    opts: dict[str, Any] = {}
    for k in ("shared", "subkey", "problem"):
        if k in d:
            opts[k] = d[k]
    if d.get("cost") == "estimate":
        opts["metered"] = True
    if kind == "window":
        return sliding_window(name, d["count"], d["window"], **opts)
    if kind == "bucket":
        return token_bucket(name, d["rate"], d["per"], d["burst"], **opts)
    if kind == "quota":
        return quota(name, d["zone"], d["period"], d["limit"], **opts)
    if kind == "concurrency":
        return concurrency(name, d["limit"], d["ttl"], **opts)
    if kind == "lockout":
        return lockout(name, d["max"], d["window"], d["lock_time"], **opts)
    raise AssertionError(f"unknown kind {kind}")


def policy(d: dict[str, Any]) -> Policy:
    kw: dict[str, Any] = {}
    if "prefix" in d:
        kw["prefix"] = d["prefix"]
    if "tag" in d:
        kw["tag"] = d["tag"]
    if "inflight_retry_after" in d:
        kw["inflight_retry_after"] = timedelta(milliseconds=d["inflight_retry_after"])
    # limits as text ("5/minute;100/hour", limits-text.json) go to Policy as they are
    limits = [limit(x) for x in d["limits"]] if isinstance(d["limits"], list) else d["limits"]
    return Policy(d["name"], limits, **kw)


def masked(argv: list[str], tokens: list[str]) -> list[str]:
    """The argv with every lease token as ``<token>`` (checked: one token per
    decision, each a valid lease token)."""
    out = list(argv)
    for i in range(1, len(out)):
        if out[i - 1] == "TOKEN" or (out[0] == "RL.RELEASE" and i >= 3):
            assert TOKEN.fullmatch(out[i]), f"invalid lease token {out[i]!r}"
            tokens.append(out[i])
            out[i] = "<token>"
    return out


DEFAULT_REPLIES = {"RL.CHECK": [0, 1, 1, 0, -1, 0], "RL.THROTTLE": [0, 1, 1, 0, -1, 0], "RL.QUOTA": [0, 1, 1, 0, -1, 0],
                   "RL.LEASE": [0, 1, 1, 0, -1, 0, "t"], "RL.LOCKCOUNT": [0, 1, 0], "RL.ALL": [0, 1, 1, 1, 0, -1, 0]}


class FakeRedis:
    """Records commands; answers each with the reply of the expected command
    it equals (token-masked), or the next reply in order when none does."""

    def __init__(self, case: dict[str, Any]) -> None:
        self.store = case.get("store", {})
        self.expected = [c for c in case.get("expect", {}).get("commands", [])]
        self.replies = case.get("replies", [])
        self.sent: list[list[str]] = []
        self.tokens: list[str] = []

    def execute_command(self, *args: Any, **_: Any) -> Any:
        argv = masked([str(a) for a in args], self.tokens)
        self.sent.append(argv)
        i = self.expected.index(argv) if argv in self.expected else len(self.sent) - 1
        if not self.replies:  # a case about argv only: an admission of the command's shape
            return DEFAULT_REPLIES[argv[0]]
        if i >= len(self.replies):
            raise AssertionError(f"no reply for {argv}")
        return self.replies[i]

    def hgetall(self, key: str) -> dict[str, str]:
        return dict(self.store.get(key, {}))

    def pipeline(self, transaction: bool = False) -> "FakePipeline":
        return FakePipeline(self)

    def get_redis_connection(self, node: "FakeNode") -> "FakeRedis":
        """As RedisCluster's: the client of one node (the fake itself)."""
        return node.redis_connection


class FakePipeline:
    def __init__(self, redis: FakeRedis) -> None:
        self.redis, self.calls = redis, []

    def execute_command(self, *args: Any) -> None:
        self.calls.append([str(a) for a in args])

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        out = []
        for argv in self.calls:
            self.redis.settled.append(masked(argv, self.redis.tokens))
            out.append([1] if argv[0] == "RL.RELEASE" else [0, 1, 1, 1, -1, 1])
        return out


class FakeNode:
    """A Cluster primary per slot: every command still reaches the fake."""

    def __init__(self, slot: int, redis: FakeRedis) -> None:
        self.name = f"slot-{slot}"
        self.redis_connection = redis


def call_kw(c: dict[str, Any]) -> dict[str, Any]:
    return {k: c[k] for k in ("cost", "estimate", "zone", "subkeys") if k in c}


def run(case: dict[str, Any]) -> dict[str, Any]:
    """What the client does with the case: ``{"refused": {"field": ...}}``, or
    the commands sent and, with replies, the decision, headers and settlement."""
    fake = FakeRedis(case)
    fake.settled = []  # type: ignore[attr-defined]
    try:
        policies = {p["name"]: policy(p) for p in case["policies"]}
        rl = RateLimiter(fake, check_module=False)  # type: ignore[arg-type]
        rl.details_supported = True  # as the module of this tree answers its probe
        rl.runtime_limits.load(*policies.values())  # the store read before the first decision
        if case.get("cluster"):
            from redis.crc import key_slot
            rl.cluster = True
            rl._node = lambda key: FakeNode(key_slot(key.encode() if isinstance(key, str) else key), fake)  # type: ignore
        calls = case["calls"]
        if len(calls) == 1:
            d = rl.decide(policies[calls[0]["policy"]], calls[0]["key"], **call_kw(calls[0]))
        else:
            d = rl.decide_all([policies[c["policy"]].bind(c["key"], **call_kw(c)) for c in calls])
    except (ValueError, TypeError) as e:
        return {"refused": {"field": getattr(e, "field", None), "error": f"{type(e).__name__}: {e}"}}
    finally:
        if "rl" in locals():
            rl.runtime_limits.close()
    out: dict[str, Any] = {"commands": fake.sent}
    if len(set(fake.tokens)) > 1:
        out["tokens"] = "several lease tokens in one decision"
    if not case.get("replies"):
        return out
    headers = dict(rate_limit_headers(d))
    if d.limited:
        headers.update((k, v) for k, v in refusal(d)[1] if k == "Retry-After")
    out["decision"] = {
        "limited": d.limited, "binding": d.binding, "problem": d.problem if d.limited else None,
        "retry_after_ms": None if d.retry_after is None else d.retry_after // timedelta(milliseconds=1),
        "headers": headers,
    }
    if "used" in case and not d.limited:
        permit = Permit(rl, d)
        if case["used"] is not None:
            permit.used(case["used"])
        permit.close()
        out["settlement"] = fake.settled  # type: ignore[attr-defined]
    return out
