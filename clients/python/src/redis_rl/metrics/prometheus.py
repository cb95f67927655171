"""Prometheus metrics from the decision hooks (see redis_rl.metrics):
``RateLimiter(client, hooks=[PrometheusHooks()])``. Registers in
prometheus_client's default registry unless given one: make it once per
process (a second registration of the same names is refused by the registry)."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram

from ..hooks import DecisionEvent, DecisionHooks, LateGiveBack
from . import LATENCY_BUCKETS


class PrometheusHooks(DecisionHooks):
    def __init__(self, registry: Any = REGISTRY) -> None:
        self.decisions = Histogram(
            "ratelimit_decisions_seconds", "Rate-limit decisions and their latency (the Redis round trip included)",
            ["policy", "outcome", "limit"], buckets=LATENCY_BUCKETS, registry=registry)
        self.fallbacks = Counter(
            "ratelimit_fallbacks", "Rate-limit decisions answered by the policy's Redis-down mode",
            ["policy", "mode"], registry=registry)
        self.late = Counter(
            "ratelimit_late_give_backs", "Admissions whose reply landed after the budget, given back at once",
            ["policy"], registry=registry)

    def decided(self, event: DecisionEvent) -> None:
        self.decisions.labels(event.policy, event.outcome, event.limit or "none").observe(event.seconds)
        if event.mode is not None:
            self.fallbacks.labels(event.policy, event.mode).inc()

    def gave_back_late(self, event: LateGiveBack) -> None:
        self.late.labels(event.policy).inc()
