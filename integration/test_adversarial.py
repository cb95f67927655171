"""Adversarial tests: inputs and sequences chosen to break the contract.

The first part holds regression tests for real findings (they fail until the
module is fixed); each names the SPEC.md sentence it checks. The second part
documents attacks that held up: transactions, scripts, the ends of the time
range, huge costs and keys, encodings, OOM, RESP3, reloads, replicas and AOF.
The whole file runs in well under 10 s.
"""

from __future__ import annotations

import re
import socket
import time

import pytest
import redis

from replay_workload import grid_at
from servers import FUNCTIONS, MODULE, PRIMARY_ARGS, Server, keyspace, start_replica, wait_in_sync

MAX = 2**53 - 1
NAME = re.compile(rb"[A-Za-z][0-9A-Za-z]{7}")


@pytest.fixture(scope="module")
def shared():
    with Server(args=["--enable-debug-command", "yes", "--enable-module-command", "yes"]) as s:
        yield s


@pytest.fixture
def r(shared):
    c = shared.client()
    c.flushall()
    c.config_set("notify-keyspace-events", "")
    yield c
    c.close()


def server_ms(c: redis.Redis) -> int:
    sec, usec = c.time()
    return sec * 1000 + usec // 1000


def future(c: redis.Redis) -> int:
    """A `now` far ahead of the server clock: keys it writes never expire in a test."""
    return server_ms(c) + 10**9


def rl(c, *args):
    return c.execute_command(*args)


class Resp3Socket:
    """A raw RESP3 connection, to see push messages (client-side caching)."""

    def __init__(self, server: Server):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=2)
        self.buf = b""

    def send(self, *args) -> None:
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.sock.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-", b":", b"_", b"#", b","):
            return line
        if kind in (b"$", b"="):
            n = int(rest)
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(65536)
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind in (b"*", b">", b"~"):
            return [self.read() for _ in range(int(rest))]
        if kind == b"%":
            return [self.read() for _ in range(2 * int(rest))]
        raise ValueError(line)

    def call(self, *args):
        self.send(*args)
        return self.read()

    def pending(self, wait: float = 0.3) -> bytes:
        self.sock.settimeout(wait)
        try:
            self.buf += self.sock.recv(65536)
        except socket.timeout:
            pass
        data, self.buf = self.buf, b""
        return data

    def close(self):
        self.sock.close()


# ===========================================================================
# Findings (regression tests; they fail on the module as found)
# ===========================================================================

# --- F1: a rejection or an error signals the key as modified -----------------
# SPEC: "Rejected: write nothing"; "an error reply means the keyspace is
# untouched". Every key is opened for writing and RedisModule_CloseKey then
# signals it as modified, so a rejected call aborts other clients' WATCH
# transactions and pushes client-side-caching invalidations, exactly as a
# write would (a built-in no-op such as `SET k v NX` on an existing key does
# neither).

def _rejection_cases(c: redis.Redis, t: int):
    """(watched key, setup, call that must write nothing) per command."""
    return [
        ("ck", lambda: rl(c, "RL.CHECK", "ck", t, 1, 100000), ("RL.CHECK", "ck", t, 1, 100000)),
        ("dh:d", lambda: c.set("dh:d", 5), ("RL.DAYHOUR", "dh:d", "dh:h", 5, 10, 100000, 100000)),
        ("lc:c", lambda: (c.set("lc:l", 1), c.set("lc:c", 2)), ("RL.LOCKCOUNT", "lc:l", "lc:c", 100000, 3, 100000)),
        ("wt", lambda: c.rpush("wt", "x"), ("RL.CHECK", "wt", t, 1, 100000)),  # WRONGTYPE error
        ("bad", lambda: c.set("bad", "abc"), ("RL.LOCKCOUNT", "bad:l", "bad", 100000, 3, 100000)),  # stored-value error
    ]


