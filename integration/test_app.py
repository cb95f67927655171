"""The module used the way an application uses it, through redis-py.

Small request handlers (plain functions, no web framework) for a costly
endpoint (RL.CHECK, two rules), its batch variant (COST), a quota-status
endpoint (RL.PEEK), an SMS-code endpoint (RL.DAYHOUR with hash-tagged
day/hour keys and TTLs to the end of the day/hour) and a login endpoint
(RL.LOCKCOUNT), each mapping the reply to an HTTP status and headers. Times are
given explicitly (`now` in ms, or a datetime clock) so nothing sleeps; the
last test runs README-style commands through the real `redis-cli`.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
import redis
from redis.crc import key_slot


# --------------------------------------------------------------------------
# The application
# --------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict = field(default_factory=dict)


def seconds_up(ms: int) -> int:
    """Milliseconds to whole seconds, rounded up (what Retry-After wants)."""
    return -(-ms // 1000)


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def ratelimit_headers(reply: list[int]) -> dict[str, str]:
    """RL.CHECK / RL.PEEK reply -> RateLimit-* (and Retry-After when limited)."""
    limited, _rule, limit, remaining, retry_after, reset_after = reply
    headers = {
        "RateLimit-Limit": str(limit),
        "RateLimit-Remaining": str(remaining),
        "RateLimit-Reset": str(seconds_up(reset_after)),
    }
    if limited:
        headers["Retry-After"] = str(seconds_up(retry_after))
    return headers


class SlidingLimiter:
    """Per-subject multi-rule sliding window: one sorted set per subject."""

    def __init__(self, r: redis.Redis, name: str, rules: list[tuple[int, int]]):
        self.r = r
        self.name = name
        self.rules = rules

    def key(self, subject: str) -> str:
        return f"rl:{self.name}:{subject}"

    def _args(self, subject: str, now, cost: int) -> list:
        args = [self.key(subject), now]
        for count, window in self.rules:
            args += [count, window]
        if cost != 1:
            args += ["COST", cost]
        return args

    def check(self, subject: str, now="*", cost: int = 1) -> list[int]:
        return self.r.execute_command("RL.CHECK", *self._args(subject, now, cost))

    def peek(self, subject: str, now="*", cost: int = 1) -> list[int]:
        return self.r.execute_command("RL.PEEK", *self._args(subject, now, cost))


def ocr_endpoint(limiter: SlidingLimiter, user: str, now="*") -> Response:
    """A costly endpoint: one unit per call."""
    reply = limiter.check(user, now)
    headers = ratelimit_headers(reply)
    if reply[0]:
        return Response(429, headers, {"error": "too many requests"})
    return Response(200, headers, {"text": "recognised"})


def ocr_batch_endpoint(limiter: SlidingLimiter, user: str, items: list, now="*") -> Response:
    """The batch variant: one unit per item, admitted or refused as a whole."""
    if not items:
        return Response(400, {}, {"error": "empty batch"})
    try:
        reply = limiter.check(user, now, cost=len(items))
    except redis.ResponseError as e:  # a batch larger than any rule allows
        return Response(413, {}, {"error": str(e)})
    headers = ratelimit_headers(reply)
    if reply[0]:
        return Response(429, headers, {"error": "too many requests"})
    return Response(200, headers, {"results": len(items)})


def quota_endpoint(limiter: SlidingLimiter, user: str, now="*") -> Response:
    """Quota status: what the next call would get. Never consumes."""
    reply = limiter.peek(user, now)
    limited, _rule, limit, remaining, retry_after, reset_after = reply
    # RL.PEEK describes the state after the hypothetical call; the quota left
    # *now* is one more when that call would be admitted.
    left = remaining if limited else remaining + 1
    headers = ratelimit_headers(reply)
    headers["RateLimit-Remaining"] = str(left)
    return Response(200, headers, {
        "allowed": not limited,
        "limit": limit,
        "remaining": left,
        "retry_after_s": seconds_up(retry_after) if limited else 0,
    })


class SmsCodeEndpoint:
    """At most `daylimit` codes per natural day and `hourlimit` per natural
    hour per user; both limits can be changed at run time (0 turns sending off)."""

    def __init__(self, r: redis.Redis, daylimit: int = 5, hourlimit: int = 2):
        self.r = r
        self.daylimit = daylimit
        self.hourlimit = hourlimit

    @staticmethod
    def keys(user_id: int, now: datetime) -> tuple[str, str]:
        return (f"{{user:{user_id}}}:day:{now:%Y-%m-%d}",
                f"{{user:{user_id}}}:hour:{now:%Y-%m-%dT%H}")

    @staticmethod
    def ttls(now: datetime) -> tuple[int, int]:
        """Milliseconds to the end of the day and of the hour."""
        day_end = datetime(now.year, now.month, now.day, tzinfo=now.tzinfo) + timedelta(days=1)
        hour_end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        ms = lambda d: (d.days * 86_400 + d.seconds) * 1000 + d.microseconds // 1000  # noqa: E731
        return ms(day_end - now), ms(hour_end - now)

    def send(self, user_id: int, now: datetime) -> Response:
        daykey, hourkey = self.keys(user_id, now)
        dayttl, hourttl = self.ttls(now)
        d, h = self.r.execute_command("RL.DAYHOUR", daykey, hourkey, self.daylimit, self.hourlimit,
                                      dayttl, hourttl)
        day_refused, hour_refused = d > self.daylimit, h > self.hourlimit
        if day_refused or hour_refused:
            wait = dayttl if day_refused else hourttl
            return Response(429, {"Retry-After": str(seconds_up(wait))},
                            {"error": "day limit" if day_refused else "hour limit", "day": d, "hour": h})
        return Response(200, {"X-Codes-Left-Today": str(self.daylimit - d),
                              "X-Codes-Left-This-Hour": str(self.hourlimit - h)},
                        {"sent": True, "day": d, "hour": h})


class LoginEndpoint:
    """Locks an account for `locktime` ms after `max_failures` failed
    passwords within `window` ms; a good password clears the failures."""

    def __init__(self, r: redis.Redis, passwords: dict[str, str], max_failures: int = 3,
                 window: int = 15 * 60_000, locktime: int = 5 * 60_000):
        self.r = r
        self.passwords = passwords
        self.max_failures = max_failures
        self.window = window
        self.locktime = locktime

    @staticmethod
    def keys(user: str) -> tuple[str, str]:
        return f"{{login:{user}}}:lock", f"{{login:{user}}}:failures"

    def login(self, user: str, password: str) -> Response:
        lock, failures = self.keys(user)
        if self.passwords.get(user) != password:
            # Count the failure; the one that finds max_failures - 1 already
            # counted is the max_failures-th and sets the lock.
            limited, count, ttl = self.r.execute_command(
                "RL.LOCKCOUNT", lock, failures, self.window, self.max_failures - 1, self.locktime)
            if limited:
                headers = {"Retry-After": str(seconds_up(ttl))} if ttl >= 0 else {}
                return Response(429, headers, {"error": "account locked"})
            return Response(401, {}, {"error": "bad password", "attempts_left": self.max_failures - count})
        pttl = self.r.pttl(lock)
        if pttl != -2:  # locked: a good password does not lift the lock either
            headers = {"Retry-After": str(seconds_up(pttl))} if pttl >= 0 else {}
            return Response(429, headers, {"error": "account locked"})
        self.r.delete(failures)
        return Response(200, {}, {"welcome": user})


# --------------------------------------------------------------------------
# Costly endpoint: RL.CHECK with two rules
# --------------------------------------------------------------------------

OCR_RULES = [(3, 1_000), (5, 60_000)]  # 3 a second, 5 a minute


def test_app_burst_gets_429_with_retry_after_and_recovers(r):
    ocr = SlidingLimiter(r, "ocr", OCR_RULES)
    t0 = server_ms(r)

    # A burst: three in the first second, each leaving one less.
    for dt, left in ((0, 2), (100, 1), (200, 0)):
        resp = ocr_endpoint(ocr, "alice", t0 + dt)
        assert resp.status == 200
        assert resp.headers == {"RateLimit-Limit": "3", "RateLimit-Remaining": str(left),
                                "RateLimit-Reset": "1"}

    # The fourth in that second: the 3/s rule binds; its oldest unit leaves at t0+1000.
    resp = ocr_endpoint(ocr, "alice", t0 + 300)
    assert resp.status == 429
    assert resp.headers == {"RateLimit-Limit": "3", "RateLimit-Remaining": "0",
                            "RateLimit-Reset": "1", "Retry-After": "1"}
    assert r.execute_command("RL.CHECK", ocr.key("alice"), t0 + 300, 3, 1000, 5, 60000) == \
        [1, 1, 3, 0, 700, 900]
    assert r.zcard(ocr.key("alice")) == 3  # refused calls write nothing

    # 1 ms before the oldest leaves: still refused; at that instant: admitted.
    resp = ocr_endpoint(ocr, "alice", t0 + 999)
    assert (resp.status, resp.headers["Retry-After"]) == (429, "1")
    resp = ocr_endpoint(ocr, "alice", t0 + 1000)
    assert resp.status == 200
    assert resp.headers == {"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}

    # Later the per-minute rule is the tighter one (4 used of 5).
    resp = ocr_endpoint(ocr, "alice", t0 + 1500)
    assert resp.status == 200
    assert resp.headers == {"RateLimit-Limit": "5", "RateLimit-Remaining": "0", "RateLimit-Reset": "60"}

    # Now the minute rule refuses: the oldest of the five (t0) leaves it at
    # t0+60000, 58400 ms from now -> Retry-After 59 (rounded up).
    resp = ocr_endpoint(ocr, "alice", t0 + 1600)
    assert resp.status == 429
    assert resp.headers == {"RateLimit-Limit": "5", "RateLimit-Remaining": "0",
                            "RateLimit-Reset": "60", "Retry-After": "59"}

    # Recovery exactly when Retry-After said, without sleeping.
    resp = ocr_endpoint(ocr, "alice", t0 + 59_999)
    assert (resp.status, resp.headers["Retry-After"]) == (429, "1")
    resp = ocr_endpoint(ocr, "alice", t0 + 60_000)
    assert resp.status == 200
    assert resp.headers["RateLimit-Limit"] == "5" and resp.headers["RateLimit-Remaining"] == "0"

    # Keys stay plain Redis data: the unit admitted at t0 was trimmed.
    scores = [s for _, s in r.zrange(ocr.key("alice"), 0, -1, withscores=True)]
    assert scores == [t0 + 100, t0 + 200, t0 + 1000, t0 + 1500, t0 + 60_000]
    # It expires a window after its newest unit, on the key's grid (an
    # eighth of the window: at most 7.5 s later).
    assert 0 < r.pttl(ocr.key("alice")) <= 60_000 + 60_000 + 7_500

    # Other users are not affected.
    assert ocr_endpoint(ocr, "bob", t0 + 300).status == 200


def test_app_burst_on_the_server_clock(r):
    """The recommended form, now = '*': the server's clock."""
    api = SlidingLimiter(r, "report", [(3, 60_000), (100, 3_600_000)])
    statuses = [ocr_endpoint(api, "carol").status for _ in range(3)]
    assert statuses == [200, 200, 200]
    resp = ocr_endpoint(api, "carol")
    assert resp.status == 429
    assert resp.headers["RateLimit-Limit"] == "3"
    assert resp.headers["RateLimit-Remaining"] == "0"
    # The oldest unit leaves the minute window at most 60 s from now.
    assert 59 <= int(resp.headers["Retry-After"]) <= 60
    assert 59 <= int(resp.headers["RateLimit-Reset"]) <= 60
    # Scores are the server's time, and the key expires with the longest window.
    before = server_ms(r)
    scores = [s for _, s in r.zrange(api.key("carol"), 0, -1, withscores=True)]
    assert len(scores) == 3 and all(before - 5_000 <= s <= before for s in scores)
    # (on its grid: up to an eighth of the hour later)
    assert 3_595_000 < r.pttl(api.key("carol")) <= 3_600_000 + 450_000


