"""The README's recipes, run as written there (section "Recipes")."""

from __future__ import annotations

import threading
import time
import uuid

import redis

from replay_workload import rl


# --- Recipe: login lockout that counts failures only -------------------------

def login(r: redis.Redis, user: str, password_ok: bool, *, n: int = 5) -> str:
    """Locks on the n-th failure within 15 minutes, for 30 minutes."""
    lock, count = f"login:{{{user}}}:lock", f"login:{{{user}}}:fails"
    if r.exists(lock):                      # 1. check the lock before trying
        return "locked"
    if password_ok:
        r.delete(count)                     # 2. success: forget the failures
        return "ok"
    limited, _, _ = r.execute_command(      # 3. failure: count it; the n-th locks
        "RL.LOCKCOUNT", lock, count, 900_000, n - 1, 1_800_000)
    return "locked" if limited else "bad password"


def test_login_lockout_locks_on_the_nth_failure_and_success_resets(r):
    assert [login(r, "ada", False) for _ in range(4)] == ["bad password"] * 4
    assert login(r, "ada", True) == "ok"    # a success clears the count
    assert [login(r, "ada", False) for _ in range(5)] == ["bad password"] * 4 + ["locked"]
    assert 0 < r.pttl("login:{ada}:lock") <= 1_800_000
    assert login(r, "ada", True) == "locked"  # even the right password waits
    assert not r.exists("login:{ada}:fails")
    # Recipe: reset and unlock — delete the keys.
    r.delete("login:{ada}:lock", "login:{ada}:fails")
    assert login(r, "ada", True) == "ok"


# --- Recipe: refund on a downstream failure ----------------------------------

def call_ocr(r: redis.Redis, user: str, downstream_ok: bool) -> int:
    key, rules = f"rl:{{{user}}}:ocr", (10, 60_000, 100, 3_600_000)
    reply = r.execute_command("RL.CHECK", key, "*", *rules)
    if reply[0] == 1:
        return 429
    if not downstream_ok:                   # could not serve: give the unit back
        r.execute_command("RL.CHECK", key, "*", *rules, "REFUND")
        return 502
    return 200


def test_refund_on_downstream_failure(r):
    assert [call_ocr(r, "u1", ok) for ok in [True, False, True, False]] == [200, 502, 200, 502]
    assert r.zcard("rl:{u1}:ocr") == 2      # only the served calls count
    assert [call_ocr(r, "u1", True) for _ in range(9)] == [200] * 8 + [429]
    # The same for a token bucket and a calendar quota.
    assert rl(r, "RL.THROTTLE", "tb:{u1}", "*", 5, 1, 1000)[3] == 4
    # A refund answers the state now: the whole burst can pass again.
    assert rl(r, "RL.THROTTLE", "tb:{u1}", "*", 5, 1, 1000, "REFUND")[3] == 5
    assert rl(r, "RL.QUOTA", "q:{u1}", "*", "UTC", "DAY", 3)[3] == 2
    assert rl(r, "RL.QUOTA", "q:{u1}", "*", "UTC", "DAY", 3, "REFUND")[3] == 3
    assert not r.exists("tb:{u1}") and not r.exists("q:{u1}")  # back to empty


# --- Recipe: rolling out new rules --------------------------------------------

def test_rolling_out_rules_keeps_history(r):
    t = 1_796_054_400_000
    old_rules, new_rules = (1, 60_000, 5, 3_600_000), (1, 60_000)
    # Instances on the old rules have used 4 of the hour.
    for k in range(4):
        assert rl(r, "RL.CHECK", "sms:{u2}", t + k * 61_000, *old_rules)[0] == 0
    # A canary on the shorter rule set: admitted, trims nothing...
    assert rl(r, "RL.CHECK", "sms:{u2}", t + 4 * 61_000, *new_rules)[0] == 0
    assert r.zcard("sms:{u2}") == 5
    # ...so when it is rolled back the hour still counts everything.
    assert rl(r, "RL.CHECK", "sms:{u2}", t + 5 * 61_000, *old_rules)[:2] == [1, 2]
    # RL.THROTTLE keeps one field per window: a new window starts full and
    # an old one is left alone; RL.QUOTA keeps one field per period bucket.
    rl(r, "RL.THROTTLE", "api:{u2}", t, 10, 10, 1000)
    rl(r, "RL.THROTTLE", "api:{u2}", t, 10, 10, 1000, 100, 1000, 60_000)
    assert sorted(r.hkeys("api:{u2}")) == [b"1000", b"60000"]