@pytest.mark.parametrize("case", range(5), ids=["check-rejected", "dayhour-refused", "lockcount-locked",
                                                  "check-wrongtype", "lockcount-bad-counter"])
def test_f1_rejection_or_error_does_not_abort_watch(shared, r, case):
    key, setup, call = _rejection_cases(r, future(r))[case]
    setup()
    before = keyspace(r)
    watcher = shared.client()
    try:
        pipe = watcher.pipeline(transaction=True)
        pipe.watch(key)
        try:
            reply = rl(r, *call)
            assert reply[0] == 1 or call[0] == "RL.DAYHOUR", reply  # a rejection
        except redis.ResponseError:
            pass  # an error
        assert keyspace(r) == before
        pipe.multi()
        pipe.set("watch:witness", 1)
        # Nothing was written, so the transaction of the WATCHing client must run.
        assert pipe.execute() == [True]
    finally:
        watcher.close()


def test_f1_rejected_check_sends_no_tracking_invalidation(shared, r):
    t = future(r)
    assert rl(r, "RL.CHECK", "trk", t, 1, 100000)[0] == 0
    s = Resp3Socket(shared)
    try:
        s.call("HELLO", "3")
        assert s.call("CLIENT", "TRACKING", "ON") == b"+OK"
        assert s.call("ZCARD", "trk") == b":1"  # now tracked
        assert rl(r, "RL.CHECK", "trk", t, 1, 100000)[0] == 1  # rejected
        assert rl(r, "RL.PEEK", "trk", t, 1, 100000)[0] == 1
        pushed = s.pending()
        assert b"invalidate" not in pushed, f"a rejected RL.CHECK invalidated client caches: {pushed!r}"
    finally:
        s.close()


# --- F2: time quadratic in the number of distinct windows --------------------
# SPEC/README: "Complexity: O(R·log N + C + M)". decide() looks each rule's
# window up in all earlier rules (a linear scan per rule), so R rules with
# distinct windows cost O(R^2) even on an empty key: 50k rules block the
# server ~0.5 s, 200k rules ~13 s (equal windows: 0.4 s), a 2M-argument
# call minutes.

def test_f2_many_rules_are_refused_by_the_cap_in_linear_time(r):
    """SPEC "Bounded calls": more than 64 rules is an argument error naming
    the cap, found after the rules are checked — in linear time, so 40,000
    distinct windows cost about what 40,000 equal ones do."""
    n = 40_000

    def server_usec(windows) -> int:
        args = []
        for w in windows:
            args += ["1000000", str(w)]
        r.config_resetstat()
        with pytest.raises(redis.ResponseError, match=f"too many rules: {n} given, at most 64"):
            rl(r, "RL.PEEK", "quad", 1_000_000, *args)
        return int(r.info("commandstats")["cmdstat_rl.peek"]["usec"])

    same = server_usec([1000] * n)
    distinct = server_usec(range(1, n + 1))
    assert distinct <= max(20 * same, 100_000), (
        f"{n} distinct windows took {distinct} us against {same} us for {n} equal ones: quadratic")
    assert rl(r, "RL.PEEK", "quad", 1_000_000, *(["1000000", "1000"] * 64))[0] == 0


# --- F3: reading a counter rewrites it ---------------------------------------
# SPEC: RL.DAYHOUR refused: "write nothing — neither counter moves";
# RL.LOCKCOUNT locked: "nothing written"; errors leave the keyspace untouched.
# Counters are read with RedisModule_StringDMA, which replaces an int- or
# embstr-encoded string (what INCR and SET write) by a new raw copy: the
# OBJECT ENCODING and memory of keys change on refusals and on errors (and no
# longer match the replica's).

