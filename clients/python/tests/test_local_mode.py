"""The ``local`` Redis-down mode (redis_rl.local_mode): while Redis cannot
decide, a policy with ``fail="local"`` is decided in process on the local
backend — exact within one instance (costs and estimates charged and
settled, leases held until released, Retry-After from the local state),
memory bounded by refusing rather than forgetting a spent key — and by
Redis again once it answers. "Redis" here is a local backend of its own
behind a switch (down: every command fails to connect), on the same
hand-moved clock: no redis-server, no sleeping but for the probe."""

from __future__ import annotations

import time

import flask
import pytest
import redis

from redis_rl import FAIL_LOCAL, Policy, RateLimiter, AsyncRateLimiter, concurrency, lockout, sliding_window
from redis_rl.guard import AsyncGuard, Guard
from redis_rl.hooks import DecisionHooks
from redis_rl.local import AsyncLocalRedis, LocalRedis, ManualClock
from redis_rl.local_mode import LocalMode
from redis_rl.scope import AsyncPermit, Permit

START = 1_796_638_800_000  # 2026-12-07T10:20:00Z: a minute and an hour under way


class _Down:
    """What a client to a Redis that refuses connections raises."""

    down = True

    def _check(self) -> None:
        if self.down:
            raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


class SwitchRedis(_Down, LocalRedis):
    def execute_command(self, *args, **options):
        self._check()
        return super().execute_command(*args, **options)

    def pipeline(self, transaction=True, shard_hint=None):
        self._check()
        return super().pipeline(transaction, shard_hint)


class AsyncSwitchRedis(_Down, AsyncLocalRedis):
    async def execute_command(self, *args, **options):
        self._check()
        return await super().execute_command(*args, **options)

    def pipeline(self, transaction=True, shard_hint=None):
        self._check()
        return super().pipeline(transaction, shard_hint)


@pytest.fixture
def clock():
    return ManualClock(START)


def sync_guard(clock, **bounds):
    rl = RateLimiter(SwitchRedis(clock), check_module=False, runtime_limits=False)
    rl.local_mode = LocalMode(clock=clock, **bounds)
    return rl, Guard(rl, probe_interval=0.05)


def test_estimates_are_charged_and_settled_while_redis_is_down(clock):
    rl, guard = sync_guard(clock)
    llm = Policy("llm", [sliding_window("tokens", 10_000, 60_000, metered=True)], fail=FAIL_LOCAL)
    # 10 calls estimating 5,000 of a 10,000-token minute, none closed yet: 2 pass, the others wait for the first
    admitted = []
    for i in range(10):
        d = guard.decide(llm, "customer:7", estimate=5_000)
        if d.limited:
            assert d.retry_after.total_seconds() == 60 - i
        else:
            admitted.append(d)
        clock.advance(1000)
    assert len(admitted) == 2
    assert admitted[0].states["tokens"].remaining == 5_000  # the local state, for the headers
    # the first used 1,000 of its 5,000: settled on the local backend, 4,000 come back
    permit = Permit(rl, admitted[0])
    permit.used(1_000)
    guard.close(permit)
    assert not guard.decide(llm, "customer:7", estimate=4_000).limited
    d = guard.decide(llm, "customer:7", estimate=1)
    assert d.limited and d.retry_after.total_seconds() == 50  # the first call's units leave 60 s after it came
    assert rl.redis.engine.keys == {}  # Redis saw none of it


def test_a_lease_is_held_until_its_permit_closes_and_a_lockout_locks(clock):
    rl, guard = sync_guard(clock)
    jobs = Policy("jobs", [concurrency("running", 1, 60_000)], fail="local")
    d = guard.decide(jobs, "k")
    assert not d.limited
    assert guard.decide(jobs, "k").limited
    guard.close(Permit(rl, d))
    assert not guard.decide(jobs, "k").limited
    login = Policy("login", [lockout("attempts", 2, 60_000, 900_000)], fail="local")
    assert [guard.decide(login, "ann").limited for _ in range(3)] == [False, False, True]
    clock.advance(300_000)
    assert guard.decide(login, "ann").retry_after.total_seconds() == 600


