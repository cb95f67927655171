"""`now = *` is the time Redis checks key expiry against, frozen inside
MULTI/EXEC, EVAL and FCALL as Redis freezes it (SPEC "Conventions"); and the
memory rule: above `maxmemory` the writing commands refuse with Redis's own
OOM error, but refunds still run (SPEC "Memory"). On every server of the
matrix (RL_SERVER)."""

import time

import pytest
import redis

from servers import Server

OOM = "OOM command not allowed when used memory > 'maxmemory'."


@pytest.fixture
def debug_server():
    with Server(args=["--enable-debug-command", "yes"]) as s:
        yield s


def test_issue_example_two_throttles_in_one_transaction(debug_server):
    """The issue's transaction: the second call sees the same instant as the
    first (one unit gone, not a refilled bucket), and Redis's own expiry
    check in the same transaction agrees that time stood still."""
    r = debug_server.client()
    p = r.pipeline(transaction=True)
    p.execute_command("RL.THROTTLE", "t", "*", 10, 10, 1000)
    p.execute_command("DEBUG", "SLEEP", "0.3")
    p.execute_command("RL.THROTTLE", "t", "*", 10, 10, 1000)
    p.execute_command("SET", "x", 1, "PX", 100)
    p.execute_command("DEBUG", "SLEEP", "0.2")
    p.execute_command("EXISTS", "x")
    out = p.execute()
    assert out[0] == [0, 1, 10, 9, -1, 100]
    assert out[2] == [0, 1, 10, 8, -1, 200]
    assert out[5] == 1, "Redis's expiry clock is frozen inside EXEC"


def scores(r, key):
    return [int(s) for _, s in r.zrange(key, 0, -1, withscores=True)]


PROBES = 1000


def set_probes(r):
    """Keys `p:i` expiring at `base + i` ms, around the server's clock; one
    `EXISTS` of all of them, run inside a transaction or a script, tells the
    instant Redis checks expiry against there (a key is gone once that
    instant is past its expiry)."""
    sec, usec = r.time()
    base = sec * 1000 + usec // 1000 - 200
    p = r.pipeline(transaction=False)
    for i in range(PROBES):
        p.set(f"p:{i}", 1, pxat=base + i)
    p.execute()
    return base


def expiry_instant(base, alive):
    return base + PROBES - alive


PROBE_NAMES = [f"p:{i}" for i in range(PROBES)]


def test_multi_calls_share_redis_expiry_time(debug_server):
    r = debug_server.client()
    base = set_probes(r)
    p = r.pipeline(transaction=True)
    p.execute_command("RL.CHECK", "k", "*", 10, 60000)
    p.execute_command("DEBUG", "SLEEP", "0.05")
    p.execute_command("EXISTS", *PROBE_NAMES)
    p.execute_command("DEBUG", "SLEEP", "0.05")
    p.execute_command("RL.CHECK", "k", "*", 10, 60000)
    out = p.execute()
    a, b = scores(r, "k")
    assert a == b, "two calls in one MULTI see one instant"
    assert a == expiry_instant(base, out[2]), "and it is the instant Redis's expiry uses"


# A Lua loop of about 50 ms between the two calls (inside a script even
# TIME is frozen on recent servers, so the loop counts instead).
SCRIPT = """
redis.call('RL.CHECK', KEYS[1], '*', 10, 60000)
local x = 0
for i = 1, tonumber(ARGV[1]) do x = x + i end
local alive = redis.call('EXISTS', unpack(KEYS, 2))
redis.call('RL.CHECK', KEYS[1], '*', 10, 60000)
return alive
"""

LIBRARY = """#!lua name=rlclock
redis.register_function('twice', function(keys, args)
  redis.call('RL.CHECK', keys[1], '*', 10, 60000)
  local x = 0
  for i = 1, tonumber(args[1]) do x = x + i end
  local alive = redis.call('EXISTS', unpack(keys, 2))
  redis.call('RL.CHECK', keys[1], '*', 10, 60000)
  return alive
end)
"""

LOOP = 3_000_000


def script_slack(r):
    """Redis 7.0 checks expiry inside a script against a snapshot the
    script takes as it starts (`mstime()`), which no module API shows: the
    cached time the module reads there (INFO `server_time_usec`) can be one
    ms earlier. Redis 7.2+ and Valkey use one time for both."""
    info = r.info("server")
    return 1 if info.get("redis_version", "").startswith("7.0") and "valkey_version" not in info else 0


def test_eval_calls_share_redis_expiry_time(server):
    r = server.client()
    base = set_probes(r)
    alive = r.eval(SCRIPT, 1 + PROBES, "k", *PROBE_NAMES, LOOP)
    a, b = scores(r, "k")
    assert a == b, "two calls in one EVAL see one instant"
    assert 0 <= expiry_instant(base, alive) - a <= script_slack(r)


def test_fcall_calls_share_redis_expiry_time(server):
    r = server.client()
    r.execute_command("FUNCTION", "LOAD", LIBRARY)
    base = set_probes(r)
    alive = r.execute_command("FCALL", "twice", 1 + PROBES, "k", *PROBE_NAMES, LOOP)
    a, b = scores(r, "k")
    assert a == b, "two calls in one FCALL see one instant"
    assert 0 <= expiry_instant(base, alive) - a <= script_slack(r)