def test_f3_refused_and_failed_counter_calls_keep_the_stored_value(r):
    # Decision (README): counters are read with RedisModule_StringDMA, which
    # turns an int/embstr-encoded value into a raw copy of the same bytes. The
    # value, DUMP and expiry stay identical; only OBJECT ENCODING changes, once.
    r.set("enc:d", 5)
    r.set("enc:h", 1)
    r.set("enc:l", 1)
    r.set("enc:c", 7, px=500000)
    r.set("enc:bad", "abc")
    keys = ("enc:d", "enc:h", "enc:l", "enc:c", "enc:bad")
    before = {k: (r.get(k), r.dump(k), r.pexpiretime(k)) for k in keys}
    assert rl(r, "RL.DAYHOUR", "enc:d", "enc:h", 5, 10, 100000, 100000) == [6, 1]  # refused
    assert rl(r, "RL.LOCKCOUNT", "enc:l", "enc:c", 100000, 3, 100000)[0] == 1  # locked
    with pytest.raises(redis.ResponseError, match="not an integer"):
        rl(r, "RL.LOCKCOUNT", "enc:l2", "enc:bad", 100000, 3, 100000)
    after = {k: (r.get(k), r.dump(k), r.pexpiretime(k)) for k in keys}
    assert after == before
    assert r.exists("enc:l2") == 0


# --- F4: a renamed native command -----------------------------------------
# The module replicates its writes as ZADD / ZREMRANGEBYSCORE / PEXPIREAT /
# SET / DEL and counts with ZCOUNT / ZRANGE. If one of them is renamed or
# disabled (rename-command), a call could write locally and then fail to
# replicate. So the module refuses to
# load on such a server, naming the command.

@pytest.mark.parametrize("renamed", ["PEXPIREAT", "ZADD", "DEL", "SET", "ZREMRANGEBYSCORE", "ZCOUNT", "ZRANGE",
                                     "HRANDFIELD"])
def test_f4_module_refuses_to_load_without_a_replicated_command(renamed):
    s = Server(args=["--rename-command", renamed, ""])
    try:
        with pytest.raises(RuntimeError):
            s.start()
        assert f"has no '{renamed.lower()}' command" in s.log_tail(50)
    finally:
        s.stop()


def test_f4_renaming_other_commands_does_not_matter():
    with Server(args=["--rename-command", "KEYS", ""]) as s:
        c = s.client()
        assert rl(c, "RL.CHECK", "k", 1000, 5, 1000) == [0, 1, 5, 4, -1, 1000]
        c.close()


# --- F5: a write-only ACL key permission reads the lock's TTL ----------------
# SPEC: "key patterns hold for every RL command and every key it names";
# "read-write for the others". RL.LOCKCOUNT's lockkey spec is RW|INSERT
# without ACCESS, so a user allowed only to write lock keys (%W~) runs it and
# gets the lock's remaining TTL in the reply, which PTTL refuses it.

def test_f5_write_only_permission_on_lock_key_cannot_read_its_ttl(shared, r):
    r.execute_command("ACL", "SETUSER", "wlock", "reset", "on", "nopass", "~count:*", "%W~lock:*",
                      "+rl.lockcount", "+pttl")
    r.set("lock:x", "1", px=123456)
    u = shared.client(username="wlock", password="")
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.pttl("lock:x")
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.execute_command("RL.LOCKCOUNT", "lock:x", "count:x", 100000, 3, 100000)
    finally:
        u.close()
        r.execute_command("ACL", "DELUSER", "wlock")


# --- F6: admitted writes fire no keyspace notifications ----------------------
# SPEC: "Where it is silent, do what a Redis user would expect from a
# built-in command". The writes go through the key API, which notifies
# nothing: the primary is silent while its replicas, applying the replicated
# ZADD/PEXPIREAT/SET/DEL, fire zadd/expire/set/del.

