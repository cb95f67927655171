"""A mixed workload of every RL command, shared by the replication,
persistence and failover tests ("nothing lost").

Every window and TTL is at least 10 minutes, so no key expires while a test
compares two servers. Replies are asserted as the workload goes, so a test
never compares two copies of a state the module got wrong in the first place.
"""

from __future__ import annotations

import binascii
import re

import pytest
import redis

from servers import FUNCTIONS

# A zone with daylight saving; on the Functions library (which computes UTC
# and fixed offsets only: SPEC "The Functions library", not covered) an
# offset of the same day.
DST_ZONE = "+01:00" if FUNCTIONS else "Europe/Paris"

H = 3_600_000  # one hour in ms
D = 86_400_000  # one day in ms
KEYS_LEFT = 31  # keys run_workload leaves behind
UUID = "550e8400-e29b-41d4-a716-446655440000"


def grid_at(key: str | bytes, w: int, x: int) -> int:
    """The expiry RL.CHECK / RL.THROTTLE set when `key` must live until `x`
    and its expiry moves (SPEC "Expiries on a grid"): the first point at or
    after `x` of the grid of step `g = max(1, w // 8)` and offset
    `crc16(key) mod g` — the CRC16 Redis Cluster hashes key names with
    (CCITT/XMODEM, `binascii.crc_hqx` with initial value 0), over the whole
    name."""
    name = key.encode() if isinstance(key, str) else key
    g = max(1, w // 8)
    o = binascii.crc_hqx(name, 0) % g
    return x + (-(x - o)) % g


def server_ms(c: redis.Redis) -> int:
    secs, micros = c.time()
    return secs * 1000 + micros // 1000


def rl(c: redis.Redis, *args):
    return c.execute_command(*[str(a) for a in args])


def is_foreign_looking(member: bytes) -> bool:
    """A name the module must never write: a plain decimal or a UUID."""
    m = member.decode("latin-1")
    return bool(re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", m)
                or re.fullmatch(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", m))


def run_workload(c: redis.Redis, p: str) -> int:
    """Runs the workload on keys prefixed `p:`; returns the server time it used
    as its explicit `now`. Leaves KEYS_LEFT keys."""
    t = server_ms(c)

    # now = '*': two rules, the 5-per-minute one binds; two rejections.
    replies = [rl(c, "RL.CHECK", f"{p}:star", "*", 5, 60000, 10, H) for _ in range(7)]
    assert [r[0] for r in replies] == [0, 0, 0, 0, 0, 1, 1], replies
    assert [r[3] for r in replies[:5]] == [4, 3, 2, 1, 0]
    assert replies[5][1:4] == [1, 5, 0] and 0 < replies[5][4] <= 60000

    # A same-millisecond burst with an explicit now, then COST (case-insensitive).
    pipe = c.pipeline(transaction=False)
    for _ in range(20):
        pipe.execute_command("RL.CHECK", f"{p}:burst", t, 100, H)
    replies = pipe.execute()
    assert [r[0] for r in replies] == [0] * 20
    assert [r[3] for r in replies] == list(range(99, 79, -1))
    assert rl(c, "RL.CHECK", f"{p}:burst", t, 100, H, "COST", 30)[:4] == [0, 1, 100, 50]
    assert rl(c, "RL.CHECK", f"{p}:burst", t, 100, H, "COST", 51)[:4] == [1, 1, 100, 50]
    assert rl(c, "RL.CHECK", f"{p}:burst", t, 100, H, "cost", 50)[:4] == [0, 1, 100, 0]
    members = c.zrange(f"{p}:burst", 0, -1, withscores=True)
    assert len(members) == 100 and {s for _, s in members} == {float(t)}
    assert not any(is_foreign_looking(m) for m, _ in members)

    # A call that trims: the member older than the window goes, once the
    # expiry moves (SPEC "Expiries on a grid": a call a quarter hour on needs
    # a later expiry than the first call's grid point, at most H/8 late).
    assert rl(c, "RL.CHECK", f"{p}:trim", t - H - 1000, 5, H)[0] == 0
    t2 = t + H // 4
    assert rl(c, "RL.CHECK", f"{p}:trim", t2, 5, H)[:4] == [0, 1, 5, 4]
    assert c.zrange(f"{p}:trim", 0, -1, withscores=True)[0][1] == float(t2)
    assert c.zcard(f"{p}:trim") == 1

    # Members written by the Lua scripts count the same.
    c.zadd(f"{p}:foreign", {UUID: t - 2000, "1700000000000": t - 1000})
    assert rl(c, "RL.CHECK", f"{p}:foreign", "*", 3, H)[:4] == [0, 1, 3, 0]
    assert rl(c, "RL.CHECK", f"{p}:foreign", "*", 3, H)[0] == 1
    assert c.zcard(f"{p}:foreign") == 3

    # RL.DAYHOUR: the hour fills at 3, the 4th call is refused by the hour.
    day, hour = f"{p}:{{u1}}:day", f"{p}:{{u1}}:hour"
    assert [rl(c, "RL.DAYHOUR", day, hour, 100, 3, D, H) for _ in range(4)] == [[1, 1], [2, 2], [3, 3], [3, 4]]
    # A day counter without TTL gets one; a negative hour counter becomes 1.
    day2, hour2 = f"{p}:{{u2}}:day", f"{p}:{{u2}}:hour"
    c.set(day2, 7)
    c.set(hour2, -3)
    assert rl(c, "RL.DAYHOUR", day2, hour2, 100, 10, D, H) == [8, 1]
    assert c.pttl(day2) > D - 60000 and c.pttl(hour2) > H - 60000
    assert c.get(hour2) == b"1"
    # A limit of 0 refuses, with both keys missing.
    assert rl(c, "RL.DAYHOUR", f"{p}:{{u3}}:day", f"{p}:{{u3}}:hour", 0, 5, D, H) == [1, 0]

    # RL.LOCKCOUNT: three admitted, the fourth trips the lock, the fifth is locked.
    lock, count = f"{p}:{{u4}}:lock", f"{p}:{{u4}}:count"
    replies = [rl(c, "RL.LOCKCOUNT", lock, count, 600000, 3, 900000) for _ in range(5)]
    assert [r[:2] for r in replies] == [[0, 1], [0, 2], [0, 3], [1, 3], [1, 0]], replies
    assert replies[3][2] == 900000 and 0 < replies[4][2] <= 900000
    assert c.get(lock) == b"1" and not c.exists(count)
    # A counter that keeps its TTL, one without TTL that gets the window, a
    # negative one written as 1, and a lock key of another type without expiry.
    count6 = f"{p}:{{u6}}:count"
    assert rl(c, "RL.LOCKCOUNT", f"{p}:{{u6}}:lock", count6, 600000, 5, 900000) == [0, 1, 600000]
    expiry6 = c.execute_command("PEXPIRETIME", count6)
    assert rl(c, "RL.LOCKCOUNT", f"{p}:{{u6}}:lock", count6, 900000, 5, 900000)[:2] == [0, 2]
    assert c.execute_command("PEXPIRETIME", count6) == expiry6
    c.set(f"{p}:{{u7}}:count", -5)
    assert rl(c, "RL.LOCKCOUNT", f"{p}:{{u7}}:lock", f"{p}:{{u7}}:count", 700000, 5, 900000) == [0, 1, 700000]
    c.hset(f"{p}:{{u8}}:lock", "f", "v")
    assert rl(c, "RL.LOCKCOUNT", f"{p}:{{u8}}:lock", f"{p}:{{u8}}:count", 600000, 5, 900000) == [1, 0, -1]
    assert not c.exists(f"{p}:{{u8}}:count")

    # A fractional foreign score in the future: the expiry is rounded up.
    c.zadd(f"{p}:frac", {"x": t + 100000.5})
    assert rl(c, "RL.CHECK", f"{p}:frac", "*", 5, H)[0] == 0
    assert c.execute_command("PEXPIRETIME", f"{p}:frac") == grid_at(f"{p}:frac", H, t + 100001 + H)

    # RL.THROTTLE with now = '*': burst 5, one unit per 10 minutes, and a
    # second rule; the 6th and 7th calls are refused.
    replies = [rl(c, "RL.THROTTLE", f"{p}:tb", "*", 5, 1, 600000, 20, 20, H) for _ in range(7)]
    assert [r[0] for r in replies] == [0, 0, 0, 0, 0, 1, 1], replies
    assert [r[3] for r in replies[:5]] == [4, 3, 2, 1, 0]
    assert sorted(c.hkeys(f"{p}:tb")) == [b"3600000", b"600000"]
    # Explicit now, COST, then a refund (HSET); a refund back to a full
    # bucket removes the key (DEL); a field of another window stays.
    tb2 = f"{p}:tb2"
    assert rl(c, "RL.THROTTLE", tb2, t, 4, 4, 1000, 100, 100, H, "COST", 3)[:4] == [0, 1, 4, 1]
    # A refund answers the state now: 2 can pass at once.
    assert rl(c, "RL.THROTTLE", tb2, t, 4, 4, 1000, 100, 100, H, "REFUND")[:4] == [0, 1, 4, 2]
    assert int(c.hget(tb2, "1000")) == (t + 500) * 10**6
    tb3 = f"{p}:tb3"
    assert rl(c, "RL.THROTTLE", tb3, t, 4, 4, 1000)[0] == 0
    assert rl(c, "RL.THROTTLE", tb3, t, 4, 4, 1000, "COST", 4, "REFUND")[0] == 0
    assert not c.exists(tb3)
    # A longer rule set wrote the hour's field and holds the key until t + H:
    # a call naming only 10 minutes keeps both.
    tb4 = f"{p}:tb4"
    c.hset(tb4, "3600000", str((t + 1800000) * 10**6))
    c.pexpireat(tb4, t + H)
    assert rl(c, "RL.THROTTLE", tb4, t, 2, 1, 600000)[:4] == [0, 1, 2, 1]
    assert int(c.hget(tb4, "3600000")) == (t + 1800000) * 10**6
    assert c.execute_command("PEXPIRETIME", tb4) == t + H

    # RL.QUOTA with now = '*': 3 a day in Asia/Shanghai and 100 a month; the
    # 4th call is refused by the day. Explicit now: a stale bucket goes, the
    # previous stays; a refund (HSET), and one that empties a key (DEL).
    replies = [rl(c, "RL.QUOTA", f"{p}:q", "*", "Asia/Shanghai", "DAY", 3, "MONTH", 100) for _ in range(4)]
    assert [r[:4] for r in replies] == [[0, 1, 3, 2], [0, 1, 3, 1], [0, 1, 3, 0], [1, 1, 3, 0]], replies
    q2 = f"{p}:q2"
    c.hset(q2, mapping={"hour:2000-01-01T00:00+00:00": 5, "note": "kept"})
    assert rl(c, "RL.QUOTA", q2, t, "UTC", "HOUR", 10, "COST", 4)[:4] == [0, 1, 10, 6]
    assert rl(c, "RL.QUOTA", q2, t, "UTC", "HOUR", 10, "REFUND")[:4] == [0, 1, 10, 7]
    assert c.hlen(q2) == 2 and c.hget(q2, "note") == b"kept"
    q3 = f"{p}:q3"
    assert rl(c, "RL.QUOTA", q3, t, "+05:45", "WEEK", 10)[0] == 0
    assert rl(c, "RL.QUOTA", q3, t, "+05:45", "WEEK", 10, "REFUND")[:4] == [0, 1, 10, 10]
    assert not c.exists(q3)

    # Debits (SPEC "Debits"): recorded whether or not they fit, replicated
    # as admissions (ZADD / HSET and PEXPIREAT); the reply is the state now.
    assert rl(c, "RL.CHECK", f"{p}:debit", t, 5, H, "COST", 12, "DEBIT") == [1, 1, 5, 0, H, H]
    assert c.zcard(f"{p}:debit") == 12
    assert rl(c, "RL.THROTTLE", f"{p}:tbd", t, 2, 1, 600000, "COST", 5, "DEBIT") == \
        [1, 1, 2, 0, 1_800_000, 3_000_000]
    assert int(c.hget(f"{p}:tbd", "600000")) == (t + 3_000_000) * 10**6
    assert rl(c, "RL.QUOTA", f"{p}:qd", "*", "UTC", "DAY", 3, "COST", 7, "DEBIT")[:4] == [1, 1, 3, 0]

    # Reservations (SPEC "Reservations"): a chain at one instant, replicated
    # as admissions (HSET, PEXPIREAT); the last cancelled by a refund (HSET).
    res = [rl(c, "RL.THROTTLE", f"{p}:res", t, 1, 1, 600000, "RESERVE", H) for _ in range(3)]
    assert [r[4] for r in res] == [0, 600000, 1200000], res
    assert rl(c, "RL.THROTTLE", f"{p}:res", t, 1, 1, 600000, "REFUND")[:5] == [1, 1, 1, 0, 600000]
    assert int(c.hget(f"{p}:res", "600000")) == (t + 1_200_000) * 10**6

    # RL.LEASE: at most 3 in flight. A token, a module-named lease of 2
    # units (ZADD), a refusal (nil), a release (ZREM), a resize up and down
    # (ZADD, ZREM of the unit beyond the new cost), a renewal (ZADD XX).
    jobs = f"{p}:jobs"
    r = rl(c, "RL.LEASE", jobs, "*", 3, H, "TOKEN", "job-1")
    assert r[:6] == [0, 1, 3, 2, -1, H] and r[6] == b"job-1", r
    r = rl(c, "RL.LEASE", jobs, "*", 3, H, "COST", 2)
    assert r[:5] == [0, 1, 3, 0, -1] and len(r[6]) == 8, r
    anon = r[6].decode()
    r = rl(c, "RL.LEASE", jobs, "*", 3, H, "TOKEN", "job-2")
    assert r[:4] == [1, 1, 3, 0] and 0 < r[4] <= H and r[6] is None, r
    assert rl(c, "RL.RELEASE", jobs, "*", anon, "never") == [2, 0]
    assert rl(c, "RL.LEASE", jobs, "*", 3, 2 * H, "TOKEN", "job-1", "COST", 3)[:4] == [0, 1, 3, 0]
    assert rl(c, "RL.LEASE", jobs, "*", 3, H, "token", "job-1", "cost", 2)[:4] == [0, 1, 3, 1]
    assert rl(c, "RL.RENEW", jobs, "*", 3 * H, "job-1", "lost") == [2, 0]
    assert sorted(c.zrange(jobs, 0, -1)) == [b"job-1", b"job-1#2"]
    assert c.execute_command("PEXPIRETIME", jobs) >= t + 3 * H
    # Expired units under an expiry held by a live lease: reaped
    # (ZREMRANGEBYSCORE) once `limit` of them are there.
    jobs2 = f"{p}:jobs2"
    c.zadd(jobs2, {"old1": t - 5000, "old2": t - 4000, "live": t + 2 * H})
    c.pexpireat(jobs2, t + 3 * H)
    assert rl(c, "RL.LEASE", jobs2, t, 2, H, "TOKEN", "a")[:4] == [0, 1, 2, 0]
    assert sorted(c.zrange(jobs2, 0, -1)) == [b"a", b"live"]
    assert c.execute_command("PEXPIRETIME", jobs2) == t + 3 * H

    # RL.ALL: 2 a minute AND a token bucket AND a day's budget in a zone AND
    # 2 in flight, on one hash tag. Admitted twice (every clause's native
    # writes), a third refused (nothing written), the second refunded (each
    # clause's refund; the lease's RL.RELEASE).
    ak = all_keys(p)
    r = rl(c, "RL.ALL", 4, *ak, "*", *ALL_CLAUSES, "req-1")
    assert r == [0, 4, 1, 2, 1, -1, H], r
    r = rl(c, "RL.ALL", 4, *ak, "*", *ALL_CLAUSES, "req-2")
    assert r == [0, 4, 1, 2, 0, -1, H], r
    r = rl(c, "RL.ALL", 4, *ak, "*", *ALL_CLAUSES, "req-3")
    assert r[:5] == [1, 4, 1, 2, 0] and 0 < r[5] <= H, r
    r = rl(c, "RL.ALL", 4, *ak, "*", *ALL_CLAUSES, "req-2", "REFUND")
    assert r[:5] == [0, 4, 1, 2, 1], r
    assert c.zcard(ak[0]) == 1 and c.zrange(ak[3], 0, -1) == [b"req-1"]
    assert int(next(iter(c.hvals(ak[2])))) == 2

    # Errors (nothing written) next to keys of other types.
    c.set(f"{p}:str", "x")
    c.hset(f"{p}:hash", mapping={"f": "v", "1000": "abc"})
    c.set(f"{p}:{{u5}}:count", "abc")
    for args in error_calls(p):
        with pytest.raises(redis.ResponseError):
            rl(c, *args)
    return t


# RL.ALL's clauses in run_workload, on the keys of `all_keys`; the lease's
# token follows.
ALL_CLAUSES = ("CHECK", 1, 2, 60000, "THROTTLE", 2, 5, 1, 600000,
               "QUOTA", 3, DST_ZONE, "DAY", 10, "COST", 2, "LEASE", 4, 2, H, "TOKEN")


def all_keys(p: str) -> list[str]:
    return [f"{p}:{{all}}:{x}" for x in ("rate", "tb", "day", "inflight")]


def error_calls(p: str) -> list[tuple]:
    ak = all_keys(p)
    return [
        ("RL.ALL", 2, f"{p}:str", ak[0], "*", "CHECK", 1, 5, 1000, "CHECK", 2, 5, 1000),  # WRONGTYPE
        ("RL.ALL", 2, ak[0], ak[0], "*", "CHECK", 1, 5, 1000, "CHECK", 2, 5, 1000),  # keys not distinct
        ("RL.ALL", 1, ak[3], "*", "LEASE", 1, 2, H),  # no TOKEN
        ("RL.ALL", 2, ak[0], f"{p}:new", "*", "CHECK", 1, 5, 1000),  # a key without a clause
        ("RL.ALLPEEK", 1, ak[0], "*", "CHECK", 1, 5, 1000, "REFUND"),  # no REFUND on a peek
        ("RL.CHECK", f"{p}:str", "*", 5, 1000),  # WRONGTYPE
        ("RL.CHECK", f"{p}:star", "*", 0, 1000),  # bad count
        ("RL.CHECK", f"{p}:new", "*", 5, 1000, "COST", 6),  # cost above count
        ("RL.CHECK", f"{p}:new", "+5", 5, 1000),  # bad now
        ("RL.PEEK", f"{p}:hash", "*", 5, 1000),  # WRONGTYPE
        ("RL.DAYHOUR", f"{p}:{{u1}}:day", f"{p}:{{u1}}:day", 1, 1, 1, 1),  # keys must differ
        ("RL.DAYHOUR", f"{p}:hash", f"{p}:new2", 1, 1, 1000, 1000),  # WRONGTYPE
        ("RL.LOCKCOUNT", f"{p}:{{u5}}:lock", f"{p}:{{u5}}:count", 1000, 3, 1000),  # stored value
        ("RL.LOCKCOUNT", f"{p}:{{u6}}:lock", f"{p}:{{u6}}:count", 0, 3, 1000),  # bad window
        ("RL.DAYHOUR", f"{p}:a"),  # arity
        ("RL.THROTTLE", f"{p}:str", "*", 1, 1, 1000),  # WRONGTYPE
        ("RL.THROTTLE", f"{p}:hash", "*", 1, 1, 1000),  # stored value
        ("RL.THROTTLE", f"{p}:tb", "*", 5, 1, 600000, 5, 1, 600000),  # same window twice
        ("RL.THROTTLE", f"{p}:tb", "*", 5, 1, 600000, "COST", 6),  # cost above burst
        ("RL.THROTTLEPEEK", f"{p}:tb", "*", 5, 1, 600000, "REFUND"),  # no REFUND on a peek
        ("RL.QUOTA", f"{p}:str", "*", "UTC", "DAY", 5),  # WRONGTYPE
        ("RL.QUOTA", f"{p}:q", "*", "Mars/Olympus", "DAY", 5),  # unknown zone
        ("RL.QUOTA", f"{p}:q", "*", "UTC", "DAY", 5, "DAY", 5),  # period twice
        ("RL.QUOTAPEEK", f"{p}:q", 253402300800000, "UTC", "DAY", 5),  # now past year 9999
        ("RL.LEASE", f"{p}:str", "*", 3, H),  # WRONGTYPE
        ("RL.LEASE", f"{p}:jobs", "*", 3, H, "TOKEN", "a#1"),  # bad token
        ("RL.LEASE", f"{p}:jobs", "*", 3, H, "COST", 4),  # cost above limit
        ("RL.LEASEPEEK", f"{p}:hash", "*", 3),  # WRONGTYPE
        ("RL.RELEASE", f"{p}:jobs", "*", "x", "x"),  # token twice
        ("RL.RENEW", f"{p}:jobs", "*", 0, "job-1"),  # bad ttl
    ]


def rejected_calls(c: redis.Redis, p: str) -> int:
    """After run_workload(c, p): calls that are all rejected or errors, so
    must write and replicate nothing. Returns how many were made."""
    n = 0
    for _ in range(3):
        assert rl(c, "RL.CHECK", f"{p}:star", "*", 5, 60000, 10, H)[0] == 1
        assert rl(c, "RL.CHECK", f"{p}:foreign", "*", 3, H)[0] == 1
        assert rl(c, "RL.CHECK", f"{p}:burst", "*", 100, H)[0] == 1
        assert rl(c, "RL.DAYHOUR", f"{p}:{{u1}}:day", f"{p}:{{u1}}:hour", 100, 3, D, H) == [3, 4]
        assert rl(c, "RL.DAYHOUR", f"{p}:{{u3}}:day", f"{p}:{{u3}}:hour", 0, 5, D, H) == [1, 0]
        assert rl(c, "RL.LOCKCOUNT", f"{p}:{{u4}}:lock", f"{p}:{{u4}}:count", 600000, 3, 900000)[:2] == [1, 0]
        assert rl(c, "RL.LOCKCOUNT", f"{p}:{{u8}}:lock", f"{p}:{{u8}}:count", 600000, 5, 900000) == [1, 0, -1]
        assert rl(c, "RL.PEEK", f"{p}:star", "*", 5, 60000, 10, H)[0] == 1
        assert rl(c, "RL.PEEK", f"{p}:missing", "*", 5, 60000)[0] == 0
        assert rl(c, "RL.THROTTLE", f"{p}:tb", "*", 5, 1, 600000, 20, 20, H)[0] == 1
        assert rl(c, "RL.THROTTLEPEEK", f"{p}:tb", "*", 5, 1, 600000)[0] == 1
        # A refund of a key that holds nothing writes nothing.
        assert rl(c, "RL.THROTTLE", f"{p}:tb3", "*", 5, 1, 600000, "REFUND")[0] == 0
        assert rl(c, "RL.QUOTA", f"{p}:q", "*", "Asia/Shanghai", "DAY", 3, "MONTH", 100)[0] == 1
        assert rl(c, "RL.QUOTAPEEK", f"{p}:q", "*", "Asia/Shanghai", "DAY", 3)[0] == 1
        assert rl(c, "RL.QUOTA", f"{p}:q3", "*", "UTC", "DAY", 5, "REFUND")[0] == 0
        # Leases: refused, peeked, and a release or renewal of lost leases.
        r = rl(c, "RL.LEASE", f"{p}:jobs", "*", 3, H, "TOKEN", "job-9", "COST", 2)
        assert r[0] == 1 and r[6] is None, r
        assert rl(c, "RL.LEASEPEEK", f"{p}:jobs", "*", 3, "COST", 2)[0] == 1
        assert rl(c, "RL.RELEASE", f"{p}:jobs", "*", "nobody") == [0]
        assert rl(c, "RL.RENEW", f"{p}:jobs", "*", H, "nobody") == [0]
        # RL.ALL refused by its first clause, and by its last alone (the
        # first would admit on a fresh key: not written).
        ak = all_keys(p)
        r = rl(c, "RL.ALL", 4, *ak, "*", *ALL_CLAUSES[:4], "COST", 2, *ALL_CLAUSES[4:], "req-9")
        assert r[:2] == [1, 1], r
        r = rl(c, "RL.ALL", 2, f"{p}:{{all}}:fresh", ak[2], "*", "CHECK", 1, 5, 1000,
               "QUOTA", 2, DST_ZONE, "DAY", 10, "COST", 9)
        assert r[:2] == [1, 2], r
        assert rl(c, "RL.ALLPEEK", 1, ak[3], "*", "LEASE", 1, 2, H, "COST", 2, "TOKEN", "x")[0] == 1
        n += 22
        for args in error_calls(p):
            with pytest.raises(redis.ResponseError):
                rl(c, *args)
            n += 1
    return n


def assert_limited_state(c: redis.Redis, p: str) -> None:
    """The workload's limits still hold on `c` (a restarted server, a
    promoted replica): nothing was forgotten."""
    r = rl(c, "RL.CHECK", f"{p}:star", "*", 5, 60000, 10, H)
    assert r[:4] == [1, 1, 5, 0] and 0 < r[4] <= 60000, r
    assert rl(c, "RL.CHECK", f"{p}:foreign", "*", 3, H)[:4] == [1, 1, 3, 0]
    assert rl(c, "RL.DAYHOUR", f"{p}:{{u1}}:day", f"{p}:{{u1}}:hour", 100, 3, D, H) == [3, 4]
    r = rl(c, "RL.LOCKCOUNT", f"{p}:{{u4}}:lock", f"{p}:{{u4}}:count", 600000, 3, 900000)
    assert r[:2] == [1, 0] and 0 < r[2] <= 900000, r
    r = rl(c, "RL.THROTTLE", f"{p}:tb", "*", 5, 1, 600000, 20, 20, H)
    assert r[:4] == [1, 1, 5, 0] and 0 < r[4] <= 600000, r
    # Debts are not forgotten.
    r = rl(c, "RL.CHECK", f"{p}:debit", "*", 5, H)
    assert r[:4] == [1, 1, 5, 0] and 0 < r[4] <= H, r
    r = rl(c, "RL.THROTTLE", f"{p}:tbd", "*", 2, 1, 600000)
    assert r[:4] == [1, 1, 2, 0] and 1_800_000 < r[4] <= 2_400_000, r

    r = rl(c, "RL.LEASE", f"{p}:jobs", "*", 3, H, "TOKEN", "other", "COST", 2)
    assert r[:4] == [1, 1, 3, 1] and r[6] is None, r
    assert rl(c, "RL.LEASEPEEK", f"{p}:jobs", "*", 3, "COST", 1, "TOKEN", "job-1")[:4] == [0, 1, 3, 2]
    # RL.ALL's lease: req-1 still in flight.
    r = rl(c, "RL.ALLPEEK", 1, all_keys(p)[3], "*", "LEASE", 1, 2, H, "COST", 2, "TOKEN", "other")
    assert r[:5] == [1, 1, 1, 2, 1], r
    # (Unless the test straddles midnight in Shanghai.)
    r = rl(c, "RL.QUOTA", f"{p}:q", "*", "Asia/Shanghai", "DAY", 3, "MONTH", 100)
    assert r[:4] == [1, 1, 3, 0] or r[0] == 0, r
