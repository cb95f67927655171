"""The Redis-down guard: after the first failure requests stop touching
Redis (no reconnect per request) and one probe PINGs every 250 ms; the first
answer closes the circuit. Driven by a stand-in limiter that counts calls."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
import redis

from redis_rl import Policy, sliding_window
from redis_rl.guard import AsyncGuard, Guard
from redis_rl.scope import AsyncPermit, Permit

POLICY = Policy("p", [sliding_window("w", 1, timedelta(seconds=1))], budget=timedelta(milliseconds=100))


class Down:
    def __init__(self):
        self.decides = 0
        self.pings = 0
        self.up = False
        self.redis = self

    def decide(self, *a, **kw):
        self.decides += 1
        raise redis.exceptions.ConnectionError("Connection refused")

    def ping(self):
        self.pings += 1
        if not self.up:
            raise redis.exceptions.ConnectionError("Connection refused")
        return True


class AsyncDown(Down):
    async def decide(self, *a, **kw):
        return Down.decide(self)

    async def ping(self):
        return Down.ping(self)


def test_sync_guard_one_failure_then_circuit_then_probe_recovers(caplog):
    caplog.set_level("WARNING", logger="redis_rl")
    down = Down()
    guard = Guard(down)  # type: ignore[arg-type]
    assert [guard.decide(POLICY, "k") for _ in range(100)] == [None] * 100
    assert down.decides == 1  # 99 requests never touched Redis
    t0 = time.monotonic()
    while down.pings < 2:
        assert time.monotonic() - t0 < 3.0
        time.sleep(0.01)
    assert down.pings <= (time.monotonic() - t0) / 0.25 + 2  # one probe, every 250 ms
    down.up = True
    t0 = time.monotonic()
    while guard.open:
        assert time.monotonic() - t0 < 1.0
        time.sleep(0.01)
    assert guard.decide(POLICY, "k") is None
    assert down.decides == 2  # closed again: the next decision went to Redis
    # the recovery is logged once, as the async guard's (an operator sees the outage end)
    assert caplog.text.count("redis_rl: Redis answers again") == 1, caplog.text


@pytest.mark.anyio
async def test_async_guard_times_out_within_budget_and_recovers(caplog):
    class Slow(AsyncDown):
        async def decide(self, *a, **kw):
            self.decides += 1
            await asyncio.sleep(10)  # accepted, never answered

    slow = Slow()
    guard = AsyncGuard(slow)  # type: ignore[arg-type]
    t0 = time.monotonic()
    results = await asyncio.gather(*(guard.decide(POLICY, "k") for _ in range(20)))
    assert results == [None] * 20 and time.monotonic() - t0 < 1.0  # the 100 ms budget, all at once
    assert [await guard.decide(POLICY, "k") for _ in range(50)] == [None] * 50
    assert slow.decides == 20  # the concurrent first wave only; none once open
    slow.up = True
    t0 = time.monotonic()
    while guard.open:
        assert time.monotonic() - t0 < 1.0
        await asyncio.sleep(0.01)
    # a standalone server has no node name: "Redis answers again", not "Redis  answers again"
    assert "redis_rl: Redis answers again" in caplog.text, caplog.text


@pytest.mark.anyio
async def test_async_guard_gives_back_a_decision_that_lands_after_its_budget():
    """Redis stalls (SIGSTOP) while the decision is on the wire: the guard
    answers None within the budget, yet Redis runs the RL.ALL when it
    resumes. The lease and the estimate it took must be given back, or every
    stall leaks a lease for its whole TTL (2 stalls lock an API key out of a
    2-in-flight limit for a minute) and the estimate for the day."""
    import signal

    import redis.asyncio

    from redis_rl import AsyncRateLimiter, concurrency, quota
    from servers import Server, wait_until

    policy = Policy("stall", [concurrency("inflight", 2, timedelta(seconds=60)),
                              quota("tokens", "UTC", "day", 1000, metered=True)],
                    budget=timedelta(milliseconds=200))
    with Server() as s:
        raw = s.client()
        client = redis.asyncio.Redis(port=s.port)
        guard = AsyncGuard(AsyncRateLimiter(client), probe_interval=0.05)
        inflight_key, tokens_key = "stall:{k}:inflight", "stall:{k}:tokens"

        def state():
            held = 2 - raw.execute_command("RL.LEASEPEEK", inflight_key, "*", 2, "COST", 0)[3]
            left = raw.execute_command("RL.QUOTAPEEK", tokens_key, "*", "UTC", "DAY", 1000, "COST", 0)[3]
            return held, left

        await guard.limiter.ensure_module()
        s.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            assert await guard.decide(policy, "k", estimate=100) is None
            assert time.monotonic() - t0 < 1.0
        finally:
            s.proc.send_signal(signal.SIGCONT)
        # Redis runs the stalled RL.ALL now; whatever it took comes back.
        deadline = time.monotonic() + 5
        while (await asyncio.to_thread(state)) != (0, 1000):
            assert time.monotonic() < deadline, f"leaked (held, tokens left): {state()}"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # and stays given back
        assert state() == (0, 1000)
        await client.aclose()
        raw.close()


@pytest.mark.anyio
async def test_async_guard_close_answers_within_its_budget_while_redis_stalls():
    """A settlement that Redis does not answer holds the request no longer
    than the budget; it goes on in the background and lands when Redis
    resumes (the lease is back)."""
    import signal

    import redis.asyncio

    from redis_rl import AsyncRateLimiter, concurrency
    from servers import Server

    policy = Policy("stall2", [concurrency("inflight", 2, timedelta(seconds=60))])
    with Server() as s:
        raw = s.client()
        client = redis.asyncio.Redis(port=s.port)
        limiter = AsyncRateLimiter(client)
        guard = AsyncGuard(limiter, probe_interval=0.05)
        decision = await guard.decide(policy, "k")
        assert decision is not None and decision.allowed
        permit = AsyncPermit(limiter, decision)

        def held():
            return 2 - raw.execute_command("RL.LEASEPEEK", "stall2:{k}:inflight", "*", 2, "COST", 0)[3]

        assert held() == 1
        s.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            await asyncio.wait_for(guard.close(permit, 0.2), 5)
            assert time.monotonic() - t0 < 1.0
        finally:
            s.proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 5
        while await asyncio.to_thread(held) != 0:
            assert time.monotonic() < deadline, "the lease was not given back"
            await asyncio.sleep(0.05)
        await client.aclose()
        raw.close()


def _oom_policy(name):
    from redis_rl import concurrency, quota
    return Policy(name, [concurrency("inflight", 2, timedelta(seconds=60)),
                         quota("tokens", "UTC", "day", 1000, metered=True)])


def _held_and_left(raw, name):
    held = 2 - raw.execute_command("RL.LEASEPEEK", f"{name}:{{k}}:inflight", "*", 2, "COST", 0)[3]
    left = raw.execute_command("RL.QUOTAPEEK", f"{name}:{{k}}:tokens", "*", "UTC", "DAY", 1000, "COST", 0)[3]
    return held, left


@pytest.mark.anyio
async def test_a_settlement_the_server_refuses_is_logged_not_raised(server, raw, caplog):
    """Over maxmemory Redis refuses the DEBIT of a usage above the estimate
    (releases and refunds still run). The work is done: closing the scope
    logs the refusal instead of failing the request (a 500 for a served
    call), and the lease is back — as the Node package reports it to onError."""
    import redis.asyncio

    from redis_rl import AsyncRateLimiter, RateLimiter

    client = redis.asyncio.Redis(port=server.port)
    limiter = AsyncRateLimiter(client)
    guard, sync_guard = AsyncGuard(limiter), Guard(RateLimiter(server.client()))
    decision = await guard.decide(_oom_policy("oom1"), "k", estimate=10)
    permit = AsyncPermit(limiter, decision)
    permit.used(50)
    sync_decision = sync_guard.decide(_oom_policy("oom2"), "k", estimate=10)
    sync_permit = Permit(sync_guard.limiter, sync_decision)
    sync_permit.used(50)
    raw.config_set("maxmemory", 1)
    try:
        await guard.close(permit, 1.0)
        sync_guard.close(sync_permit)
    finally:
        raw.config_set("maxmemory", 0)
    assert _held_and_left(raw, "oom1") == (0, 990)  # released; the debit of 40 refused
    assert _held_and_left(raw, "oom2") == (0, 990)
    assert caplog.text.count("OOM command not allowed") == 2, caplog.text
    await client.aclose()


@pytest.mark.anyio
async def test_acquire_cancelled_while_deciding_gives_the_lease_back():
    """``async with limiter.acquire(...)`` cancelled while its RL.ALL is on
    the wire (a client that went away during a stall): the call still runs
    on Redis when it resumes, and what it took is given back."""
    import signal

    import redis.asyncio

    from redis_rl import AsyncRateLimiter, concurrency, quota
    from servers import Server

    policy = Policy("cancel", [concurrency("inflight", 2, timedelta(seconds=60)),
                               quota("tokens", "UTC", "day", 1000, metered=True)])
    with Server() as s:
        raw = s.client()
        client = redis.asyncio.Redis(port=s.port)
        limiter = AsyncRateLimiter(client)
        await limiter.ensure_module()
        entered = []

        async def request():
            async with limiter.acquire(policy, "k", estimate=100):
                entered.append(True)

        s.proc.send_signal(signal.SIGSTOP)
        try:
            task = asyncio.ensure_future(request())
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            s.proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 5
        while (await asyncio.to_thread(_held_and_left, raw, "cancel")) != (0, 1000):
            assert time.monotonic() < deadline, f"leaked (held, tokens left): {_held_and_left(raw, 'cancel')}"
            await asyncio.sleep(0.05)
        assert entered == []
        await client.aclose()
        raw.close()


def _held(raw, key):
    return 2 - raw.execute_command("RL.LEASEPEEK", key, "*", 2, "COST", 0)[3]


@pytest.mark.anyio
@pytest.mark.parametrize("socket_timeout, budget_ms", [(0.3, 1000), (0.4, 200)])
async def test_async_guard_releases_a_lease_whose_reply_was_lost(socket_timeout, budget_ms):
    """A socket timeout shorter than the stall drops the reply (before the
    budget, or while the guard awaits it late), yet Redis runs the RL.ALL it
    had read once it resumes. The guard chose the lease's token, so it
    releases it when Redis answers again: no lease held for its 60 s TTL."""
    import redis.asyncio

    from redis_rl import AsyncRateLimiter, concurrency, quota
    from servers import Server

    policy = Policy("lost", [concurrency("inflight", 2, timedelta(seconds=60)),
                             quota("tokens", "UTC", "day", 1000, metered=True)],
                    budget=timedelta(milliseconds=budget_ms))
    with Server() as s:
        raw = s.client()
        client = redis.asyncio.Redis(port=s.port, socket_timeout=socket_timeout)
        # A timeout this short is refused by default (it drops replies Redis
        # still runs); allowed here to drive the path of a reply lost with
        # its connection.
        # No runtime limits: their background read would hold the pooled
        # connection through the stall, and the decision's new connection
        # would stall in its handshake before RL.ALL is even written.
        guard = AsyncGuard(AsyncRateLimiter(client, runtime_limits=False), probe_interval=0.05, check_timeouts=False)
        await guard.limiter.ensure_module()
        import signal
        s.proc.send_signal(signal.SIGSTOP)
        try:
            assert await guard.decide(policy, "k", estimate=100) is None
            await asyncio.sleep(max(0.0, socket_timeout + 0.2 - budget_ms / 1000))  # the late read times out too
        finally:
            s.proc.send_signal(signal.SIGCONT)
        assert raw.info("commandstats")["cmdstat_rl.all"]["calls"] == 1  # it did run
        deadline = time.monotonic() + 5
        while await asyncio.to_thread(_held, raw, "lost:{k}:inflight") != 0:
            assert time.monotonic() < deadline, "the lease stays held until its TTL"
            await asyncio.sleep(0.05)
        while guard.open:  # the probe closes the circuit right after the release
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await client.aclose()
        raw.close()


def test_sync_guard_releases_a_lease_whose_reply_was_lost():
    """The sync guard's budget is the socket timeout: the reply of a call
    that outlives it is lost, yet Redis runs it on resuming; the lease is
    released by its token once the probe finds Redis again."""
    import signal

    from redis_rl import RateLimiter, concurrency
    from servers import Server

    policy = Policy("lost", [concurrency("inflight", 2, timedelta(seconds=60))])
    with Server() as s:
        raw = s.client()
        # No runtime limits: their first read would hold the pooled connection
        # through the stall (as in the asyncio test above).
        guard = Guard(RateLimiter(redis.Redis(port=s.port, socket_timeout=0.3), runtime_limits=False),
                      probe_interval=0.05)
        guard.limiter.ensure_module()
        s.proc.send_signal(signal.SIGSTOP)
        try:
            assert guard.decide(policy, "k") is None
        finally:
            s.proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 5
        while raw.info("commandstats").get("cmdstat_rl.lease", {}).get("calls") != 1 or _held(raw, "lost:{k}:inflight"):
            assert time.monotonic() < deadline, "the lease stays held until its TTL"
            time.sleep(0.05)
        raw.close()


def test_sync_guard_close_while_redis_is_down_logs_and_returns(caplog):
    """Redis goes away during a Flask scope: closing the permit logs and
    returns (the view's answer stands), it does not raise."""
    from redis_rl import RateLimiter, concurrency
    from servers import Server

    policy = Policy("down", [concurrency("inflight", 2, timedelta(seconds=60))])
    with Server() as s:
        guard = Guard(RateLimiter(redis.Redis(port=s.port, socket_timeout=0.3, socket_connect_timeout=0.3)))
        decision = guard.decide(policy, "k")
        assert decision is not None and decision.allowed
        s.stop()
        guard.close(Permit(guard.limiter, decision))
    assert "could not release/settle down" in caplog.text
    assert guard.open
    # a standalone server has no node name: one space, not "Redis  unavailable"
    assert "redis_rl: Redis unavailable (" in caplog.text, caplog.text
    h = guard.health()
    assert (h["status"], h["open"], h["detail"]) == ("DOWN", ["*"], "Redis cannot be reached: circuit open for *"), h


@pytest.mark.anyio
async def test_a_full_connection_pool_does_not_open_the_circuit(server):
    """``max_connections`` reached in a burst: redis-py raises
    ConnectionError("Too many connections") before sending anything. Those
    requests fail open/closed alone; Redis is fine, so the circuit stays
    closed and the next request is decided (it opened for every request)."""
    import redis.asyncio

    from redis_rl import AsyncRateLimiter

    client = redis.asyncio.Redis(port=server.port, max_connections=2)
    guard = AsyncGuard(AsyncRateLimiter(client))
    await guard.limiter.ensure_module()
    policy = Policy("pool", [sliding_window("w", 1000, timedelta(seconds=60))])
    results = await asyncio.gather(*(guard.decide(policy, "k") for _ in range(20)))
    assert any(r is None for r in results), "the burst did not exhaust the pool"
    assert any(r is not None and r.allowed for r in results)
    assert not guard.open
    assert (await guard.decide(policy, "k")) is not None
    await client.aclose()