def test_f6_admitted_writes_fire_keyspace_notifications(shared, r):
    r.config_set("notify-keyspace-events", "KEA")
    sub = shared.client().pubsub()
    try:
        sub.psubscribe("__keyevent@0__:*")
        assert sub.get_message(timeout=1)["type"] == "psubscribe"
        rl(r, "RL.CHECK", "ntf", future(r), 5, 100000)
        r.set("ntf:c", 3)
        rl(r, "RL.LOCKCOUNT", "ntf:l", "ntf:c", 100000, 3, 100000)  # trips: SET lock, DEL counter
        r.set("ntf:end", 1)
        events = []
        for _ in range(50):
            m = sub.get_message(timeout=1)
            if m is None:
                break
            events.append((m["channel"].split(b":")[-1], m["data"]))
            if m["data"] == b"ntf:end":
                break
        for want in [(b"zadd", b"ntf"), (b"expire", b"ntf"), (b"set", b"ntf:l"), (b"del", b"ntf:c")]:
            assert want in events, f"{want} missing from {events}"
    finally:
        sub.close()


# ===========================================================================
# Attacks that held up
# ===========================================================================

def test_rejections_and_errors_write_nothing_dump_and_expiry(r):
    t = future(r)
    r.zadd("f", {"uuid-like": t - 10, "123": t + 5, "frac": t - 0.5})
    r.pexpireat("f", t + 10**6)
    r.set("d", -3)
    r.set("l", "lk", px=10**7)
    r.zadd("zinf", {"a": float("-inf"), "b": 1})
    r.zadd("zbig", {"a": 1e300})
    r.rpush("list", "x")
    dumps = lambda: {k: (r.dump(k), r.execute_command("PEXPIRETIME", k)) for k in r.keys()}  # noqa: E731
    before = dumps()
    calls = [
        ("RL.CHECK", "f", t, 3, 1000),                      # rejected
        ("RL.CHECK", "f", t, 10, 1000, 2, 50),              # rejected by rule 2
        ("RL.CHECK", "f", t, 10, 1000, "COST", 9),          # rejected by cost
        ("RL.PEEK", "f", t, 100, 1000),                     # admitted, but PEEK
        ("RL.CHECK", "zinf", t, 1, 1000),                   # stored -inf
        ("RL.CHECK", "zbig", t, 1, 1000),                   # stored 1e300
        ("RL.CHECK", "list", t, 1, 1000),                   # WRONGTYPE
        ("RL.CHECK", "f", t, 1, 1000, "COST", 2),           # cost above count
        ("RL.CHECK", "f", "-0", 1, 1000),
        ("RL.CHECK", "f", t, 1, 1000, "COST", 1, "COST", 1),
        ("RL.DAYHOUR", "d", "l", 5, 5, 1000, 1000),         # hour not an integer
        ("RL.DAYHOUR", "d", "d", 5, 5, 1000, 1000),
        ("RL.DAYHOUR", "d", "x", 0, 5, 1000, 1000),         # refused (limit 0)
        ("RL.LOCKCOUNT", "l", "d", 1000, 5, 1000),          # locked
        ("RL.LOCKCOUNT", "x", "list", 1000, 5, 1000),       # WRONGTYPE
    ]
    for call in calls:
        try:
            reply = rl(r, *call)
            assert reply[0] == 1 or call[0] == "RL.PEEK" or call[0] == "RL.DAYHOUR", (call, reply)
        except redis.ResponseError:
            pass
        assert dumps() == before, call


