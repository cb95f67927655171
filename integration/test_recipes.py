"""The README's recipes, run as written there (section "Recipes")."""

from __future__ import annotations

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
