"""Every typed call against the raw reply of the same command sent by hand
(at the same explicit `now`, on twin keys), sync and asyncio."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
import redis.asyncio

from redis_rl import (AllDecision, AsyncRateLimiter, Clause, DayHourDecision, Decision, LeaseDecision,
                      LockDecision, RateLimiter, RateLimitError, RuleState)

from conftest import server_ms

S = timedelta(seconds=1)


def fields(d: RuleState) -> list[int]:
    return [int(d.limited), d.rule, d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms]


def test_check_and_peek_match_raw_replies(server, raw, key):
    rl = RateLimiter(server.client())
    t = server_ms(raw)
    for i in range(4):
        d = rl.check(key + ":a", [(3, 10 * S), (10, timedelta(minutes=1))], now=t + i)
        assert isinstance(d, Decision)
        assert fields(d) == raw.execute_command("RL.CHECK", key + ":b", t + i, 3, 10_000, 10, 60_000)
    assert rl.check(key + ":a", [(3, 10 * S)], now=t + 5).limited
    assert d.limited and d.retry_after == timedelta(milliseconds=9_997) and not d.waiting_cannot_help
    p = rl.peek(key + ":a", [(3, 10_000)], cost=0, now=t + 6)
    assert fields(p) == raw.execute_command("RL.PEEK", key + ":b", t + 6, 3, 10_000, "COST", 0)
    r = rl.check(key + ":a", [(3, 10 * S)], cost=2, mode="refund", now=t + 7)
    assert fields(r) == raw.execute_command("RL.CHECK", key + ":b", t + 7, 3, 10_000, "COST", 2, "REFUND")
    assert r.remaining == 2
    db = rl.check(key + ":a", [(3, 10 * S)], cost=5, mode="debit", now=t + 8)
    assert fields(db) == raw.execute_command("RL.CHECK", key + ":b", t + 8, 3, 10_000, "COST", 5, "DEBIT")
    assert db.limited


def test_throttle_quota_lease_match_raw_replies(server, raw, key):
    rl = RateLimiter(server.client())
    t = server_ms(raw)
    for i in range(3):
        d = rl.throttle(key + ":ta", [(2, 2, S)], now=t)
        assert fields(d) == raw.execute_command("RL.THROTTLE", key + ":tb", t, 2, 2, 1000)
    # SPEC's example: [0,1,2,1,-1,500], [0,1,2,0,-1,1000], [1,1,2,0,500,1000]
    assert fields(d) == [1, 1, 2, 0, 500, 1000]
    p = rl.throttle_peek(key + ":ta", [(2, 2, S)], cost=0, now=t)
    assert fields(p) == raw.execute_command("RL.THROTTLEPEEK", key + ":tb", t, 2, 2, 1000, "COST", 0)
    res = rl.throttle(key + ":ta", [(2, 2, S)], reserve=S, now=t)
    assert fields(res) == raw.execute_command("RL.THROTTLE", key + ":tb", t, 2, 2, 1000, "RESERVE", 1000)

    sh = ZoneInfo("Asia/Shanghai")
    for i in range(3):
        q = rl.quota(key + ":qa", sh, {"day": 2, "hour": 5}, now=t)
        assert fields(q) == raw.execute_command("RL.QUOTA", key + ":qb", t, "Asia/Shanghai", "DAY", 2, "HOUR", 5)
    assert q.limited and q.rule == 1
    qp = rl.quota_peek(key + ":qa", "Asia/Shanghai", {"DAY": 2}, cost=0, now=t)
    assert fields(qp) == raw.execute_command("RL.QUOTAPEEK", key + ":qb", t, "Asia/Shanghai", "DAY", 2, "COST", 0)
    zero = rl.quota(key + ":qz", "UTC", {"day": 0})
    assert zero.limited and zero.waiting_cannot_help and zero.retry_after is None

    le = rl.lease(key + ":la", 2, 30 * S, token="job-1", now=t)
    assert isinstance(le, LeaseDecision) and le.token == "job-1"
    raw_le = raw.execute_command("RL.LEASE", key + ":lb", t, 2, 30_000, "TOKEN", "job-1")
    assert fields(le) + [le.token.encode()] == raw_le
    anon = rl.lease(key + ":la", 2, 30 * S, now=t)
    assert anon.allowed and anon.token and len(anon.token) == 8
    refused = rl.lease(key + ":la", 2, 30 * S, now=t)
    assert refused.limited and refused.token is None
    lp = rl.lease_peek(key + ":la", 2, cost=0, now=t)
    assert fields(lp) == [0, 1, 2, 0, -1, 30_000]
    assert rl.renew(key + ":la", 60 * S, ["job-1", "nope"], now=t) == (1, 0)
    assert rl.release(key + ":la", ["job-1", anon.token], now=t) == (1, 1)
    assert rl.release(key + ":la", "job-1", now=t) == (0,)


def test_dayhour_and_lockcount_match_raw_replies(server, raw, key):
    rl = RateLimiter(server.client())
    for i in range(3):
        d = rl.dayhour("{%s}:d" % key, "{%s}:h" % key, 5, 2, timedelta(days=1), timedelta(hours=1))
        assert isinstance(d, DayHourDecision)
        assert [d.day, d.hour] == raw.execute_command("RL.DAYHOUR", "{%s}:d2" % key, "{%s}:h2" % key, 5, 2,
                                                      86_400_000, 3_600_000)
    assert d.limited and d.hour_limited and not d.day_limited and (d.day, d.hour) == (2, 3)
    for i in range(4):
        lk = rl.lockcount("{%s}:l" % key, "{%s}:n" % key, 10 * S, 3, 30 * S)
    assert isinstance(lk, LockDecision)
    assert lk.limited and lk.count == 3 and lk.ttl == 30 * S
    again = rl.lockcount("{%s}:l" % key, "{%s}:n" % key, 10 * S, 3, 30 * S)
    assert again.limited and 29 * S < again.ttl <= 30 * S


def test_all_and_all_peek_match_raw_replies(server, raw, key):
    rl = RateLimiter(server.client())
    t = server_ms(raw)
    tag = "{%s}" % key

    def clauses(side):
        return [Clause.check(f"{tag}:{side}:w", [(2, 10 * S), (5, timedelta(hours=1))]),
                Clause.throttle(f"{tag}:{side}:b", [(10, 60, timedelta(minutes=1))]),
                Clause.lease(f"{tag}:{side}:l", 2, timedelta(seconds=60), token="tok1")]

    def raw_all(name, side, *tail):
        return raw.execute_command(name, 3, f"{tag}:{side}:w", f"{tag}:{side}:b", f"{tag}:{side}:l", t,
                                   "CHECK", 1, 2, 10_000, 5, 3_600_000, "THROTTLE", 2, 10, 60, 60_000,
                                   "LEASE", 3, 2, 60_000, "TOKEN", "tok1", *tail)

    for i in range(3):
        d = rl.all(clauses("a"), now=t)
        assert isinstance(d, AllDecision) and d.details is None
        assert [int(d.limited), d.clause] + fields(d)[1:] == raw_all("RL.ALL", "b")
    assert d.limited and d.clause == 1
    p = rl.all_peek(clauses("a"), now=t)
    assert [int(p.limited), p.clause] + fields(p)[1:] == raw_all("RL.ALLPEEK", "b")
    r = rl.all(clauses("a"), refund=True, now=t)
    assert [int(r.limited), r.clause] + fields(r)[1:] == raw_all("RL.ALL", "b", "REFUND")


def test_server_errors_carry_the_server_text(server, raw, key):
    rl = RateLimiter(server.client())
    raw.set(key, "x")
    with pytest.raises(RateLimitError) as e:
        rl.check(key, [(1, S)])
    assert str(e.value) == "WRONGTYPE Operation against a key holding the wrong kind of value"
    # A zone the local database has but a cost DEBIT the module refuses is not
    # reachable from typed calls; a clock guard error is: now far ahead.
    raw.execute_command("CONFIG", "SET", "ratelimit.max-future-ms", "1000")
    try:
        with pytest.raises(RateLimitError, match="now"):
            rl.check(key + ":f", [(1, S)], now=server_ms(raw) + 3_600_000)
    finally:
        raw.execute_command("CONFIG", "SET", "ratelimit.max-future-ms", "0")


@pytest.mark.anyio
async def test_async_twin_matches_raw_replies(server, raw, key):
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    rl = AsyncRateLimiter(client)
    t = server_ms(raw)
    for i in range(3):
        d = await rl.check(key + ":a", [(2, 10 * S)], now=t)
        assert fields(d) == raw.execute_command("RL.CHECK", key + ":b", t, 2, 10_000)
        q = await rl.quota(key + ":qa", "UTC", {"hour": 2}, now=t)
        assert fields(q) == raw.execute_command("RL.QUOTA", key + ":qb", t, "UTC", "HOUR", 2)
        th = await rl.throttle(key + ":ta", [(2, 2, S)], now=t)
        assert fields(th) == raw.execute_command("RL.THROTTLE", key + ":tb", t, 2, 2, 1000)
    le = await rl.lease(key + ":l", 1, S, token="a")
    assert le.token == "a" and (await rl.release(key + ":l", ["a"])) == (1,)
    a = await rl.all([Clause.check("{x%s}:1" % key, [(1, S)]), Clause.quota("{x%s}:2" % key, "UTC", {"day": 1})])
    assert a.allowed and a.clause in (1, 2)
    assert (await rl.lockcount("{%s}l" % key, "{%s}n" % key, S, 1, S)).allowed
    assert not (await rl.dayhour("{%s}d" % key, "{%s}h" % key, 1, 1, S, S)).limited
    await client.aclose()


def test_all_with_details_matches_raw_reply(server, raw, key):
    from conftest import details_supported
    # This tree's engine has DETAILS: a probe that fails is a failure, not a skip.
    assert details_supported(raw), "the module at $RL_MODULE answers no RL.ALL DETAILS"
    rl = RateLimiter(server.client())
    t = server_ms(raw)
    tag = "{%s}" % key

    def clauses(side):
        return [Clause.check(f"{tag}:{side}:w", [(2, 10 * S), (5, timedelta(hours=1))]),
                Clause.quota(f"{tag}:{side}:q", "Asia/Shanghai", {"day": 3, "hour": 2}),
                Clause.lease(f"{tag}:{side}:l", 2, timedelta(seconds=60), token="tok1")]

    def raw_all(name, side, *tail):
        return raw.execute_command(name, 3, f"{tag}:{side}:w", f"{tag}:{side}:q", f"{tag}:{side}:l", t,
                                   "CHECK", 1, 2, 10_000, 5, 3_600_000, "QUOTA", 2, "Asia/Shanghai", "DAY", 3,
                                   "HOUR", 2, "LEASE", 3, 2, 60_000, "TOKEN", "tok1", *tail)

    def flat(d):
        return [int(d.limited), d.clause] + fields(d)[1:] + [[fields(st) for st in c] for c in d.details]

    for _ in range(3):
        d = rl.all(clauses("a"), details=True, now=t)
        assert flat(d) == raw_all("RL.ALL", "b", "DETAILS")
    assert d.limited and [len(c) for c in d.details] == [2, 2, 1]
    p = rl.all_peek(clauses("a"), details=True, now=t)
    assert flat(p) == raw_all("RL.ALLPEEK", "b", "DETAILS")
    r = rl.all(clauses("a"), refund=True, details=True, now=t)
    assert flat(r) == raw_all("RL.ALL", "b", "REFUND", "DETAILS")


def test_error_texts_are_the_servers_own(server, raw, key):
    """redis-py drops "ERR " / "OOM " from error texts; RateLimitError gives them back."""
    from redis_rl import Call, Decision
    rl = RateLimiter(server.client())
    # A call the typed methods would refuse, built by hand to reach the server.
    bad = Call(key, ("RL.CHECK", key, "*", 1, 0), Decision.from_reply)
    with pytest.raises(RateLimitError) as e:
        rl.run(bad)
    assert str(e.value).startswith("ERR invalid window '0' for rule 1: expected an integer from 1 to ")
    raw.execute_command("CONFIG", "SET", "maxmemory", "1")
    try:
        with pytest.raises(RateLimitError) as e:
            rl.check(key + ":oom", [(1, S)])
        assert str(e.value) == "OOM command not allowed when used memory > 'maxmemory'."
    finally:
        raw.execute_command("CONFIG", "SET", "maxmemory", "0")