# --------------------------------------------------------------------------
# Batch endpoint: COST
# --------------------------------------------------------------------------


def test_app_batch_endpoint_charges_one_unit_per_item(r):
    batch = SlidingLimiter(r, "ocr-batch", [(10, 60_000), (50, 3_600_000)])
    key = batch.key("dave")
    t0 = server_ms(r)

    resp = ocr_batch_endpoint(batch, "dave", ["p1", "p2", "p3", "p4"], t0)
    assert resp.status == 200
    assert resp.headers == {"RateLimit-Limit": "10", "RateLimit-Remaining": "6", "RateLimit-Reset": "60"}
    units = r.zrange(key, 0, -1, withscores=True)
    assert len(units) == 4 and len({m for m, _ in units}) == 4  # four distinct members...
    assert {s for _, s in units} == {t0}  # ...all scored now

    assert ocr_batch_endpoint(batch, "dave", ["p"] * 4, t0 + 1_000).headers["RateLimit-Remaining"] == "2"

    # 4 more do not fit (8 used of 10); 2 of them would have to leave: the
    # 2nd oldest unit (t0) leaves at t0+60000.
    resp = ocr_batch_endpoint(batch, "dave", ["p"] * 4, t0 + 2_000)
    assert resp.status == 429
    assert resp.headers == {"RateLimit-Limit": "10", "RateLimit-Remaining": "2",
                            "RateLimit-Reset": "59", "Retry-After": "58"}
    assert r.zcard(key) == 8  # the whole batch was refused, nothing partial

    # A batch that fits is still admitted.
    resp = ocr_batch_endpoint(batch, "dave", ["p"] * 2, t0 + 2_000)
    assert (resp.status, resp.headers["RateLimit-Remaining"]) == (200, "0")
    assert r.zcard(key) == 10

    # A single page at t0+59000 waits for the oldest: 1 s.
    resp = ocr_batch_endpoint(batch, "dave", ["p"], t0 + 59_000)
    assert (resp.status, resp.headers["Retry-After"]) == (429, "1")
    # When the first four leave the minute window, four fit again.
    resp = ocr_batch_endpoint(batch, "dave", ["p"] * 4, t0 + 60_000)
    assert (resp.status, resp.headers["RateLimit-Remaining"]) == (200, "0")
    # Nothing is trimmed yet: the units from t0 still count for the hourly rule.
    assert r.zcard(key) == 14

    # Larger than the smallest rule: refused by the module before any write.
    resp = ocr_batch_endpoint(batch, "dave", ["p"] * 11, t0 + 120_000)
    assert resp.status == 413
    assert "cost" in resp.body["error"] and "'11'" in resp.body["error"]
    assert r.zcard(key) == 14
    assert ocr_batch_endpoint(batch, "dave", [], t0).status == 400