def test_past_the_bound_new_keys_are_refused_and_a_spent_key_is_never_forgotten(clock):
    rl, guard = sync_guard(clock, max_keys=100, max_entries=10_000)
    hourly = Policy("h", [sliding_window("per-hour", 1, 3_600_000)], fail="local")
    assert not guard.decide(hourly, "victim").limited
    results = [guard.decide(hourly, f"flood{i}") for i in range(1000)]
    refused = [d for d in results if d.limited]
    assert len(results) - len(refused) == 99 and len(refused) == 901
    assert {d.retry_after.total_seconds() for d in refused} == {3600.0}  # until the earliest key ends
    assert {(d.binding, d.state.remaining) for d in refused} == {("per-hour", 0)}
    engine = rl.local_mode.engine
    assert len(engine.keys) == 100
    assert guard.decide(hourly, "victim").retry_after.total_seconds() == 3600
    clock.advance(3_600_000)  # every key ended: swept, room again
    assert not guard.decide(hourly, "victim").limited
    assert not guard.decide(hourly, "new").limited
    assert len(engine.keys) == 2


def test_the_entries_are_bounded_too(clock):
    rl, guard = sync_guard(clock, max_keys=1000, max_entries=50)
    p = Policy("p", [sliding_window("w", 1000, 60_000)], fail="local")
    assert not any(guard.decide(p, "k").limited for _ in range(50))
    d = guard.decide(p, "k")
    assert d.limited and d.retry_after.total_seconds() == 60
    assert rl.local_mode.engine.entries == 50  # the refused call was undone
    clock.advance(60_000)
    assert not guard.decide(p, "k").limited
    assert rl.local_mode.engine.entries == 1


def test_closed_wins_and_open_policies_pass_without_being_counted(clock):
    rl, guard = sync_guard(clock)
    events = []

    class Seen(DecisionHooks):
        def decided(self, event):
            events.append((event.policy, event.outcome, event.mode))

    rl.hooks = (Seen(),)
    local = Policy("local", "1/minute", fail="local")
    open_ = Policy("open", "1/minute", fail="open")
    closed = Policy("closed", "1/minute", fail="closed")
    assert guard.decide_all([open_.bind("a"), closed.bind("a")]) is None  # the adapter answers 503
    assert guard.decide(open_, "a") is None  # through, no decision
    d = guard.decide_all([open_.bind("a"), local.bind("a")])
    assert not d.limited and d.policy.name == "local"
    assert guard.decide_all([open_.bind("a"), local.bind("a")]).limited  # the local window of 1 is full
    # the hooks (metrics) hear each as Redis unavailable, answered by the mode in force
    assert events == [("open+closed", "unavailable", "fail_closed"), ("open", "unavailable", "fail_open"),
                      ("open+local", "unavailable", "local"), ("open+local", "unavailable", "local")]


def test_redis_back_decides_again_with_its_own_counters(clock):
    rl, guard = sync_guard(clock)
    p = Policy("p", "2/minute", fail="local")
    assert [guard.decide(p, "k").limited for _ in range(3)] == [False, False, True]
    assert guard.health()["status"] == "DOWN"
    rl.redis.down = False
    deadline = time.monotonic() + 5
    while guard.decide(p, "k").limited:  # the probe (every 50 ms) closes the circuit: then Redis decides
        assert time.monotonic() < deadline, "Redis decides again"
        time.sleep(0.02)
    assert not guard.decide(p, "k").limited  # Redis's own counter: 2 of 2, none of the local ones
    assert guard.decide(p, "k").limited
    assert len(rl.redis.engine.keys) == 1


@pytest.mark.anyio
async def test_the_async_guard_decides_locally_and_settles_there(clock):
    rl = AsyncRateLimiter(AsyncSwitchRedis(clock), check_module=False, runtime_limits=False)
    rl.local_mode = LocalMode(clock=clock)
    guard = AsyncGuard(rl, probe_interval=0.05, check_timeouts=False)
    jobs = Policy("jobs", [concurrency("running", 1, 60_000), sliding_window("w", 3, 60_000)], fail="local")
    d = await guard.decide(jobs, "k")
    assert not d.limited and d.states["w"].remaining == 2
    assert (await guard.decide(jobs, "k")).binding == "running"
    await guard.close(AsyncPermit(rl, d), 0.5)  # the lease released on the local backend
    assert not (await guard.decide(jobs, "k")).limited


def test_a_flask_endpoint_answers_429_with_the_local_retry_after(clock):
    from redis_rl.adapters.flask import FlaskRateLimits
    rl = RateLimiter(SwitchRedis(clock), check_module=False, runtime_limits=False)
    rl.local_mode = LocalMode(clock=clock)
    app = flask.Flask("local-mode")
    limits = FlaskRateLimits(rl)

    @app.get("/")
    @limits.limit(Policy("api", "3/minute", fail="local"), key=lambda: "k")
    def index():
        return "ok"

    client = app.test_client()
    answers = [client.get("/") for _ in range(4)]
    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    assert answers[2].headers["RateLimit"] == "\"3-per-1m\";r=0;t=60"  # the local state
    assert answers[3].headers["Retry-After"] == "60"