# --- RL.THROTTLE: "100k a day; 10/s with bursts of 100" -----------------------

def admitted_in_first_minute(r, key, rules):
    """One request every 60 ms for a minute (1,000), explicit `now` in the past."""
    from replay_workload import server_ms
    t0 = server_ms(r) - 61_000
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.execute_command("RL.THROTTLE", key, t0 + 60 * i, *rules)
    return sum(1 for reply in p.execute() if reply[0] == 0)


def test_day_budget_with_a_rate_rule_as_the_readme_writes_it(r):
    # The README's example: the day rule's burst is the whole day, the rate
    # rule spreads it: 100 at once, then 10 a second (599 more in 59.94 s).
    assert admitted_in_first_minute(r, "api:{key:9}", (100000, 100000, 86400000, 100, 10, 1000)) == 699
    # The example it replaced: a day rule with burst 100 refills 1.157/s, so
    # the 10/s rule never binds (the issue measured 169).
    assert admitted_in_first_minute(r, "api:{key:8}", (100, 100000, 86400000, 10, 10, 1000)) == 169


# --- Recipe: LLM endpoint: admit on requests, then debit the tokens ----------

def chat(r: redis.Redis, user: str, prompt: str, llm) -> tuple[int, str | None]:
    """10 requests a minute, 50,000 tokens a day (UTC); `llm(prompt)`
    returns the answer and the tokens it used."""
    reqs, toks = f"llm:{{{user}}}:reqs", f"llm:{{{user}}}:tokens"
    day = ("UTC", "DAY", 50_000)
    if r.execute_command("RL.QUOTAPEEK", toks, "*", *day, "COST", 0)[3] == 0:
        return 429, None                    # 1. today's tokens are spent (or overspent)
    if r.execute_command("RL.CHECK", reqs, "*", 10, 60_000)[0] == 1:
        return 429, None                    # 2. admit on requests
    text, used = llm(prompt)                # 3. serve: only now is the cost known
    if used:                                # 4. charge it: a debit is never refused
        r.execute_command("RL.QUOTA", toks, "*", *day, "COST", used, "DEBIT")
    return 200, text


def test_llm_endpoint_debits_the_tokens_the_answer_used(r):
    big = lambda prompt: (prompt.upper(), 20_000)  # noqa: E731
    assert [chat(r, "u7", "hi", big)[0] for _ in range(4)] == [200, 200, 200, 429]
    # The third answer overspent the day (60,000 of 50,000): recorded all
    # the same, and the state now says so.
    assert r.hget("llm:{u7}:tokens", next(iter(r.hkeys("llm:{u7}:tokens")))) == b"60000"
    now = rl(r, "RL.QUOTAPEEK", "llm:{u7}:tokens", "*", "UTC", "DAY", 50_000, "COST", 0)
    assert now[:4] == [1, 1, 50_000, 0]
    assert r.zcard("llm:{u7}:reqs") == 3    # the refused request was not counted
    # Small answers: the request rule binds on the 11th call in a minute.
    small = lambda prompt: (prompt, 10)  # noqa: E731
    replies = [chat(r, "u8", "hi", small) for _ in range(11)]
    assert [c for c, _ in replies] == [200] * 10 + [429]
    assert replies[0][1] == "hi"
    assert rl(r, "RL.QUOTAPEEK", "llm:{u8}:tokens", "*", "UTC", "DAY", 50_000, "COST", 0)[3] == 49_900


# --- Recipe: outbound API client that waits ----------------------------------