# --------------------------------------------------------------------------
# Quota status: RL.PEEK
# --------------------------------------------------------------------------


def test_app_quota_status_peeks_without_consuming(r):
    ocr = SlidingLimiter(r, "ocr", OCR_RULES)
    key = ocr.key("erin")
    t0 = server_ms(r)

    # Never used: full quota, and no key is created.
    resp = quota_endpoint(ocr, "erin", t0)
    assert resp.body == {"allowed": True, "limit": 3, "remaining": 3, "retry_after_s": 0}
    assert r.exists(key) == 0

    ocr_endpoint(ocr, "erin", t0)
    ocr_endpoint(ocr, "erin", t0 + 100)
    expire_at = r.pexpiretime(key)
    members = r.zrange(key, 0, -1, withscores=True)
    for _ in range(5):  # asking repeatedly changes nothing
        resp = quota_endpoint(ocr, "erin", t0 + 200)
        assert resp.status == 200
        assert resp.body == {"allowed": True, "limit": 3, "remaining": 1, "retry_after_s": 0}
        assert resp.headers == {"RateLimit-Limit": "3", "RateLimit-Remaining": "1", "RateLimit-Reset": "1"}
    assert r.zrange(key, 0, -1, withscores=True) == members
    assert r.pexpiretime(key) == expire_at

    # RL.PEEK answers exactly what RL.CHECK then does.
    peeked = ocr.peek("erin", t0 + 200)
    assert peeked == [0, 1, 3, 0, -1, 1000]
    assert ocr.check("erin", t0 + 200) == peeked

    # Quota exhausted: status says so, with the wait.
    resp = quota_endpoint(ocr, "erin", t0 + 300)
    assert resp.body == {"allowed": False, "limit": 3, "remaining": 0, "retry_after_s": 1}
    assert ocr.peek("erin", t0 + 300) == ocr.check("erin", t0 + 300) == [1, 1, 3, 0, 700, 900]
    assert r.zcard(key) == 3


