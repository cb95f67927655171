"""Reply parsing, DETAILS included (from SPEC's reply shape), and 50
concurrent callers on one key admitted exactly up to the limit."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
import redis.asyncio

from redis_rl import AllDecision, AsyncRateLimiter, RateLimiter, RateLimitError, RuleState

S = timedelta(seconds=1)


def test_all_reply_with_details_parses_per_clause_rule_states():
    reply = [1, 2, 1, 60, 0, 1500, 60000,
             [[0, 1, 2, 1, -1, 10000], [0, 2, 5, 4, -1, 3600000]],
             [[1, 1, 60, 0, 1500, 60000]]]
    d = AllDecision.from_reply(reply)
    assert (d.limited, d.clause, d.rule, d.limit, d.remaining) == (True, 2, 1, 60, 0)
    assert d.retry_after == timedelta(milliseconds=1500) and d.reset_after == timedelta(minutes=1)
    assert d.details == (
        (RuleState(False, 1, 2, 1, None, 10 * S), RuleState(False, 2, 5, 4, None, timedelta(hours=1))),
        (RuleState(True, 1, 60, 0, timedelta(milliseconds=1500), timedelta(minutes=1)),),
    )
    with pytest.raises(Exception):
        d.limited = False  # frozen


def test_malformed_replies_raise_rate_limit_error():
    with pytest.raises(RateLimitError):
        AllDecision.from_reply([1, 2, 3])
    with pytest.raises(RateLimitError):  # a rule state of three integers: found when details are read
        AllDecision.from_reply([0, 1, 1, 1, 1, -1, 5, [[0, 1, 2]]]).details
    with pytest.raises(RateLimitError):
        AllDecision.from_reply([0, 1, 1, 1, 1, -1, 5, 7])
    with pytest.raises(RateLimitError):
        RuleState.from_reply([0, 1, 1, 1, b"x", 5])


def test_fifty_threads_on_one_key_admit_exactly_the_limit(server, key):
    rl = RateLimiter(server.client(max_connections=60))
    rl.ensure_module()
    admitted = []
    barrier = threading.Barrier(50)

    def call():
        barrier.wait()
        admitted.append(rl.check(key, [(17, timedelta(minutes=1))]).allowed)

    threads = [threading.Thread(target=call) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted.count(True) == 17 and len(admitted) == 50


@pytest.mark.anyio
async def test_fifty_tasks_on_one_key_admit_exactly_the_limit(server, key):
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    rl = AsyncRateLimiter(client)
    results = await asyncio.gather(*(rl.throttle(key, [(9, 1, timedelta(hours=1))]) for _ in range(50)))
    assert sum(d.allowed for d in results) == 9
    await client.aclose()