def test_multi_exec_and_lua_give_the_plain_replies_and_replicate(r):
    """Same sequence three ways (plain, MULTI/EXEC, EVAL) on three keys: same replies, same members."""
    t = future(r)
    seq = [(t, 1), (t, 2), (t, 1), (t + 400, 1), (t + 1000, 3), (t + 1000, 1)]
    out = {}
    for mode in ("plain", "multi", "lua"):
        key = f"m:{mode}"
        replies = []
        for now, cost in seq:
            args = ("RL.CHECK", key, now, 3, 1000, 5, 5000, "COST", cost)
            if mode == "plain":
                replies.append(rl(r, *args))
            elif mode == "multi":
                p = r.pipeline(transaction=True)
                p.execute_command(*args)
                p.execute_command("RL.PEEK", key, now, 3, 1000)
                replies.append(p.execute()[0])
            else:
                replies.append(r.eval("return redis.call(unpack(ARGV))", 0, *args))
        # The expiry: each key on its own grid (SPEC "Expiries on a grid"),
        # so it is compared with the grid model rather than across keys.
        expiry = None
        for (now, _), reply in zip(seq, replies):
            if reply[0] == 0 and (expiry is None or expiry < now + 5000):
                expiry = grid_at(key, 5000, now + 5000)
        assert r.execute_command("PEXPIRETIME", key) == expiry, mode
        out[mode] = (replies, [s for _, s in r.zrange(key, 0, -1, withscores=True)])
    assert out["plain"] == out["multi"] == out["lua"]
    assert out["plain"][0][0] == [0, 1, 3, 2, -1, 1000]
    assert out["plain"][0][2] == [1, 1, 3, 0, 1000, 1000]


def test_ends_of_the_time_range(r):
    base = server_ms(r)
    # now = 2^53-1 and window = 2^53-1: exact integers, expiry 2^54-2.
    assert rl(r, "RL.CHECK", "top", MAX, 1, MAX) == [0, 1, 1, 0, -1, MAX]
    assert r.execute_command("PEXPIRETIME", "top") == grid_at("top", MAX, 2 * MAX)
    assert rl(r, "RL.CHECK", "top", MAX, 1, MAX) == [1, 1, 1, 0, MAX, MAX]
    assert rl(r, "RL.PEEK", "top", 0, 1, MAX) == [1, 1, 1, 0, 2 * MAX, 2 * MAX]
    # now = 0: expiry from the server clock, never in the past.
    assert rl(r, "RL.CHECK", "zero", 0, 1, MAX) == [0, 1, 1, 0, -1, MAX]
    assert r.execute_command("PEXPIRETIME", "zero") >= base + MAX
    assert rl(r, "RL.CHECK", "one", 0, 1, 1) == [0, 1, 1, 0, -1, 1]
    assert r.execute_command("PEXPIRETIME", "one") >= base + 1
    assert r.zrange("top", 0, -1, withscores=True)[0][1] == float(MAX)


@pytest.mark.parametrize("score, ok", [
    (MAX, True), (-MAX, True), (0.5, True), (MAX + 1, False), (-(MAX + 1), False),
    (1e300, False), (float("inf"), False), (float("-inf"), False),
])
def test_stored_score_bounds(r, score, ok):
    r.zadd("sb", {"foreign": score})
    before = keyspace(r)
    for cmd in ("RL.PEEK", "RL.CHECK"):
        if ok:
            assert len(rl(r, cmd, "sb", 0, 5, 10)) == 6
        else:
            with pytest.raises(redis.ResponseError, match="not finite or outside"):
                rl(r, cmd, "sb", 0, 5, 10)
            assert keyspace(r) == before


def test_cost_10000_repeatedly_gives_unique_members_scored_now(r):
    t = future(r)
    for _ in range(3):
        assert rl(r, "RL.CHECK", "big", t, MAX, 10**8, "COST", 10000)[0] == 0
    members = r.zrange("big", 0, -1, withscores=True)
    assert len(members) == r.zcard("big") == 30000
    assert len({m for m, _ in members}) == 30000
    assert all(NAME.fullmatch(m) for m, _ in members)
    assert {s for _, s in members} == {float(t)}
    assert rl(r, "RL.CHECK", "big", t + 1, 30005, 10**8, "COST", 10000) == [1, 1, 30005, 5, 10**8 - 1, 10**8 - 1]
    assert r.zcard("big") == 30000


def _decode(name: bytes) -> int:
    letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    alnum = b"0123456789" + letters
    n = letters.index(name[0])
    for ch in name[1:]:
        n = n * 62 + alnum.index(ch)
    return n