# --------------------------------------------------------------------------
# SMS codes: RL.DAYHOUR
# --------------------------------------------------------------------------

UTC = timezone.utc


def test_app_sms_codes_per_natural_day_and_hour(r):
    sms = SmsCodeEndpoint(r, daylimit=5, hourlimit=2)
    at = lambda h, m, s=0, day=17: datetime(2024, 5, day, h, m, s, tzinfo=UTC)  # noqa: E731

    daykey, hourkey = SmsCodeEndpoint.keys(42, at(13, 40))
    assert (daykey, hourkey) == ("{user:42}:day:2024-05-17", "{user:42}:hour:2024-05-17T13")
    assert key_slot(daykey.encode()) == key_slot(hourkey.encode())  # Cluster: one slot
    assert r.command_getkeys("RL.DAYHOUR", daykey, hourkey, 5, 2, 1, 1) == \
        [daykey, hourkey]
    assert SmsCodeEndpoint.ttls(at(13, 40)) == (10 * 3_600_000 + 20 * 60_000, 20 * 60_000)

    resp = sms.send(42, at(13, 40))
    assert resp.status == 200 and resp.body == {"sent": True, "day": 1, "hour": 1}
    assert resp.headers == {"X-Codes-Left-Today": "4", "X-Codes-Left-This-Hour": "1"}
    # Keys expire at the end of the day / hour of the app's clock.
    day_pttl = r.pttl(daykey)
    assert 37_200_000 - 5_000 < day_pttl <= 37_200_000
    assert 1_200_000 - 5_000 < r.pttl(hourkey) <= 1_200_000
    assert r.get(daykey) == b"1" and r.get(hourkey) == b"1"

    assert sms.send(42, at(13, 41)).body == {"sent": True, "day": 2, "hour": 2}

    # Third in the hour: refused by the hour, retry at 14:00; nothing counted.
    resp = sms.send(42, at(13, 42))
    assert resp.status == 429
    assert resp.body == {"error": "hour limit", "day": 2, "hour": 3}
    assert resp.headers == {"Retry-After": str(18 * 60)}
    assert r.get(daykey) == b"2" and r.get(hourkey) == b"2"

    # Next hour: a new hour key; the day key keeps its original expiry
    # (10h20m), it is not reset to the 9h55m given now.
    resp = sms.send(42, at(14, 5))
    assert resp.body == {"sent": True, "day": 3, "hour": 1}
    _, hourkey14 = SmsCodeEndpoint.keys(42, at(14, 5))
    assert 3_300_000 - 5_000 < r.pttl(hourkey14) <= 3_300_000
    assert 35_700_000 < r.pttl(daykey) <= day_pttl
    assert sms.send(42, at(14, 10)).body == {"sent": True, "day": 4, "hour": 2}
    assert sms.send(42, at(15, 0)).body == {"sent": True, "day": 5, "hour": 1}

    # Sixth of the day: refused by the day, retry at midnight; the 16h key
    # is not even created.
    resp = sms.send(42, at(16, 30))
    assert resp.status == 429
    assert resp.body == {"error": "day limit", "day": 6, "hour": 0}
    assert resp.headers == {"Retry-After": str(7 * 3600 + 30 * 60)}
    assert r.exists(SmsCodeEndpoint.keys(42, at(16, 30))[1]) == 0
    assert r.get(daykey) == b"5"

    # A new day starts from zero.
    resp = sms.send(42, at(0, 0, 5, day=18))
    assert resp.status == 200 and resp.body == {"sent": True, "day": 1, "hour": 1}

    # Kill switch: hour limit 0 refuses even a user with no keys, writing nothing.
    sms.hourlimit = 0
    resp = sms.send(43, at(9, 0))
    assert resp.status == 429 and resp.body == {"error": "hour limit", "day": 0, "hour": 1}
    assert r.exists(*SmsCodeEndpoint.keys(43, at(9, 0))) == 0
    sms.hourlimit = 2
    assert sms.send(43, at(9, 0)).status == 200


