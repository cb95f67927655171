"""Decision hooks (redis_rl.hooks) and the metrics made from them
(redis_rl.metrics: OpenTelemetry, Prometheus), against real servers:
admitted, refused with the binding limit, the Redis-down answer, a late
give-back, latency; labels are names, never keys."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta

import pytest
import redis
import redis.asyncio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from conftest import Server
from redis_rl import (FAIL_OPEN, AsyncRateLimiter, Policy, RateLimiter, concurrency, quota, sliding_window)
from redis_rl.guard import AsyncGuard, Guard
from redis_rl.hooks import DecisionEvent, DecisionHooks, LateGiveBack
from redis_rl.metrics.otel import OpenTelemetryHooks
from redis_rl.metrics.prometheus import PrometheusHooks

S = timedelta(seconds=1)


class Recorder(DecisionHooks):
    def __init__(self) -> None:
        self.events: list[DecisionEvent | LateGiveBack] = []

    def decided(self, event: DecisionEvent) -> None:
        self.events.append(event)

    def gave_back_late(self, event: LateGiveBack) -> None:
        self.events.append(event)


class Broken(DecisionHooks):
    def decided(self, event: DecisionEvent) -> None:
        raise RuntimeError("a metrics backend failing")


def otel() -> tuple[OpenTelemetryHooks, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return OpenTelemetryHooks(MeterProvider(metric_readers=[reader]).get_meter("test")), reader


def otel_points(reader: InMemoryMetricReader) -> dict[str, list]:
    out: dict[str, list] = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = list(m.data.data_points)
    return out


def test_sync_hooks_and_both_backends(server, key):
    rec, (ot, reader), registry = Recorder(), otel(), CollectorRegistry()
    limiter = RateLimiter(server.client(), hooks=[Broken(), rec, ot, PrometheusHooks(registry)])
    guard = Guard(limiter)
    p = Policy("sms", [sliding_window("short", 2, 10 * S), sliding_window("long", 5, 3600 * S)], prefix=key)
    got = [guard.decide(p, f"phone-{key}") for _ in range(3)]
    assert [d.limited for d in got] == [False, False, True]  # a hook that raises fails no decision
    assert [(e.policy, e.outcome, e.limit, e.mode) for e in rec.events] == [
        ("sms", "admitted", None, None), ("sms", "admitted", None, None), ("sms", "refused", "short", None)]
    assert all(0 < e.seconds < 1 for e in rec.events)

    def sample(name, **labels):
        return registry.get_sample_value(name, labels)
    assert sample("ratelimit_decisions_seconds_count", policy="sms", outcome="admitted", limit="none") == 2
    assert sample("ratelimit_decisions_seconds_count", policy="sms", outcome="refused", limit="short") == 1
    assert 0 < sample("ratelimit_decisions_seconds_sum", policy="sms", outcome="refused", limit="short") < 1
    points = otel_points(reader)["ratelimit.decisions"]
    assert sorted((dict(pt.attributes)["outcome"], dict(pt.attributes)["limit"], pt.count) for pt in points) == [
        ("admitted", "none", 2), ("refused", "short", 1)]
    # Names only: no label value holds the caller's key.
    labels = [v for m in registry.collect() for s in m.samples for v in s.labels.values()]
    assert labels and not any(key in v for v in labels)


def test_sync_unavailable_counts_the_redis_down_answer():
    rec, registry = Recorder(), CollectorRegistry()
    dead = redis.Redis(port=1, socket_timeout=0.5, socket_connect_timeout=0.5)
    limiter = RateLimiter(dead, check_module=False, hooks=[rec, PrometheusHooks(registry)])
    guard = Guard(limiter, probe_interval=60)
    closed = Policy("api-custom", [sliding_window("custom", 5, 30 * S)])
    opened = Policy("api-default", [sliding_window("default", 10, 60 * S)], fail=FAIL_OPEN)
    assert guard.decide(closed, "ip") is None and guard.decide(opened, "ip") is None  # the second: circuit open
    assert [(e.policy, e.outcome, e.mode) for e in rec.events] == [
        ("api-custom", "unavailable", "fail_closed"), ("api-default", "unavailable", "fail_open")]
    assert registry.get_sample_value("ratelimit_fallbacks_total", {"policy": "api-custom", "mode": "fail_closed"}) == 1
    assert registry.get_sample_value("ratelimit_fallbacks_total", {"policy": "api-default", "mode": "fail_open"}) == 1
    assert registry.get_sample_value("ratelimit_decisions_seconds_count",
                                     {"policy": "api-default", "outcome": "unavailable", "limit": "none"}) == 1


def test_hooks_are_checked_at_construction(server):
    with pytest.raises(TypeError, match="decided"):
        RateLimiter(server.client(), hooks=[object()])


@pytest.mark.anyio
async def test_async_late_reply_given_back_and_counted():
    """Redis paused past the budget: the decision answers unavailable (fail
    closed), and when the reply lands its lease and estimate go back — one
    late give-back, seen by the hooks and in both backends."""
    rec, (ot, reader), registry = Recorder(), otel(), CollectorRegistry()
    with Server() as s:
        client = redis.asyncio.Redis(port=s.port, socket_timeout=11)  # at least the budget + 10 s: the late reply is read
        limiter = AsyncRateLimiter(client, hooks=[rec, ot, PrometheusHooks(registry)])
        guard = AsyncGuard(limiter, probe_interval=0.05)
        p = Policy("llm", [concurrency("inflight", 2, 60 * S), quota("tokens", "UTC", "day", 1000, metered=True)],
                   budget=timedelta(milliseconds=200))
        assert not (await guard.decide(p, "k", estimate=10)).limited
        s.proc.send_signal(signal.SIGSTOP)
        try:
            assert await guard.decide(p, "k", estimate=100) is None
        finally:
            s.proc.send_signal(signal.SIGCONT)
        for _ in range(200):
            if any(isinstance(e, LateGiveBack) for e in rec.events):
                break
            await asyncio.sleep(0.02)
        assert [type(e).__name__ for e in rec.events] == ["DecisionEvent", "DecisionEvent", "LateGiveBack"]
        assert (rec.events[1].outcome, rec.events[1].mode) == ("unavailable", "fail_closed")
        assert 0.2 <= rec.events[1].seconds < 1.0  # the budget, not the pause
        assert rec.events[2] == LateGiveBack("llm")
        raw = s.client()
        assert raw.execute_command("RL.LEASEPEEK", "llm:{k}:inflight", "*", 2, "COST", 0)[3] == 1  # the first only
        assert 1000 - raw.execute_command("RL.QUOTAPEEK", "llm:{k}:tokens", "*", "UTC", "DAY", 1000, "COST", 0)[3] == 10
        raw.close()
        await client.aclose()
    assert registry.get_sample_value("ratelimit_late_give_backs_total", {"policy": "llm"}) == 1
    assert [pt.value for pt in otel_points(reader)["ratelimit.late_give_backs"]] == [1]


def readme_block(marker: str) -> str:
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    found = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if marker in b]
    assert len(found) == 1, marker
    return found[0]


def test_readme_metrics_block_runs_as_written(server, capsys):
    block = readme_block("PrometheusHooks(")
    code = block.replace('REDIS_URL = "redis://localhost:6379"', f'REDIS_URL = "redis://127.0.0.1:{server.port}"')
    assert code != block
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip() == "1.0"