def _encode(n: int) -> bytes:
    letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    alnum = b"0123456789" + letters
    n %= 52 * 62**7
    tail = []
    for _ in range(7):
        tail.append(alnum[n % 62])
        n //= 62
    return bytes([letters[n % 52]]) + bytes(reversed(tail))


def test_name_clash_takes_a_fresh_name_and_never_moves_a_score(r):
    t = future(r)
    rl(r, "RL.CHECK", "clash", t, 100, 1000)
    last = r.zrange("clash", 0, 0)[0]
    assert _encode(_decode(last)) == last
    upcoming = [_encode(_decode(last) + i) for i in range(1, 6)]
    r.zadd("clash", {m: t - 500 for m in upcoming})  # the names the counter gives next
    assert rl(r, "RL.CHECK", "clash", t, 100, 1000, "COST", 3)[0] == 0
    scores = dict(r.zrange("clash", 0, -1, withscores=True))
    assert len(scores) == 1 + 5 + 3
    assert all(scores[m] == t - 500 for m in upcoming)
    assert sum(1 for s in scores.values() if s == t) == 4


def test_listpack_and_skiplist_answer_alike(r):
    """The same history on a listpack set, a skiplist set (forced) and across the 128 boundary."""
    t = future(r)
    results = {}
    for variant, entries in (("lp", "128"), ("sk", "0")):
        r.config_set("zset-max-listpack-entries", entries)
        key = f"enc:{variant}"
        replies = []
        for i in range(140):
            now = t + 7 * i
            replies.append(rl(r, "RL.CHECK", key, now, 130, 100000, 20, 50, "COST", 1 + i % 2))
            replies.append(rl(r, "RL.PEEK", key, now, 3, 10, 200, 1000))
        results[variant] = (replies, [s for _, s in r.zrange(key, 0, -1, withscores=True)])
    r.config_set("zset-max-listpack-entries", "128")
    assert r.object("encoding", "enc:sk") == b"skiplist"
    assert results["lp"] == results["sk"]


def test_oom_refusals_are_counted_as_errors_and_write_nothing():
    """SPEC "Memory": the module refuses by itself above maxmemory (no
    `deny-oom`), so INFO counts each refusal as a call and an error
    (earlier revisions let Redis refuse, uncounted)."""
    with Server() as s:
        c = s.client()
        c.set("filler", "x" * (2 * 1024 * 1024))
        c.config_set("maxmemory-policy", "noeviction")
        c.config_set("maxmemory", "1mb")
        before = keyspace(c)
        info = c.info("ratelimit")
        redis70 = c.info("server").get("redis_version", "").startswith("7.0") and \
            "valkey_version" not in c.info("server")
        refused = {"check": 0, "dayhour": 0, "lockcount": 0}
        for prefix, call in [("check", ("RL.CHECK", "k", "*", 1, 1000)),
                             ("dayhour", ("RL.DAYHOUR", "d", "h", 1, 1, 1000, 1000)),
                             ("lockcount", ("RL.LOCKCOUNT", "l", "c", 1000, 1, 1000))]:
            with pytest.raises(redis.exceptions.OutOfMemoryError):
                rl(c, *call)
            p = c.pipeline(transaction=True)
            p.execute_command(*call)
            with pytest.raises(redis.ResponseError):
                p.execute()
            with pytest.raises(redis.ResponseError, match="maxmemory"):
                c.eval("return redis.call(unpack(ARGV))", 0, *call)
            # Redis 7.0 refuses to queue in MULTI above maxmemory itself.
            refused[prefix] = 2 if redis70 else 3
        after = c.info("ratelimit")
        for prefix, n in refused.items():
            assert after[f"ratelimit_{prefix}_calls"] == info[f"ratelimit_{prefix}_calls"] + n
            assert after[f"ratelimit_{prefix}_errors"] == info[f"ratelimit_{prefix}_errors"] + n
        assert keyspace(c) == before
        assert rl(c, "RL.PEEK", "k", "*", 1, 1000)[0] == 0  # read-only still runs
        c.close()