# --------------------------------------------------------------------------
# Login: RL.LOCKCOUNT
# --------------------------------------------------------------------------


def test_app_login_locks_after_failures(r):
    app = LoginEndpoint(r, {"frank": "s3cret", "gina": "hunter2"}, max_failures=3,
                        window=15 * 60_000, locktime=5 * 60_000)
    lock, failures = LoginEndpoint.keys("frank")

    resp = app.login("frank", "guess1")
    assert (resp.status, resp.body["attempts_left"]) == (401, 2)
    first_pttl = r.pttl(failures)
    assert 900_000 - 5_000 < first_pttl <= 900_000
    resp = app.login("frank", "guess2")
    assert (resp.status, resp.body["attempts_left"]) == (401, 1)
    assert r.get(failures) == b"2"
    assert r.pttl(failures) <= first_pttl  # the window is not extended

    # Third failure: locked for 5 minutes.
    resp = app.login("frank", "guess3")
    assert resp.status == 429
    assert resp.headers == {"Retry-After": "300"}
    assert r.get(lock) == b"1" and r.exists(failures) == 0
    assert 300_000 - 5_000 < r.pttl(lock) <= 300_000

    # While locked even the right password is refused, Retry-After from the lock's TTL.
    resp = app.login("frank", "s3cret")
    assert resp.status == 429 and resp.headers["Retry-After"] in ("299", "300")
    # Wrong passwords while locked are not counted, and report the lock TTL.
    resp = app.login("frank", "guess4")
    assert resp.status == 429 and resp.headers["Retry-After"] in ("299", "300")
    assert r.exists(failures) == 0
    lock_ttl_before = r.pttl(lock)
    assert r.execute_command("RL.LOCKCOUNT", lock, failures, 900_000, 2, 300_000)[:2] == [1, 0]
    assert r.pttl(lock) <= lock_ttl_before  # the lock is not extended

    # Another user is unaffected.
    assert app.login("gina", "hunter2").status == 200

    # The lock lifts (made to expire now rather than waiting 5 minutes).
    r.pexpire(lock, 1)
    deadline = time.time() + 2
    while r.exists(lock) and time.time() < deadline:
        time.sleep(0.005)
    resp = app.login("frank", "s3cret")
    assert resp.status == 200

    # A success clears the failures: two more are allowed before the next lock.
    assert app.login("frank", "x").body["attempts_left"] == 2
    assert app.login("frank", "s3cret").status == 200
    assert r.exists(failures) == 0
    assert app.login("frank", "x").body["attempts_left"] == 2