def test_outside_transactions_each_call_reads_the_clock(server):
    r = server.client()
    r.execute_command("RL.CHECK", "k", "*", 10, 60000)
    time.sleep(0.05)
    r.execute_command("RL.CHECK", "k", "*", 10, 60000)
    a, b = scores(r, "k")
    assert b - a >= 50


@pytest.fixture
def full(server):
    """A server holding one admitted unit per limiter, then pushed above
    `maxmemory` (1 byte: any server is above it) under `noeviction`."""
    r = server.client()
    assert r.execute_command("RL.CHECK", "c", "*", 2, 60000)[0] == 0
    assert r.execute_command("RL.THROTTLE", "t", "*", 2, 2, 60000)[0] == 0
    assert r.execute_command("RL.QUOTA", "q", "*", "UTC", "DAY", 2)[0] == 0
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    yield r
    r.config_set("maxmemory", 0)


WRITES = [
    ("RL.CHECK", "c", "*", 2, 60000),
    ("RL.THROTTLE", "t", "*", 2, 2, 60000),
    ("RL.QUOTA", "q", "*", "UTC", "DAY", 2),
    ("RL.DAYHOUR", "d", "h", 5, 5, 60000, 60000),
    ("RL.LOCKCOUNT", "l", "n", 60000, 5, 60000),
    # Debits and reservations write like admissions: refused too.
    ("RL.CHECK", "c", "*", 2, 60000, "COST", 5, "DEBIT"),
    ("RL.THROTTLE", "t", "*", 2, 2, 60000, "COST", 5, "DEBIT"),
    ("RL.QUOTA", "q", "*", "UTC", "DAY", 2, "COST", 5, "DEBIT"),
    ("RL.THROTTLE", "t", "*", 2, 2, 60000, "RESERVE", 60000),
]


def test_admissions_refused_above_maxmemory_with_redis_error(full):
    before = full.info("ratelimit")
    for cmd in WRITES:
        with pytest.raises(redis.exceptions.OutOfMemoryError) as e:
            full.execute_command(*cmd)
        # redis-py strips the error's "OOM " prefix into the exception type.
        assert "OOM " + str(e.value) == OOM
    after = full.info("ratelimit")
    assert after["ratelimit_check_errors"] == before["ratelimit_check_errors"] + 2
    assert after["ratelimit_check_calls"] == before["ratelimit_check_calls"] + 2
    assert after["ratelimit_check_debits"] == before["ratelimit_check_debits"]
    # Nothing was written: the limiters hold their one unit each.
    assert full.zcard("c") == 1
    assert full.execute_command("RL.THROTTLEPEEK", "t", "*", 2, 2, 60000, "COST", 0)[3] == 1
    assert full.execute_command("RL.QUOTAPEEK", "q", "*", "UTC", "DAY", 2, "COST", 0)[3] == 1
    assert not full.exists("d", "h", "l", "n")


def test_argument_errors_come_before_the_oom_error(full):
    with pytest.raises(redis.exceptions.ResponseError, match="invalid count '0' for rule 1"):
        full.execute_command("RL.CHECK", "c", "*", 0, 60000)


def test_refunds_and_peeks_run_above_maxmemory(full):
    # One unit held of two: one more would pass, leaving 0.
    assert full.execute_command("RL.PEEK", "c", "*", 2, 60000)[:4] == [0, 1, 2, 0]
    full.execute_command("RL.CHECK", "c", "*", 2, 60000, "REFUND")
    assert full.zcard("c") == 0
    full.execute_command("RL.THROTTLE", "t", "*", 2, 2, 60000, "REFUND")
    assert not full.exists("t")
    full.execute_command("RL.QUOTA", "q", "*", "UTC", "DAY", 2, "REFUND")
    assert not full.exists("q")


def redis70(r):
    info = r.info("server")
    return info.get("redis_version", "").startswith("7.0") and "valkey_version" not in info


def test_the_rule_holds_inside_multi_and_scripts(full):
    p = full.pipeline(transaction=True)
    p.execute_command("RL.CHECK", "c", "*", 2, 60000)
    p.execute_command("RL.CHECK", "c", "*", 2, 60000, "REFUND")
    if redis70(full):
        # Redis 7.0 refuses to queue any command above maxmemory (server.c,
        # processCommand: "queuing may consume an unlimited amount of
        # memory"), refunds included: the transaction is discarded.
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            p.execute()
        assert full.zcard("c") == 1
        full.execute_command("RL.CHECK", "c", "*", 2, 60000, "REFUND")
    else:
        admit, refund = p.execute(raise_on_error=False)
        assert isinstance(admit, redis.exceptions.OutOfMemoryError)
        assert "OOM " + str(admit).split(" of pipeline caused error: ")[-1] == OOM
        assert isinstance(refund, list)
    assert full.zcard("c") == 0
    # From a script: Redis adds where it happened to the message.
    with pytest.raises(redis.exceptions.OutOfMemoryError, match="^command not allowed when used memory"):
        full.eval("return redis.call('RL.THROTTLE', KEYS[1], '*', 2, 2, 60000)", 1, "t2")
    full.eval("return redis.call('RL.THROTTLE', KEYS[1], '*', 2, 2, 60000, 'REFUND')", 1, "t")
    assert not full.exists("t", "t2")
