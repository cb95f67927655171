"""The recipes of docs/guides/recipes.md, run from the files the guide shows
verbatim (docs/recipes/*.py; integration/test_docs.py checks the page and
the files agree): no copy of a recipe lives in the test tree."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from replay_workload import rl
from servers import Cluster, redis_cli

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "recipes"))

from call_redis_py import check_ocr  # noqa: E402
from export_slots import start_export  # noqa: E402
from llm_debit_after import chat  # noqa: E402
from llm_gateway import complete, llm_keys  # noqa: E402
from login_lockout import login  # noqa: E402
from ocr_jobs import run_ocr_job  # noqa: E402
from rate_limit_headers import rate_limit_headers, token_bucket_headers  # noqa: E402
from refund_on_failure import call_ocr  # noqa: E402
from sms_codes import send_code  # noqa: E402
from vendor_reserve import call_vendor  # noqa: E402

# The Python package (clients/python), imported from its source: the recipe
# that shows its call runs against the same servers as the raw one. Skipped
# only where the package is not in the tree: a recipe or package that fails
# to import fails the run (it used to skip these tests silently).
PKG_SRC = Path(__file__).resolve().parent.parent / "clients" / "python" / "src"
sys.path.insert(0, str(PKG_SRC))
if (PKG_SRC / "redis_rl").is_dir():
    import export_slots_redis_rl as pkg_export  # noqa: E402
    import login_lockout_redis_rl as pkg_login  # noqa: E402
    import login_lockout_policies as pkg_policies  # noqa: E402
    import ocr_jobs_redis_rl as pkg_ocr  # noqa: E402
    import sms_codes_redis_rl as pkg_sms  # noqa: E402
    import llm_gateway_redis_rl as pkg_gateway  # noqa: E402
    import refund_on_failure_redis_rl as pkg_refund  # noqa: E402
    import vendor_reserve_redis_rl as pkg_vendor  # noqa: E402
    from redis_rl import RateLimiter  # noqa: E402
else:  # the package is not in this tree
    pkg_gateway = None


# --- Login lockout that counts failures only ---------------------------------

def test_login_lockout_locks_after_n_failures_and_success_resets(r):
    assert [login(r, "ada", False) for _ in range(4)] == ["bad password"] * 4
    assert login(r, "ada", True) == "ok"    # a success clears the count
    # n = 5: five failures answered as failures, the sixth attempt refused (RL.LOCKCOUNT's max)
    assert [login(r, "ada", False) for _ in range(6)] == ["bad password"] * 5 + ["locked"]
    assert 0 < r.pttl("login:{ada}:lock") <= 1_800_000
    assert login(r, "ada", True) == "locked"  # even the right password waits
    assert not r.exists("login:{ada}:fails")
    # Recipe: reset and unlock — delete the keys.
    r.delete("login:{ada}:lock", "login:{ada}:fails")
    assert login(r, "ada", True) == "ok"


def test_login_lockout_counts_concurrent_attempts_exactly(r):
    # Counted before the password is checked: 50 concurrent wrong passwords against n = 5 check 5.
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(lambda _: login(r, "bo", False), range(50)))
    assert answers.count("bad password") == 5 and answers.count("locked") == 45


# --- Refund on a downstream failure ---------------------------------------------

def test_refund_on_downstream_failure(r):
    outcome = lambda ok: call_ocr(r, "u1", lambda: ok)  # noqa: E731
    assert [outcome(ok) for ok in [True, False, True, False]] == [200, 502, 200, 502]
    assert r.zcard("rl:{u1}:ocr") == 2      # only the served calls count
    assert [outcome(True) for _ in range(9)] == [200] * 8 + [429]
    # The same for a token bucket and a calendar quota.
    assert rl(r, "RL.THROTTLE", "tb:{u1}", "*", 5, 1, 1000)[3] == 4
    # A refund answers the state now: the whole burst can pass again.
    assert rl(r, "RL.THROTTLE", "tb:{u1}", "*", 5, 1, 1000, "REFUND")[3] == 5
    assert rl(r, "RL.QUOTA", "q:{u1}", "*", "UTC", "DAY", 3)[3] == 2
    assert rl(r, "RL.QUOTA", "q:{u1}", "*", "UTC", "DAY", 3, "REFUND")[3] == 3
    assert not r.exists("tb:{u1}") and not r.exists("q:{u1}")  # back to empty


# --- Rolling out new rules ---------------------------------------------------------

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



# --- docs/commands/throttle.md: "100k a day; 10/s with bursts of 100" -------------

def admitted_in_first_minute(r, key, rules):
    """One request every 60 ms for a minute (1,000), explicit `now` in the past."""
    from replay_workload import server_ms
    t0 = server_ms(r) - 61_000
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.execute_command("RL.THROTTLE", key, t0 + 60 * i, *rules)
    return sum(1 for reply in p.execute() if reply[0] == 0)


def test_day_budget_with_a_rate_rule_as_the_readme_writes_it(r):
    # The example of docs/commands/throttle.md: the day rule's burst is the whole day, the rate
    # rule spreads it: 100 at once, then 10 a second (599 more in 59.94 s).
    assert admitted_in_first_minute(r, "api:{key:9}", (100000, 100000, 86400000, 100, 10, 1000)) == 699
    # The example it replaced: a day rule with burst 100 refills 1.157/s, so
    # the 10/s rule never binds (the issue measured 169).
    assert admitted_in_first_minute(r, "api:{key:8}", (100, 100000, 86400000, 10, 10, 1000)) == 169



# --- LLM endpoint: admit on requests, then debit the tokens ------------------------

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



# --- Outbound API client that waits ----------------------------------------------

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
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["ok"] * 6
    # The calls went out one emission interval (100 ms) apart, not at once:
    # the sixth slot is 500 ms after the first reservation.
    assert max(sent) - start >= 0.49, sorted(sent)
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



# --- At most 3 OCR jobs per user in flight, and 100 a day -----------------------------

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



# --- 60 a minute AND 2 in flight --------------------------------------------------

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



# --- SMS codes per phone AND per IP AND a global budget ---------------------------

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




# --- LLM gateway: requests, tokens, in flight, and a global budget ----------------

class ModelDown(RuntimeError):
    pass


def fails(max_tokens):
    raise ModelDown("the model raised")


def tokens_left(r, api_key, cluster=False, zone="Europe/Paris"):
    tokens = llm_keys(api_key, cluster)[1]
    return int(rl(r, "RL.QUOTAPEEK", tokens, "*", zone, "DAY", 100_000, "COST", 0)[3])


def status_and_used(result):
    """(status, tokens used) of complete(); its headers, checked apart."""
    return result[0], result[2]


def retry_after(result):
    return result[1].get("Retry-After")


def test_llm_gateway_settles_the_estimate_inside_the_finally(r):
    zone = "Europe/Paris"
    first = complete(r, "k1", zone, 2_000, lambda n: 500)
    assert status_and_used(first) == (200, 500)
    # A 200 carries every limit (the estimate counted in "tokens") and no Retry-After.
    assert first[1]["RateLimit-Policy"] == \
        '"rate";q=60;w=60, "tokens";q=100000;w=86400, "inflight";q=2, "global";q=1000;w=60'
    assert first[1]["RateLimit"].startswith('"rate";r=9;t=1, "tokens";r=98000;t=')
    assert first[1]["RateLimit"].endswith(', "inflight";r=1;t=60, "global";r=999;t=60')
    assert retry_after(first) is None
    assert tokens_left(r, "k1") == 100_000 - 500            # 1,500 of the estimate refunded
    assert status_and_used(complete(r, "k1", zone, 2_000, lambda n: 7_000)) == (200, 7_000)
    assert tokens_left(r, "k1") == 100_000 - 7_500          # 5,000 beyond it debited
    assert complete(r, "k1", zone, 2_000, lambda n: 2_000)[0] == 200
    assert tokens_left(r, "k1") == 100_000 - 9_500
    assert not r.exists(llm_keys("k1")[2])                  # every lease given back


def test_llm_gateway_a_raising_model_charges_nothing_and_leaves_no_lease(r):
    zone = "Europe/Paris"
    for _ in range(3):                                      # the three raises
        with pytest.raises(ModelDown):
            complete(r, "k2", zone, 2_000, fails)
    assert tokens_left(r, "k2") == 100_000                  # charged 0, not 6,000
    assert not r.exists(llm_keys("k2")[2])                  # no lease left
    # The requests still count against the rate and the global budget.
    rate_now = rl(r, "RL.THROTTLEPEEK", llm_keys("k2")[0], "*", 10, 60, 60_000, "COST", 0)
    assert 7 <= rate_now[3] <= 8                            # 3 of the burst (one may have refilled)
    assert r.zcard(llm_keys("k2")[3]) == 3


def test_llm_gateway_refusals_and_their_retry_after(r):
    zone = "Europe/Paris"
    rate, tokens, inflight, everyone = llm_keys("k3")
    # Two requests in flight: the third gets a short fixed Retry-After, and
    # no limit is charged (the rate, the tokens and the global budget).
    for token in ("a", "b"):
        assert rl(r, "RL.LEASE", inflight, "*", 2, 60_000, "TOKEN", token)[0] == 0
    refused = complete(r, "k3", zone, 2_000, lambda n: 1)
    assert status_and_used(refused) == (429, 0) and retry_after(refused) == "1"
    assert '"inflight";r=0;t=60' in refused[1]["RateLimit"]   # the lease's ttl: not the Retry-After
    assert not r.exists(rate) and not r.exists(tokens) and not r.exists(everyone)
    rl(r, "RL.RELEASE", inflight, "*", "a", "b")
    # An estimate above the day's budget: waiting cannot help, no Retry-After.
    too_big = complete(r, "k3", zone, 100_001, lambda n: 1)
    assert status_and_used(too_big) == (429, 0) and retry_after(too_big) is None
    # The rate: 10 at once, then one a second. A bucket 11 s in debt (burst
    # 10, T 1 s: one request, then a debit of 10) admits in 2 s (1 s if the
    # machine stalls for a second).
    assert complete(r, "k3", zone, 10, lambda n: 10)[0] == 200
    rl(r, "RL.THROTTLE", rate, "*", 10, 60, 60_000, "COST", 10, "DEBIT")
    status, headers, _ = complete(r, "k3", zone, 10, lambda n: 10)
    assert status == 429 and headers["Retry-After"] in ("1", "2")
    # The global budget, shared by every key: once 1,000 requests are in
    # its minute, another key is refused by clause 4.
    rl(r, "RL.CHECK", everyone, "*", 1_000, 60_000, "COST", 1_000 - 1, "DEBIT")
    status, headers, _ = complete(r, "k4", zone, 10, lambda n: 10)
    assert status == 429 and 55 <= int(headers["Retry-After"]) <= 60
    assert not r.exists(llm_keys("k4")[0])


@pytest.fixture(scope="module")
def llm_cluster():
    if redis_cli() is None:
        pytest.skip("redis-cli is needed to create a cluster")
    cl = Cluster(3)
    cl.start()
    try:
        yield cl
    finally:
        cl.stop()


def test_llm_gateway_under_cluster_one_slot_and_the_same_settlement(llm_cluster):
    rc = llm_cluster.client()
    try:
        slots = {rc.keyslot(k) for key in ("k1", "k2") for k in llm_keys(key, cluster=True)}
        assert len(slots) == 1                              # one RL.ALL, one slot, with the global key
        assert status_and_used(complete(rc, "k1", "Asia/Tokyo", 2_000, lambda n: 300, cluster=True)) == (200, 300)
        assert status_and_used(complete(rc, "k2", "Asia/Tokyo", 2_000, lambda n: 2_500, cluster=True)) == (200, 2_500)
        with pytest.raises(ModelDown):
            complete(rc, "k2", "Asia/Tokyo", 2_000, fails, cluster=True)
        assert tokens_left(rc, "k1", True, "Asia/Tokyo") == 100_000 - 300
        assert tokens_left(rc, "k2", True, "Asia/Tokyo") == 100_000 - 2_500
        assert not rc.exists(llm_keys("k1", True)[2]) and not rc.exists(llm_keys("k2", True)[2])
        assert rc.zcard(llm_keys("k1", True)[3]) == 3       # the global budget counts both keys
    finally:
        rc.close()


def test_llm_gateway_with_the_python_package(r, llm_cluster):
    if pkg_gateway is None:
        pytest.skip("clients/python is not in this tree")
    for client, zone in ((r, "Europe/Paris"), (llm_cluster.client(), "Asia/Tokyo")):
        limiter = RateLimiter(client)
        before = client.zcard("llm:{llm}:global")
        day = lambda key: int(sum(int(v) for v in client.hvals(f"llm:{{llm}}:{key}:tokens")))  # noqa: E731
        first = pkg_gateway.complete(limiter, "p1", zone, 2_000, lambda n: 500)
        assert status_and_used(first) == (200, 500)
        # The same headers as the raw recipe builds from RL.ALL ... DETAILS.
        assert first[1]["RateLimit-Policy"] == \
            '"rate";q=60;w=60, "tokens";q=100000;w=86400, "inflight";q=2, "global";q=1000;w=60'
        assert first[1]["RateLimit"].startswith('"rate";r=9;t=1, "tokens";r=98000;t=')
        assert first[1]["RateLimit"].endswith(', "inflight";r=1;t=60, "global";r=' + str(999 - before) + ';t=60')
        assert retry_after(first) is None
        assert day("p1") == 500                             # the estimate settled to the usage
        for _ in range(3):                                  # a raising model: charged 0, no lease
            with pytest.raises(ModelDown):
                pkg_gateway.complete(limiter, "p1", zone, 2_000, fails)
        assert day("p1") == 500 and not client.exists("llm:{llm}:p1:inflight")
        for token in ("a", "b"):                            # two in flight: Retry-After 1 s
            client.execute_command("RL.LEASE", "llm:{llm}:p2:inflight", "*", 2, 60_000, "TOKEN", token)
        refused = pkg_gateway.complete(limiter, "p2", zone, 10, lambda n: 1)
        assert status_and_used(refused) == (429, 0) and retry_after(refused) == "1"
        assert not client.exists("llm:{llm}:p2:tokens")    # the refusal charged nothing
        assert client.zcard("llm:{llm}:global") == before + 4  # every admitted request, any key
        client.close()


# --- HTTP headers -------------------------------------------------------------------

def test_token_bucket_headers_q_and_w_are_the_rate_r_is_up_to_the_burst(r):
    # 60 a minute with bursts of 10: q=60;w=60, r counts what can pass now.
    reply = rl(r, "RL.THROTTLE", "h:rate", "*", 10, 60, 60_000)
    assert token_bucket_headers(reply, "rate", 60, 60_000) == {
        "RateLimit-Policy": '"rate";q=60;w=60', "RateLimit": '"rate";r=9;t=1'}
    # 10 a second with bursts of 100: r may be above q (a burst is available).
    reply = rl(r, "RL.THROTTLE", "h:burst", "*", 100, 10, 1000)
    assert token_bucket_headers(reply, "api", 10, 1000) == {
        "RateLimit-Policy": '"api";q=10;w=1', "RateLimit": '"api";r=99;t=1'}
    rl(r, "RL.THROTTLE", "h:burst", "*", 100, 10, 1000, "COST", 200, "DEBIT")  # 20 s of refill in debt
    reply = rl(r, "RL.THROTTLE", "h:burst", "*", 100, 10, 1000)
    assert reply[0] == 1
    assert token_bucket_headers(reply, "api", 10, 1000)["Retry-After"] in ("10", "11")


GATEWAY_LIMITS = [("rate", 60, 60), ("tokens", 100_000, 86_400), ("inflight", 2, None), ("global", 1_000, 60)]


def gateway_call(api_key, cost, lease, *extra):
    rate, tokens, inflight, everyone = llm_keys(api_key)
    return ["RL.ALL", 4, rate, tokens, inflight, everyone, "*",
            "THROTTLE", 1, 10, 60, 60_000, "QUOTA", 2, "UTC", "DAY", 100_000, "COST", cost,
            "LEASE", 3, 2, 60_000, "TOKEN", lease, "CHECK", 4, 1_000, 60_000, *extra]


def test_rate_limit_headers_for_every_limit_from_details(r):
    ok = rl(r, *gateway_call("h1", 2_000, "a", "DETAILS"))
    headers = rate_limit_headers(ok, GATEWAY_LIMITS)
    reset_day = headers["RateLimit"].split(", ")[1]          # seconds to UTC midnight
    assert headers["RateLimit-Policy"] == \
        '"rate";q=60;w=60, "tokens";q=100000;w=86400, "inflight";q=2, "global";q=1000;w=60'
    assert headers["RateLimit"] == f'"rate";r=9;t=1, {reset_day}, "inflight";r=1;t=60, "global";r=999;t=60'
    assert reset_day.startswith('"tokens";r=98000;t=')
    assert "Retry-After" not in headers                     # a 200 carries no Retry-After
    rl(r, "RL.LEASE", llm_keys("h1")[2], "*", 2, 60_000, "TOKEN", "b")
    refused = rl(r, *gateway_call("h1", 2_000, "c", "DETAILS"))
    headers = rate_limit_headers(refused, GATEWAY_LIMITS)
    assert refused[:3] == [1, 3, 1] and headers["Retry-After"] == "1"
    too_big = rl(r, *gateway_call("h1", 100_001, "d", "DETAILS"))
    assert too_big[:2] == [1, 2] and "Retry-After" not in rate_limit_headers(too_big, GATEWAY_LIMITS)


def test_calling_it_from_a_service(r):
    assert check_ocr(r, 42) == (0, 9, -1)
    assert r.zcard("rl:{user:42}:ocr") == 1


# --- The Python package's calls next to the raw recipes ---------------------------

needs_package = pytest.mark.skipif(pkg_gateway is None, reason="clients/python is not in this tree")


@needs_package
def test_refund_with_the_python_package(r):
    limiter = RateLimiter(r)
    outcome = lambda ok: pkg_refund.call_ocr(limiter, "u1", lambda: ok)  # noqa: E731
    assert [outcome(ok) for ok in [True, False, True, False]] == [200, 502, 200, 502]
    assert r.zcard("rl:{u1}:ocr") == 2
    assert [outcome(True) for _ in range(9)] == [200] * 8 + [429]


@needs_package
def test_vendor_reservation_with_the_python_package(r):
    limiter = RateLimiter(r)
    sent = []
    send = lambda: sent.append(time.monotonic()) or "ok"  # noqa: E731
    start = time.monotonic()
    assert [pkg_vendor.call_vendor(limiter, send, threading.Event()) for _ in range(3)] == ["ok"] * 3
    assert sent[-1] - start >= 0.19                              # slots 100 ms apart: the third at +200 ms
    cancel = threading.Event()
    cancel.set()
    before = rl(r, "RL.THROTTLEPEEK", "vendor:{acme}", "*", 1, 10, 1000, "COST", 0)
    assert pkg_vendor.call_vendor(limiter, send, cancel) == "cancelled"
    after = rl(r, "RL.THROTTLEPEEK", "vendor:{acme}", "*", 1, 10, 1000, "COST", 0)
    assert after[5] <= before[5]                                 # the slot was given back
    rl(r, "RL.THROTTLE", "vendor:{acme}", "*", 1, 10, 1000, "COST", 100, "DEBIT")
    assert pkg_vendor.call_vendor(limiter, send, threading.Event()) == "busy"


@needs_package
def test_export_slots_with_the_python_package(r):
    from datetime import timedelta
    limiter = RateLimiter(r)
    seen = []

    def nested(depth):
        def export():
            if depth < 2:
                seen.append(pkg_export.run_export(limiter, "u4", nested(depth + 1)))
            return f"export {depth}"
        return export

    assert pkg_export.run_export(limiter, "u4", nested(0)) == (200, "export 0")
    assert seen == [(429, timedelta(seconds=1)), (200, "export 1")]  # the third in flight refused
    assert not r.exists("exp:{u4}:running")                     # both slots given back
    assert rl(r, "RL.THROTTLEPEEK", "exp:{u4}:rate", "*", 60, 60, 60_000, "COST", 0)[3] == 58


@needs_package
def test_login_lockout_with_the_python_package(r):
    limiter = RateLimiter(r)
    attempt = lambda ok: pkg_login.login(limiter, r, "ada", ok)  # noqa: E731
    assert [attempt(False) for _ in range(4)] == ["bad password"] * 4
    assert attempt(True) == "ok"                                 # a success clears the count
    assert [attempt(False) for _ in range(6)] == ["bad password"] * 5 + ["locked"]
    assert 0 < r.pttl("login:{ada}:lock") <= 1_800_000
    assert attempt(True) == "locked"


@needs_package
def test_login_lockout_n_is_the_same_in_the_recipes_and_both_policies(r):
    # One n = 5 everywhere (RL.LOCKCOUNT's max, lockout(max), "5 per ..."):
    # five wrong passwords answered as such, the sixth attempt refused.
    limiter = RateLimiter(r)
    expected = ["bad password"] * 5 + ["locked"] * 2
    assert [login(r, "u1", False) for _ in range(7)] == expected
    assert [pkg_login.login(limiter, r, "u2", False) for _ in range(7)] == expected
    for policy in (pkg_policies.every_attempt, pkg_policies.failures_only):
        assert [pkg_policies.login(limiter, policy, "u3", False) for _ in range(7)] == expected, policy.name
    # Successes: forgotten by the recipes and the failures-only window; seed 004's lockout counts them.
    oks = [True] * 6 + [False] * 6
    assert [login(r, "u4", ok) for ok in oks] == ["ok"] * 6 + ["bad password"] * 5 + ["locked"]
    assert [pkg_policies.login(limiter, pkg_policies.failures_only, "u4", ok) for ok in oks] == \
        ["ok"] * 6 + ["bad password"] * 5 + ["locked"]
    assert [pkg_policies.login(limiter, pkg_policies.every_attempt, "u5", True) for _ in range(6)] == \
        ["ok"] * 5 + ["locked"]


@needs_package
def test_sms_codes_with_the_python_package(r):
    limiter = RateLimiter(r)
    ok, down = (lambda phone: True), (lambda phone: False)
    assert pkg_sms.send_code(limiter, "+33600000001", "192.0.2.7", ok) == (200, 0)
    assert pkg_sms.send_code(limiter, "+33600000001", "192.0.2.7", ok) == (429, 1)
    assert pkg_sms.send_code(limiter, "+33600000002", "192.0.2.7", down) == (502, 0)
    assert r.zcard("sms:ip:192.0.2.7") == 1                     # the undelivered code given back
    for i in range(3, 22):
        assert pkg_sms.send_code(limiter, f"+336000000{i:02}", "192.0.2.7", ok) == (200, 0), i
    assert pkg_sms.send_code(limiter, "+33600000099", "192.0.2.7", ok) == (429, 2)
    assert not r.exists("sms:phone:+33600000099")
    field = next(iter(r.hkeys("sms:global")))
    r.hset("sms:global", field, 10_000)
    assert pkg_sms.send_code(limiter, "+33600000100", "198.51.100.2", ok) == (429, 3)


@needs_package
def test_ocr_jobs_with_the_python_package(r):
    limiter = RateLimiter(r)
    seen = []

    def nested(depth):
        def work(heartbeat):
            assert heartbeat()
            seen.append(pkg_ocr.run_ocr_job(limiter, "u3", f"job-{depth + 1}", nested(depth + 1)))
            return heartbeat()
        return work

    assert pkg_ocr.run_ocr_job(limiter, "u3", "job-0", nested(0)) == 200
    assert seen == [429, 200, 200]                               # the fourth in flight refused
    assert not r.exists("ocr:{u3}:running")
    assert rl(r, "RL.QUOTAPEEK", "ocr:{u3}:day", "*", "Asia/Shanghai", "DAY", 100, "COST", 0)[3] == 97

    def loses_its_lease(heartbeat):
        r.delete("ocr:{u3}:running")
        return heartbeat()
    assert pkg_ocr.run_ocr_job(limiter, "u3", "job-9", loses_its_lease) == 500