# --------------------------------------------------------------------------
# README-style commands through the real redis-cli
# --------------------------------------------------------------------------


def _cli_binary() -> str:
    path = shutil.which("redis-cli") or shutil.which("valkey-cli")
    if path is None:
        pytest.skip("no redis-cli / valkey-cli on PATH")
    return path


def test_app_redis_cli_readme_commands(server):
    cli = _cli_binary()

    def run(*args: str) -> str:
        out = subprocess.run([cli, "-p", str(server.port), *args], capture_output=True, text=True,
                             timeout=10)
        assert out.returncode == 0, out.stderr
        return out.stdout

    # redis-cli RL.CHECK demo '*' 2 1000   (three times)
    outputs = [run("RL.CHECK", "demo", "*", "2", "1000") for _ in range(3)]
    assert outputs[0] == "0\n1\n2\n1\n-1\n1000\n"
    assert outputs[1] == "0\n1\n2\n0\n-1\n1000\n"
    third = [int(x) for x in outputs[2].split()]
    assert third[:4] == [1, 1, 2, 0], outputs[2]
    retry_after, reset_after = third[4:]
    assert 0 < retry_after <= reset_after <= 1000, outputs[2]

    # The formatted (tty-style) output.
    text = run("--no-raw", "RL.PEEK", "demo", "*", "2", "1000")
    lines = text.splitlines()
    assert lines[:4] == ["1) (integer) 1", "2) (integer) 1", "3) (integer) 2", "4) (integer) 0"], text
    assert lines[4].startswith("5) (integer) ") and lines[5].startswith("6) (integer) ") and len(lines) == 6

    # The sorted set is readable with ZRANGE: two members, integer ms scores.
    zr = run("ZRANGE", "demo", "0", "-1", "WITHSCORES").split()
    assert len(zr) == 4 and zr[1].isdigit() and zr[3].isdigit()
    assert int(run("PTTL", "demo")) > 0

    # The README's other examples.
    assert run("RL.CHECK", "rl:{user:42}:ocr", "*", "10", "60000", "100", "3600000") == "0\n1\n10\n9\n-1\n60000\n"
    assert run("RL.PEEK", "rl:{user:42}:ocr", "*", "10", "60000", "100", "3600000") == "0\n1\n10\n8\n-1\n60000\n"
    assert run("RL.CHECK", "rl:{user:42}:batch", "*", "100", "60000", "COST", "25") == "0\n1\n100\n75\n-1\n60000\n"
    assert run("ZCARD", "rl:{user:42}:batch") == "25\n"
    assert run("RL.DAYHOUR", "sms:{user:42}:d:2026-11-30", "sms:{user:42}:h:2026-11-30T16", "10", "3",
               "28800000", "1800000") == "1\n1\n"
    assert run("GET", "sms:{user:42}:d:2026-11-30") == "1\n"
    assert 1_795_000 < int(run("PTTL", "sms:{user:42}:h:2026-11-30T16")) <= 1_800_000
    assert run("RL.LOCKCOUNT", "lock:demo", "count:demo", "60000", "3", "300000") == "0\n1\n60000\n"

    # An argument error names the bad argument.
    assert run("--no-raw", "RL.CHECK", "demo", "*", "5", "1000", "10", "0") == \
        "(error) ERR invalid window '0' for rule 2: expected an integer from 1 to 9007199254740991\n"
    assert run("--no-raw", "RL.CHECK", "demo").startswith("(error) ERR wrong number of arguments")