def call_vendor(r: redis.Redis, send, cancel: threading.Event, max_wait_ms: int = 5_000):
    """The vendor allows 10 calls a second, no burst: reserve a slot, sleep
    the delay the server gave, then call; a caller that gives up while
    waiting frees its slot."""
    key, rule = "vendor:{acme}", (1, 10, 1000)
    limited, _, _, _, delay_ms, _ = r.execute_command(
        "RL.THROTTLE", key, "*", *rule, "RESERVE", max_wait_ms)
    if limited:
        return "busy"                       # the wait would exceed max_wait_ms
    if cancel.wait(delay_ms / 1000):        # sleep the delay, unless the caller gives up
        r.execute_command("RL.THROTTLE", key, "*", *rule, "REFUND")  # free the slot
        return "cancelled"
    return send()


def test_outbound_client_waits_its_turn_and_frees_a_cancelled_slot(server):
    sent: list[float] = []
    lock = threading.Lock()

    def send():
        with lock:
            sent.append(time.monotonic())
        return "ok"

    results: list[str] = []

    def worker():
        c = server.client()
        results.append(call_vendor(c, send, threading.Event()))
        c.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * 6
    # The calls went out one emission interval (100 ms) apart, not at once.
    gaps = [b - a for a, b in zip(sorted(sent), sorted(sent)[1:])]
    assert all(g >= 0.08 for g in gaps), gaps
    # A caller that gives up frees its slot: the next one waits no longer
    # than if the cancelled caller had never reserved.
    r = server.client()
    cancel = threading.Event()
    cancel.set()
    t = rl(r, "TIME")
    ms = int(t[0]) * 1000 + int(t[1]) // 1000
    rl(r, "DEL", "vendor:{acme}")
    first = rl(r, "RL.THROTTLE", "vendor:{acme}", ms, 1, 10, 1000, "RESERVE", 5000)
    assert first[4] == 0
    assert call_vendor(r, send, cancel) == "cancelled"
    nxt = rl(r, "RL.THROTTLEPEEK", "vendor:{acme}", ms, 1, 10, 1000, "RESERVE", 5000)
    assert nxt[:5] == [0, 1, 1, 0, 100]
    # Longer than the caller may wait (others hold the next 10 s): refused
    # at once, nothing reserved.
    rl(r, "RL.THROTTLE", "vendor:{acme}", "*", 1, 10, 1000, "COST", 100, "DEBIT")
    before = r.hgetall("vendor:{acme}")
    assert call_vendor(r, send, threading.Event(), max_wait_ms=0) == "busy"
    assert r.hgetall("vendor:{acme}") == before
    r.close()


# --- Recipe: at most 3 OCR jobs per user in flight, and 100 a day -------------

def run_ocr_job(r, user, job_id, work, ttl=30_000):
    slots, day = f"ocr:{{{user}}}:running", f"ocr:{{{user}}}:day"
    if r.execute_command("RL.LEASE", slots, "*", 3, ttl, "TOKEN", job_id)[0] == 1:
        return 429                              # 3 running: Retry-After from reply[4]
    try:
        if r.execute_command("RL.QUOTA", day, "*", "Asia/Shanghai", "DAY", 100)[0] == 1:
            return 429                          # 100 today
        def heartbeat():                        # every ttl/3 while working
            return r.execute_command("RL.RENEW", slots, "*", ttl, job_id)[0] > 0
        return 200 if work(heartbeat) else 500  # heartbeat() False: the lease is lost, stop
    finally:
        r.execute_command("RL.RELEASE", slots, "*", job_id)