def test_no_memory_growth_across_rejected_and_failing_calls(r):
    t = future(r)
    r.zadd("mem:z", {f"m{i}": t - i for i in range(200)})
    r.rpush("mem:list", "x")
    r.set("mem:bad", "abc")
    r.set("mem:lock", "1")

    def batch(n):
        p = r.pipeline(transaction=False)
        for _ in range(n):
            p.execute_command("RL.CHECK", "mem:z", t, 1, 1000, 5, 100000, 3, 500)
            p.execute_command("RL.PEEK", "mem:z", t, 1, 1000)
            p.execute_command("RL.CHECK", "mem:list", t, 1, 1000)
            p.execute_command("RL.CHECK", b"\xff" * 200, t, 0, 1000)
            p.execute_command("RL.LOCKCOUNT", "mem:lock", "mem:x", 1000, 3, 1000)
            p.execute_command("RL.LOCKCOUNT", "mem:l2", "mem:bad", 1000, 3, 1000)
            p.execute_command("RL.DAYHOUR", "mem:x", "mem:y", 0, 0, 1000, 1000)
        p.execute(raise_on_error=False)

    batch(1000)
    before = keyspace(r)
    m0 = r.info("memory")["used_memory"]
    for _ in range(4):
        batch(2500)  # 70k calls in all
    # On the Functions library used_memory also holds the Lua VM's heap,
    # collected in steps: a looser bound (a leak of 8 bytes a call is 560 KB).
    assert r.info("memory")["used_memory"] - m0 < (256 if FUNCTIONS else 64) * 1024
    assert keyspace(r) == before


def test_resp3_replies(shared, r):
    c = shared.client(protocol=3)
    try:
        assert c.execute_command("RL.CHECK", "r3", "*", 2, 1000) == [0, 1, 2, 1, -1, 1000]
        assert c.execute_command("RL.DAYHOUR", "r3:d", "r3:h", 2, 2, 1000, 1000) == [1, 1]
        assert c.execute_command("RL.LOCKCOUNT", "r3:l", "r3:c", 1000, 0, 1000) == [1, 0, 1000]
        with pytest.raises(redis.ResponseError, match="invalid count '0' for rule 1"):
            c.execute_command("RL.CHECK", "r3", "*", 0, 1000)
    finally:
        c.close()


def test_huge_binary_keys_and_error_lines(r):
    big = b"\x00\xff\r\n" * 262144  # 1 MB
    assert rl(r, "RL.CHECK", big, "*", 1, 100000)[0] == 0
    assert rl(r, "RL.CHECK", big, "*", 1, 100000)[0] == 1
    assert rl(r, "RL.DAYHOUR", big + b"d", big + b"h", 1, 1, 100000, 1000) == [1, 1]
    with pytest.raises(redis.ResponseError) as e:
        rl(r, "RL.DAYHOUR", big, big, 1, 1, 100000, 1000)
    assert "must be different keys" in str(e.value) and len(str(e.value)) < 300
    with pytest.raises(redis.ResponseError) as e:
        rl(r, "RL.CHECK", big, big, 1, 100000)
    assert "invalid now" in str(e.value) and len(str(e.value)) < 300


def test_10k_rule_pairs_in_one_call(r):
    """SPEC "Bounded calls": at most 64 rules, refused quickly with nothing
    written; 64 rules work."""
    args = []
    for i in range(10000):
        args += [10 + i, 1000 + i]
    started = time.monotonic()
    for cmd in ("RL.CHECK", "RL.PEEK"):
        with pytest.raises(redis.ResponseError, match="too many rules: 10000 given, at most 64 per call"):
            rl(r, cmd, "many", "*", *args)
    assert time.monotonic() - started < 2
    assert not r.exists("many")
    assert rl(r, "RL.CHECK", "many", "*", *args[:128]) == [0, 1, 10, 9, -1, 1000]
    assert rl(r, "RL.PEEK", "many", "*", *args[:128])[:4] == [0, 1, 10, 8]


