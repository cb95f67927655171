"""OpenTelemetry metrics from the decision hooks (see redis_rl.metrics):
``RateLimiter(client, hooks=[OpenTelemetryHooks()])``. Uses the global
MeterProvider unless given a ``meter``; only opentelemetry-api is imported
(the SDK and its exporters are the application's choice)."""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics

from ..hooks import DecisionEvent, DecisionHooks, LateGiveBack
from . import LATENCY_BUCKETS


class OpenTelemetryHooks(DecisionHooks):
    def __init__(self, meter: Any = None) -> None:
        meter = meter or metrics.get_meter("redis_rl")
        self.decisions = meter.create_histogram(
            "ratelimit.decisions", unit="s",
            description="Rate-limit decisions and their latency (the Redis round trip included)",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS))
        self.fallbacks = meter.create_counter(
            "ratelimit.fallbacks", description="Rate-limit decisions answered by the policy's Redis-down mode")
        self.late = meter.create_counter(
            "ratelimit.late_give_backs",
            description="Admissions whose reply landed after the budget, given back at once")

    def decided(self, event: DecisionEvent) -> None:
        self.decisions.record(event.seconds, {"policy": event.policy, "outcome": event.outcome,
                                              "limit": event.limit or "none"})
        if event.mode is not None:
            self.fallbacks.add(1, {"policy": event.policy, "mode": event.mode})

    def gave_back_late(self, event: LateGiveBack) -> None:
        self.late.add(1, {"policy": event.policy})