def test_three_ocr_jobs_in_flight_and_a_daily_quota(r):
    seen = []

    def nested(depth):
        """A job whose work starts the next job while it runs."""
        def work(heartbeat):
            assert heartbeat()
            seen.append(run_ocr_job(r, "u3", f"job-{depth + 1}", nested(depth + 1)))
            return heartbeat()
        return work

    assert run_ocr_job(r, "u3", "job-0", nested(0)) == 200
    # job-0, job-1, job-2 ran at once; job-3 was refused; all released after.
    assert seen == [429, 200, 200]
    assert not r.exists("ocr:{u3}:running")
    assert rl(r, "RL.QUOTAPEEK", "ocr:{u3}:day", "*", "Asia/Shanghai", "DAY", 100)[3] == 96  # 3 used
    # A lost lease: the heartbeat says so, the job stops.
    def loses_its_lease(heartbeat):
        r.delete("ocr:{u3}:running")
        return heartbeat()
    assert run_ocr_job(r, "u3", "job-9", loses_its_lease) == 500
    # The daily quota refuses once 100 are used (and the slot is given back).
    rl(r, "RL.QUOTA", "ocr:{u3}:day", "*", "Asia/Shanghai", "DAY", 100, "COST", 96)
    assert run_ocr_job(r, "u3", "job-10", lambda hb: True) == 429
    assert not r.exists("ocr:{u3}:running")


# --- Recipe: 60 a minute AND 2 in flight --------------------------------------

def start_export(r, user, job_id):
    rate, slots = f"exp:{{{user}}}:rate", f"exp:{{{user}}}:running"
    reply = r.execute_command(
        "RL.ALL", 2, rate, slots, "*",
        "THROTTLE", 1, 60, 60, 60_000,          # 60 a minute, all at once if need be
        "LEASE", 2, 2, 300_000, "TOKEN", job_id)  # 2 in flight; a retry finds its own lease
    if reply[0] == 1:
        return 429, reply[5]                    # reply[1]: 1 the rate, 2 the slots
    return 200, 0                               # RL.RELEASE slots when the export ends


def test_sixty_a_minute_and_two_in_flight(r):
    assert start_export(r, "u4", "e1") == (200, 0)
    assert start_export(r, "u4", "e1") == (200, 0)   # a retry finds its own lease
    assert start_export(r, "u4", "e2") == (200, 0)
    status, retry = start_export(r, "u4", "e3")
    assert status == 429 and 0 < retry <= 300_000    # 2 in flight
    assert rl(r, "RL.RELEASE", "exp:{u4}:running", "*", "e1", "e2") == [1, 1]
    # 3 of the minute's 60 are used (the refusal charged nothing); use the
    # rest: the rate refuses, and no slot is taken.
    assert rl(r, "RL.THROTTLEPEEK", "exp:{u4}:rate", "*", 60, 60, 60_000, "COST", 0)[3] == 57
    rl(r, "RL.THROTTLE", "exp:{u4}:rate", "*", 60, 60, 60_000, "COST", 57)
    status, retry = start_export(r, "u4", "e4")
    assert status == 429 and 0 < retry <= 1000
    assert not r.exists("exp:{u4}:running")


# --- Recipe: SMS codes per phone AND per IP AND a global budget ---------------

SMS = ("CHECK", 1, 1, 60_000, 5, 86_400_000,    # per phone: 1 a minute, 5 a day
       "CHECK", 2, 20, 3_600_000,               # per IP: 20 an hour
       "QUOTA", 3, "UTC", "DAY", 10_000)        # every phone: 10,000 a UTC day


def send_code(r, phone, ip, deliver):
    keys = (f"sms:phone:{phone}", f"sms:ip:{ip}", "sms:global")
    reply = r.execute_command("RL.ALL", 3, *keys, "*", *SMS)
    if reply[0] == 1:
        return 429, reply[1]                    # which limit: 1 phone, 2 IP, 3 global
    if not deliver(phone):
        r.execute_command("RL.ALL", 3, *keys, "*", *SMS, "REFUND")
        return 502, 0
    return 200, 0