def test_module_unload_reload_swapdb_debug_reload_and_pause(shared, r):
    t = future(r)
    rl(r, "RL.CHECK", "u", t, 1, 100000)
    assert r.execute_command("MODULE", "UNLOAD", "ratelimit") == b"OK"
    try:
        assert r.zcard("u") == 1  # plain sorted set: the keys outlive the module
        with pytest.raises(redis.ResponseError, match="unknown command"):
            rl(r, "RL.CHECK", "u", t, 1, 100000)
    finally:
        r.execute_command("MODULE", "LOAD", MODULE)
    assert rl(r, "RL.CHECK", "u", t, 1, 100000)[0] == 1
    r.swapdb(0, 1)
    assert rl(r, "RL.CHECK", "u", t, 1, 100000)[0] == 0
    r.swapdb(0, 1)
    r.execute_command("DEBUG", "RELOAD")
    assert rl(r, "RL.CHECK", "u", t, 1, 100000)[0] == 1
    # The pause starts after `started` and lasts 1 s, so whatever the load a
    # command that waited for it ends about 1 s after `started` or later (0.9:
    # Redis keeps the pause's end in whole ms), and one that ends sooner was
    # not paused (was: 150 ms either side of a 200 ms pause timed from its
    # reply, which a loaded machine could break both ways).
    started = time.monotonic()
    r.execute_command("CLIENT", "PAUSE", 1000, "WRITE")
    assert rl(r, "RL.PEEK", "u", t, 1, 100000)[0] == 1  # read-only: not paused
    assert time.monotonic() - started < 0.9
    assert rl(r, "RL.CHECK", "p", t, 1, 100000)[0] == 0  # waited for the pause
    assert time.monotonic() - started >= 0.9


def test_replica_and_aof_match_after_transactions_scripts_and_extremes():
    with Server(args=PRIMARY_ARGS + ["--appendonly", "yes", "--enable-debug-command", "yes"]) as p:
        replica = start_replica(p)
        try:
            c = p.client()
            t = future(c)
            rl(c, "RL.CHECK", "x", "*", 5, 100000, "COST", 3)
            rl(c, "RL.CHECK", "x", t, 100, 10, 5, 1000)         # trims the three, adds one
            rl(c, "RL.CHECK", "top", MAX, 2, MAX)
            rl(c, "RL.CHECK", "top", 0, 3, MAX)
            c.zadd("frac", {"f": t - 1000.5, "g": t - 10})
            rl(c, "RL.CHECK", "frac", t, 5, 100)                # trims the fractional member
            pipe = c.pipeline(transaction=True)
            pipe.execute_command("RL.CHECK", "m", "*", 2, 100000)
            pipe.execute_command("RL.DAYHOUR", "{u}d", "{u}h", 5, 5, 100000, 10000)
            pipe.execute_command("RL.LOCKCOUNT", "{u}l", "{u}c", 100000, 0, 100000)
            pipe.execute()
            c.eval("redis.call('SELECT', 4); redis.call('RL.CHECK', 'db4', ARGV[1], 1, 100000);"
                   "redis.call('SELECT', 0); return redis.call('RL.CHECK', 'lua', '*', 3, 100000, 'COST', 2)",
                   0, t)
            c.set("neg", -4)
            rl(c, "RL.DAYHOUR", "neg", "neg:h", 5, 5, 100000, 100000)
            wait_in_sync(p, replica)
            for db in (0, 4):
                a = keyspace(p.client(db=db))
                assert a == keyspace(replica.client(db=db)), db
            before = keyspace(c)
            c.execute_command("DEBUG", "LOADAOF")
            assert keyspace(c) == before
            assert before[b"top"][2] == grid_at("top", MAX, 2 * MAX)
            assert b"f" not in [m for m, _ in before[b"frac"][1]]
            assert len(before[b"x"][1]) == 1
            c.close()
        finally:
            replica.stop()