def test_sms_per_phone_and_per_ip_and_a_global_budget(r):
    ok, down = (lambda phone: True), (lambda phone: False)
    assert send_code(r, "+33600000001", "192.0.2.7", ok) == (200, 0)
    assert send_code(r, "+33600000001", "192.0.2.7", ok) == (429, 1)   # the phone's minute
    # An undelivered code gives every unit back.
    assert send_code(r, "+33600000002", "192.0.2.7", down) == (502, 0)
    assert send_code(r, "+33600000002", "192.0.2.7", ok) == (200, 0)
    # One IP sprays phones: its 20th code in the hour passes, the 21st not,
    # and the refused phone keeps its allowance and the budget its unit.
    for i in range(3, 21):
        assert send_code(r, f"+336000000{i:02}", "192.0.2.7", ok) == (200, 0), i
    assert send_code(r, "+33600000099", "192.0.2.7", ok) == (429, 2)
    assert not r.exists("sms:phone:+33600000099")
    assert r.zcard("sms:ip:192.0.2.7") == 20
    assert int(next(iter(r.hvals("sms:global")))) == 20
    assert send_code(r, "+33600000099", "198.51.100.1", ok) == (200, 0)
    # The global budget spent: every phone, every IP refused on clause 3.
    field = next(iter(r.hkeys("sms:global")))
    r.hset("sms:global", field, 10_000)
    assert send_code(r, "+33600000100", "198.51.100.2", ok) == (429, 3)
    assert not r.exists("sms:phone:+33600000100", "sms:ip:198.51.100.2")


# --- Recipe: an LLM endpoint under Cluster -----------------------------------

def complete(r, user, prompt, llm, zone="Europe/Paris", estimate=2_000):
    rate, tokens, running = (f"llm:{{{user}}}:{k}" for k in ("rate", "tokens", "running"))
    day = (zone, "DAY", 100_000)
    request_id = uuid.uuid4().hex
    reply = r.execute_command(
        "RL.ALL", 3, rate, tokens, running, "*",
        "THROTTLE", 1, 60, 60, 60_000,
        "QUOTA", 2, *day, "COST", estimate,
        "LEASE", 3, 2, 120_000, "TOKEN", request_id)
    if reply[0] == 1:
        return 429, reply[5]                    # Retry-After: ceil(reply[5] / 1000)
    try:
        text, used = llm(prompt)
    finally:
        r.execute_command("RL.RELEASE", running, "*", request_id)
    if used > estimate:                         # a debit is never refused
        r.execute_command("RL.QUOTA", tokens, "*", *day, "COST", used - estimate, "DEBIT")
    elif used < estimate:
        r.execute_command("RL.QUOTA", tokens, "*", *day, "COST", estimate - used, "REFUND")
    return 200, text


def test_llm_endpoint_admits_on_an_estimate_and_settles(r):
    day = ("Europe/Paris", "DAY", 100_000)
    left = lambda: int(rl(r, "RL.QUOTAPEEK", "llm:{ada}:tokens", "*", *day, "COST", 0)[3])
    assert complete(r, "ada", "hi", lambda p: ("hello", 500)) == (200, "hello")
    assert left() == 100_000 - 500                  # the estimate's unused 1,500 refunded
    assert complete(r, "ada", "essay", lambda p: ("...", 7_000)) == (200, "...")
    assert left() == 100_000 - 7_500                # 5,000 beyond the estimate debited
    assert not r.exists("llm:{ada}:running")        # every lease released
    # Two in flight: a third request waits, charged nothing.
    held = [rl(r, "RL.LEASE", "llm:{ada}:running", "*", 2, 120_000, "TOKEN", t) for t in ("a", "b")]
    assert [h[0] for h in held] == [0, 0]
    status, retry = complete(r, "ada", "third", lambda p: ("x", 1))
    assert status == 429 and 0 < retry <= 120_000
    assert left() == 100_000 - 7_500
    # Within 2,000 tokens of the day's budget the estimate no longer fits.
    rl(r, "RL.RELEASE", "llm:{ada}:running", "*", "a", "b")
    rl(r, "RL.QUOTA", "llm:{ada}:tokens", "*", *day, "COST", 91_000, "DEBIT")
    status, retry = complete(r, "ada", "more", lambda p: ("x", 1))
    assert status == 429 and retry > 0              # tomorrow, local midnight
