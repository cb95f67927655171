"""In-place counters replicate exactly, RL.CHECK's counting paths on adversarial score layouts, keyspace events like the native commands'.

Attacks on three recent changes:

1. RL.DAYHOUR / RL.LOCKCOUNT write counters in place (StringTruncate +
   StringDMA) and replicate `INCR key` (existing key with a TTL and a value
   >= 0) or `SET key value PXAT at`. Replicas with and without the module and
   AOF / RDB reloads must equal the primary (values and PEXPIRETIME) after
   workloads mixing counters written by SET/INCR/APPEND (int, embstr, raw,
   shared integers), negative counters, counters without TTL, values near
   2^53-1, keys expiring between calls, lock trips, `SET ... KEEPTTL`,
   DEBUG RELOAD, and allkeys-lru eviction; GET always returns the plain
   decimal value.
2. RL.CHECK counts a window from the extremes, by stepping at most 24
   members from the nearer end, or by ZCOUNT (retry-after: stepping or
   ZRANGE). Adversarial score layouts are compared with the shared SPEC
   reference (`spec_reply`, exact at +-(2^53-1); see
   `test_shared_reference_is_exact_at_2_53`).
3. Keyspace notifications: an admitted call fires the native commands'
   events, in the order the native commands would; a replica without the
   module, applying the replicated commands, fires the same ones. Rejections
   and errors fire none.

Everything here held up against the module as built; the tests document it.
Randomised tests print their seed; RL_SEED replays one.
"""

from __future__ import annotations

import math
import os
import random
import time

import pytest
import redis

from replay_workload import grid_at
from servers import FUNCTIONS, PRIMARY_ARGS, Server, keyspace, start_replica, wait_in_sync

MAX = 2**53 - 1
SEED = int(os.environ.get("RL_SEED", random.SystemRandom().randrange(2**32)))


# The shared SPEC reference computes times in integers and compares scores
# exactly (Python compares floats, ints and Fractions exactly), so it is exact
# at +-(2^53-1) too; `test_shared_reference_is_exact_at_2_53` pins that.
from test_seed_interop import spec_reply as exact_reply  # noqa: E402


def decimal_ok(v) -> bool:
    return v is None or v == str(int(v)).encode()


def assert_same_keys(a: dict, b: dict, what: str) -> None:
    """Keyspace snapshots taken a moment apart are equal, except that a key
    whose (absolute, shared) expiry has passed by now may be missing from
    one of them. A key present in both must be identical."""
    late = int(time.time() * 1000) + 500
    diff = []
    for k in set(a) | set(b):
        if a.get(k) == b.get(k):
            continue
        present = a.get(k) or b.get(k)
        if (k in a) != (k in b) and present[2] != -1 and present[2] <= late:
            continue  # expired between the snapshots
        diff.append((k, a.get(k), b.get(k)))
    assert not diff, f"{what}: {diff[:3]}"


@pytest.fixture
def trio():
    """A primary (module, AOF, DEBUG allowed) with a module replica and a plain replica."""
    p = Server(module=True, args=PRIMARY_ARGS + ["--appendonly", "yes", "--appendfsync", "no",
                                                 "--enable-debug-command", "yes"]).start()
    reps = []
    try:
        reps.append(start_replica(p, module=True))
        reps.append(start_replica(p, module=False))
        yield p, reps
    finally:
        for s in reps:
            s.stop()
        p.stop()


def assert_copies_equal(p, reps, what):
    c = p.client()
    wait_in_sync(p, *reps)
    ks = keyspace(c)
    for rep in reps:
        assert_same_keys(ks, keyspace(rep.client()), f"{what}: replica :{rep.port} (module={rep.module})")
    c.execute_command("DEBUG", "LOADAOF")
    assert_same_keys(ks, keyspace(c), f"{what}: AOF reload")
    c.execute_command("DEBUG", "RELOAD")
    assert_same_keys(ks, keyspace(c), f"{what}: RDB reload")
    return ks


# ===========================================================================
# 1. In-place counters
# ===========================================================================

def test_counter_encodings_and_shrinking_values_replicate_exactly(trio):
    p, reps = trio
    c = p.client()
    c.set("{u}:shared", 5, px=100_000)              # shared integer, int encoding
    c.set("{u}:int", 12345678901, px=100_000)       # int encoding, not shared
    c.set("{u}:neg", -10, px=100_000)               # "-10" -> "1" (shrinks)
    c.set("{u}:negmax", -MAX, px=100_000)           # 17 chars -> "1"
    c.set("{u}:nottl", 7)                           # gets the TTL, SET ... PXAT
    c.set("{u}:big", MAX - 1, px=100_000)           # -> 2^53-1 exactly
    c.set("{u}:embstr", "10")                       # embstr-looking, no TTL
    c.set("{u}:raw", "9")
    c.append("{u}:raw", "9")                        # raw "99" with spare room
    c.pexpire("{u}:raw", 100_000)
    c.incr("{u}:incr")                              # INCR-created, no TTL
    want_enc = {b"{u}:shared": b"int", b"{u}:int": b"int", b"{u}:raw": b"raw"}
    for k, e in want_enc.items():
        assert c.object("encoding", k) == e
    exp_before = {k: c.execute_command("PEXPIRETIME", k) for k in [b"{u}:shared", b"{u}:int", b"{u}:neg", b"{u}:raw"]}

    assert c.execute_command("RL.DAYHOUR", "{u}:shared", "{u}:int", 100, MAX, 1000, 1000) == [6, 12345678902]
    assert c.execute_command("RL.DAYHOUR", "{u}:neg", "{u}:nottl", 100, 100, 50_000, 60_000) == [1, 8]
    assert c.execute_command("RL.DAYHOUR", "{u}:big", "{u}:embstr", MAX, MAX, 5000, 5000) == [MAX, 11]
    assert c.execute_command("RL.DAYHOUR", "{u}:big", "{u}:embstr", MAX, MAX, 5000, 5000) == [MAX + 1, 11]  # refused
    assert c.execute_command("RL.DAYHOUR", "{u}:negmax", "{u}:raw", 100, 100, 5000, 5000) == [1, 100]
    assert c.execute_command("RL.LOCKCOUNT", "{u}:lock", "{u}:incr", 60_000, 3, 60_000)[:2] == [0, 2]
    c.set("{u}:shared", 3, keepttl=True)            # another client rewrites it
    assert c.execute_command("RL.DAYHOUR", "{u}:shared", "{u}:int", 100, MAX, 1000, 1000) == [4, 12345678903]

    want = {b"{u}:shared": b"4", b"{u}:int": b"12345678903", b"{u}:neg": b"1", b"{u}:negmax": b"1",
            b"{u}:nottl": b"8", b"{u}:big": str(MAX).encode(), b"{u}:embstr": b"11", b"{u}:raw": b"100",
            b"{u}:incr": b"2"}
    for k, v in want.items():
        assert c.get(k) == v, k
        assert c.strlen(k) == len(v), k
    for k, at in exp_before.items():  # an existing TTL is kept (also by the negative -> 1 SET)
        assert c.execute_command("PEXPIRETIME", k) == at, k
    for k in [b"{u}:nottl", b"{u}:embstr", b"{u}:incr"]:
        assert c.pttl(k) > 0, k
    assert_copies_equal(p, reps, "encodings")


def test_counter_workload_with_expiries_keepttl_and_reloads_replicates(trio):
    """Random mix of module calls and plain writes on a handful of counters;
    every module reply is checked against GET/PTTL taken just before it."""
    p, reps = trio
    c = p.client()
    rng = random.Random(SEED)
    keys = [f"{{t}}k{i}" for i in range(6)]
    values = [0, 1, 5, 9999, 10000, -1, -10, -9999, 12, 99, MAX - 1, MAX - 2, 123456789, "007", "x"]
    for step in range(500):
        k, k2 = rng.sample(keys, 2)
        op = rng.random()
        msg = f"seed {SEED} step {step}"
        try:
            if op < 0.12:
                c.set(k, rng.choice(values), px=rng.choice([None, None, 5, 100_000]))
            elif op < 0.17:
                c.set(k, rng.choice(values), keepttl=True)
            elif op < 0.22:
                c.incrby(k, rng.choice([1, -1, -20, 5]))
            elif op < 0.26:
                c.pexpire(k, rng.choice([5, 100_000]))
            elif op < 0.28:
                c.persist(k)
            elif op < 0.30:
                c.append(k, rng.choice(["1", "0"]))
            elif op < 0.65:
                pipe = c.pipeline(transaction=True)  # value and TTL read atomically
                for x in (k, k2):
                    pipe.get(x)
                    pipe.pttl(x)
                got = pipe.execute()
                before = [(got[0], got[1]), (got[2], got[3])]
                dl, hl = rng.choice([0, 1, 3, 10, MAX]), rng.choice([0, 1, 3, 10, MAX])
                windows = (rng.choice([30, 100_000]), rng.choice([30, 100_000]))
                res = c.execute_command("RL.DAYHOUR", k, k2, dl, hl, *windows)
                after = [c.get(k), c.get(k2)]
                # A counter this call creates lives `window` ms: on a loaded
                # machine 30 ms can pass before the GET (seen at load 30), so
                # such a counter may read back as gone. The reply is checked
                # exactly either way.
                short_lived = [pt == -2 and w == 30 for (_, pt), w in zip(before, windows)]
                assert all(decimal_ok(v) for v in after), msg
                if all(pt == -1 or pt > 1000 or (pt == -2 and v is None) for v, pt in before):  # nothing expired mid-way
                    d, h = (max(0, int(v)) if v is not None else 0 for v, _ in before)
                    if d < dl and h < hl:
                        assert res == [d + 1, h + 1], msg
                        assert all(a == want or (a is None and gone_ok) for a, want, gone_ok in
                                   zip(after, [str(d + 1).encode(), str(h + 1).encode()], short_lived)), msg
                    else:
                        assert res == [d + (d >= dl), h + (h >= hl)], f"{msg} {k} {k2} {before} {dl} {hl} {after}"
                        assert after == [v for v, _ in before], msg
            else:
                res = c.execute_command("RL.LOCKCOUNT", k, k2, rng.choice([30, 100_000]), rng.choice([0, 1, 2, 5]),
                                        rng.choice([30, 100_000]))
                if res[0] == 0:
                    got = c.get(k2)
                    assert got is None or got == str(res[1]).encode(), msg
        except redis.ResponseError as e:
            assert "not an integer" in str(e) or "WRONGTYPE" in str(e) or "out of range" in str(e), f"{msg}: {e}"
        if step % 100 == 99:
            c.execute_command("DEBUG", "RELOAD")
        if rng.random() < 0.02:
            time.sleep(0.01)
    assert_copies_equal(p, reps, f"seed {SEED}")


def test_counters_under_allkeys_lru_eviction_replicate():
    p = Server(module=True, args=PRIMARY_ARGS + ["--maxmemory-policy", "allkeys-lru", "--lazyfree-lazy-eviction", "yes",
                                  "--lazyfree-lazy-server-del", "yes"]).start()
    reps = []
    try:
        reps = [start_replica(p, module=True), start_replica(p, module=False)]
        c = p.client()
        rng = random.Random(SEED)
        c.config_set("maxmemory", int(c.info("memory")["used_memory"]) + 500_000)
        calls = 0
        for i in range(1200):
            k, k2 = f"c{rng.randrange(40)}", f"c{rng.randrange(40, 80)}"
            op = rng.random()
            try:
                if op < 0.3:
                    c.set(f"fill{i}", "x" * rng.randrange(100, 2000))
                elif op < 0.4:
                    c.set(k, rng.choice([5, -3, 12345, MAX - 5, 0]), px=rng.choice([None, 100_000]))
                elif op < 0.75:
                    c.execute_command("RL.DAYHOUR", k, k2, rng.choice([10, MAX]), rng.choice([10, MAX]),
                                      100_000, 100_000)
                    calls += 1
                    assert decimal_ok(c.get(k)) and decimal_ok(c.get(k2))
                else:
                    c.execute_command("RL.LOCKCOUNT", f"L{k}", k, 100_000, rng.choice([3, MAX]), 100_000)
            except redis.ResponseError as e:
                assert "maxmemory" in str(e) or "OOM" in str(e), f"seed {SEED}: {e}"
        assert int(c.info("stats")["evicted_keys"]) > 0, "the run must actually evict"
        # (On the Functions library the Lua heap counts in used_memory too: more
        # calls meet the OOM refusal under the same maxmemory.)
        assert calls > (100 if FUNCTIONS else 200), "the module calls must mostly run, not be refused for OOM"
        c.config_set("maxmemory", 0)  # a lazy-eviction timer may still be running
        time.sleep(0.2)
        wait_in_sync(p, *reps)
        ks = keyspace(c)
        for rep in reps:
            assert_same_keys(ks, keyspace(rep.client()), f"seed {SEED}: module={rep.module}")
    finally:
        for s in reps:
            s.stop()
        p.stop()


def test_rejections_and_stored_value_errors_keep_watch_and_repl_offset():
    """A rejection reads int-encoded counters through StringDMA (which turns
    them raw, as the README says) but is no write: WATCH holds, nothing is
    replicated, the value and TTL stay."""
    with Server() as s:
        c, c2 = s.client(), s.client()
        cases = [
            ({"d": (5, 100_000), "h": (3, 100_000)}, ("RL.DAYHOUR", "d", "h", 5, 5, 1000, 1000)),
            ({"d": (12345, 100_000), "h": (99999, None)}, ("RL.DAYHOUR", "d", "h", 5, 5, 1000, 1000)),
            ({"d": ("abc", None), "h": (3, None)}, ("RL.DAYHOUR", "d", "h", 5, 5, 1000, 1000)),
            ({"l": (1, None), "h": (12345, 100_000)}, ("RL.LOCKCOUNT", "l", "h", 1000, 5, 1000)),
        ]
        for setup, cmd in cases:
            c.flushall()
            for k, (v, px) in setup.items():
                c.set(k, v, px=px)
            before = {k: (c.get(k), c.execute_command("PEXPIRETIME", k)) for k in setup}
            offset = int(c.info("replication")["master_repl_offset"])
            pipe = c2.pipeline(transaction=True)
            pipe.watch(*setup)
            pipe.multi()
            pipe.set("x", 1)
            try:
                res = c.execute_command(*cmd)
                assert res[0] > 5 or res[0] == 1, res  # refused
            except redis.ResponseError as e:
                assert "not an integer" in str(e)
            assert int(c.info("replication")["master_repl_offset"]) == offset, cmd
            assert pipe.execute() == [True], f"{cmd} aborted a WATCH"
            assert {k: (c.get(k), c.execute_command("PEXPIRETIME", k)) for k in setup} == before, cmd


def test_stored_values_read_like_incr_and_out_of_range_refused(r):
    refused = ["-0", "0x10", " 1", "1 ", "+1", "", "01", "1e3", "1\x00",
               str(MAX + 1), str(-MAX - 1)]
    for v in refused:
        r.set("d", v)
        with pytest.raises(redis.ResponseError, match="not an integer"):
            r.execute_command("RL.DAYHOUR", "d", "h", MAX, 5, 1000, 1000)
        assert r.get("d") == v.encode() and not r.exists("h")
    r.set("d", -MAX)
    assert r.execute_command("RL.DAYHOUR", "d", "h", MAX, 5, 1000, 1000) == [1, 1]
    assert r.get("d") == b"1"


# ===========================================================================
# 2. RL.CHECK / RL.PEEK counting paths on adversarial layouts
# ===========================================================================

def layout(rng, kind, n, T):
    if kind == "equal":
        sc = [T - rng.choice([0, 1, 500, 1000])] * n
    elif kind == "ends":
        a = rng.randrange(n + 1)
        sc = [T - 100_000] * a + [T - 1] * (n - a)
    elif kind == "two_extremes":
        a = rng.randrange(n + 1)
        sc = [-MAX + rng.randrange(3)] * a + [MAX - rng.randrange(3)] * (n - a)
    elif kind == "near_edge":
        sc = [T - 1000 + rng.choice([0, 1e-6, -1e-6, 0.5, -0.5, 1, -1, 2**-20]) for _ in range(n)]
    elif kind == "frac":
        sc = [T - rng.randrange(5000) + rng.choice([0.5, 0.25, 0.999, 0.001]) for _ in range(n)]
    elif kind == "extreme":
        sc = [rng.choice([-MAX, MAX, -MAX + 1, MAX - 1, 0, T]) for _ in range(n)]
    elif kind == "future":
        sc = [T + rng.randrange(-2000, 20_000) for _ in range(n)]
    else:  # skewed: dense near now, a long sparse tail
        sc = [T - rng.randrange(1000) ** 2 // 1000 if rng.random() < 0.9 else T - rng.randrange(10**6)
              for _ in range(n)]
    return [max(-MAX, min(MAX, x)) for x in sc]


KINDS = ["equal", "ends", "two_extremes", "near_edge", "frac", "extreme", "future", "skewed"]
SIZES = [1, 2, 23, 24, 25, 26, 48, 49, 50, 127, 128, 129, 257]


@pytest.mark.parametrize("listpack_entries", [128, 0])
def test_peek_matches_exact_spec_on_adversarial_layouts(r, listpack_entries):
    r.config_set("zset-max-listpack-entries", listpack_entries)
    rng = random.Random(SEED + listpack_entries)
    for trial in range(40):
        n = rng.choice(SIZES)
        T = rng.choice([10_000_000, 0, 5, MAX, MAX // 2])
        kind = KINDS[trial % len(KINDS)]
        sc = layout(rng, kind, n, T)
        key = f"z{trial}"
        r.delete(key)
        r.zadd(key, {f"m{i}": x for i, x in enumerate(sc)})
        for _ in range(15):
            t = max(0, min(MAX, T + rng.choice([0, 0, 1, -1, 999, 1000, 1001, -1000, rng.randrange(-3000, 3000)])))
            rules = [(rng.randrange(1, 2 * n + 3), rng.choice([1, 999, 1000, 1001, 5000, 100_000, MAX]))
                     for _ in range(rng.choice([1, 1, 2, 3]))]
            cost = rng.randrange(1, min(min(c for c, _ in rules), 10_000) + 1)
            got = r.execute_command("RL.PEEK", key, t, *[x for rule in rules for x in rule], "COST", cost)
            assert got == exact_reply(sc, t, rules, cost), \
                f"seed {SEED}: {kind} n={n} t={t} rules={rules} cost={cost}"


def test_check_writes_on_adversarial_layouts_replicate(trio):
    p, reps = trio
    c = p.client()
    rng = random.Random(SEED * 7)
    for trial in range(24):
        n = rng.choice([1, 23, 24, 25, 26, 127, 128, 129])
        now = int(time.time() * 1000)
        T = rng.choice([now, now + 10**6, now - 10**6, MAX - 10, 10**7])
        sc = layout(rng, KINDS[trial % len(KINDS)], n, T)
        key = f"w{trial}"
        c.zadd(key, {f"m{i}": x for i, x in enumerate(sc)})
        for _ in range(4):
            t = max(0, min(MAX, T + rng.choice([0, 1, -1, 500, 1000])))
            w = rng.choice([1000, 999, 1001, 3000])
            rules = [(rng.randrange(1, 3 * n + 3), w), (rng.randrange(1, 3 * n + 3), rng.choice([w, 2 * w, 500]))]
            cost = rng.randrange(1, min(c_ for c_, _ in rules) + 1)
            old = [s for _, s in c.zrange(key, 0, -1, withscores=True)]
            expiry_before = c.execute_command("PEXPIRETIME", key)
            t0 = int(time.time() * 1000)
            got = c.execute_command("RL.CHECK", key, t, *[x for rule in rules for x in rule], "COST", cost)
            t1 = int(time.time() * 1000)
            msg = f"seed {SEED}: key {key} t={t} rules={rules} cost={cost}"
            assert got == exact_reply(old, t, rules, cost), msg
            new = [s for _, s in c.zrange(key, 0, -1, withscores=True)]
            if got[0] == 1:
                assert new == old, msg
                continue
            mw = max(w_ for _, w_ in rules)
            newest = max([math.ceil(s) for s in old] + [t])
            low, high = max(newest, t0) + mw, max(newest, t1) + mw  # X, read between t0 and t1
            if expiry_before >= high:
                # SPEC: a key expiring at or after X is held (a longer rule
                # set, or an earlier call in the same grid step): nothing
                # trimmed, the expiry stays.
                assert sorted(new) == sorted(old + [float(t)] * cost), msg
                assert c.execute_command("PEXPIRETIME", key) == expiry_before, msg
            elif expiry_before < low:
                # Otherwise trimmed, and the expiry is X on the key's grid.
                assert sorted(new) == sorted([s for s in old if s > t - mw] + [float(t)] * cost), msg
                at = c.execute_command("PEXPIRETIME", key)
                assert any(at == grid_at(key, mw, x) for x in range(low, high + 1)), msg
    assert_copies_equal(p, reps, f"seed {SEED}")


def test_shared_reference_is_exact_at_2_53():
    """The shared `spec_reply` computes ceil(s) + window - t in integers (it
    once rounded s + window - t in doubles, off by one ms near 2^53): check it
    against the value worked out by hand."""
    log = [MAX - 17.0] * 3
    rules = [(3, 999)]
    assert exact_reply(log, MAX, rules) == [1, 1, 3, 0, 982, 982]


# ===========================================================================
# 3. Keyspace notifications
# ===========================================================================

def drain(sub, fence_key: bytes):
    out = []
    for _ in range(200):
        m = sub.get_message(timeout=1)
        if m is None:
            break
        if m["type"] != "pmessage":
            continue
        out.append((m["channel"], m["data"]))
        if m["channel"].endswith(b":set") and m["data"] == fence_key:
            break
    return out


def test_events_match_native_commands_on_a_plain_replica():
    """The primary's events for admitted calls equal the ones a replica
    without the module fires applying the replicated native commands."""
    p = Server(module=True, args=PRIMARY_ARGS + ["--notify-keyspace-events", "KEA"]).start()
    rep = None
    try:
        rep = start_replica(p, module=False, args=["--notify-keyspace-events", "KEA"])
        c = p.client()
        subs = []
        for s in (p, rep):
            sub = s.client().pubsub()
            sub.psubscribe("__key*@0__:*")
            assert sub.get_message(timeout=1)["type"] == "psubscribe"
            subs.append(sub)
        t = int(time.time() * 1000)
        c.set("{u}:d", 5, px=100_000)
        c.set("{u}:neg", -4, px=100_000)
        c.set("{u}:cnt", 3, px=100_000)
        c.execute_command("RL.DAYHOUR", "{u}:d", "{u}:h", 10, 10, 100_000, 100_000)    # incrby + set/expire
        c.execute_command("RL.DAYHOUR", "{u}:neg", "{u}:h", 10, 10, 100_000, 100_000)  # set/expire + incrby
        c.execute_command("RL.DAYHOUR", "{u}:d", "{u}:h", 0, 10, 100_000, 100_000)     # refused: nothing
        c.execute_command("RL.LOCKCOUNT", "{u}:l", "{u}:cnt", 100_000, 3, 100_000)    # trips: set/expire + del
        c.execute_command("RL.LOCKCOUNT", "{u}:l", "{u}:cnt", 100_000, 3, 100_000)    # locked: nothing
        c.execute_command("RL.LOCKCOUNT", "{u}:l0", "{u}:none", 100_000, 0, 100_000)  # trips, no counter: no del
        c.execute_command("RL.LOCKCOUNT", "{u}:l1", "{u}:new", 100_000, 5, 100_000)   # set/expire
        c.execute_command("RL.LOCKCOUNT", "{u}:l1", "{u}:new", 100_000, 5, 100_000)   # incrby
        c.zadd("z", {"old": t - 10_000})
        c.execute_command("RL.CHECK", "z", t, 5, 1000, "COST", 3)                       # zadd, zremrangebyscore, expire
        c.execute_command("RL.CHECK", "z", t, 5, 1000, "COST", 3)                       # rejected: nothing
        c.execute_command("RL.PEEK", "z", t, 5, 1000)                                   # nothing
        with pytest.raises(redis.ResponseError):
            c.execute_command("RL.DAYHOUR", "{u}:d", "{u}:d", 1, 1, 1, 1)
        with pytest.raises(redis.ResponseError):
            c.execute_command("RL.CHECK", "{u}:d", t, 5, 1000)                          # WRONGTYPE
        c.set("fence", 1)
        wait_in_sync(p, rep)
        got_p, got_r = drain(subs[0], b"fence"), drain(subs[1], b"fence")
        for sub in subs:
            sub.close()
        assert got_p == got_r
        events = [(ch.split(b":", 1)[1], k) for ch, k in got_p if ch.startswith(b"__keyevent")]
        assert events == [
            (b"set", b"{u}:d"), (b"expire", b"{u}:d"),
            (b"set", b"{u}:neg"), (b"expire", b"{u}:neg"),
            (b"set", b"{u}:cnt"), (b"expire", b"{u}:cnt"),
            (b"incrby", b"{u}:d"), (b"set", b"{u}:h"), (b"expire", b"{u}:h"),
            (b"set", b"{u}:neg"), (b"expire", b"{u}:neg"), (b"incrby", b"{u}:h"),
            (b"set", b"{u}:l"), (b"expire", b"{u}:l"), (b"del", b"{u}:cnt"),
            (b"set", b"{u}:l0"), (b"expire", b"{u}:l0"),
            (b"set", b"{u}:new"), (b"expire", b"{u}:new"),
            (b"incrby", b"{u}:new"),
            (b"zadd", b"z"),
            (b"zadd", b"z"), (b"zremrangebyscore", b"z"), (b"expire", b"z"),
            (b"set", b"fence"),
        ]
    finally:
        if rep is not None:
            rep.stop()
        p.stop()


def test_event_classes_are_filtered_like_native(r):
    """`E$` (string events only) gives set/incrby and no expire; `Eg` gives
    expire/del and no set; `Ez` gives zadd/zremrangebyscore only."""
    sub = r.pubsub()
    try:
        sub.psubscribe("__keyevent@0__:*")
        assert sub.get_message(timeout=1)["type"] == "psubscribe"
        t = int(time.time() * 1000)
        seen = {}
        for cfg in ["E$", "Eg", "Ez"]:
            r.config_set("notify-keyspace-events", "")
            r.flushall()
            r.set("c", 3, px=100_000)
            r.zadd("z", {"old": t - 10_000})
            r.config_set("notify-keyspace-events", cfg)
            r.execute_command("RL.DAYHOUR", "c", "h", 10, 10, 100_000, 100_000)
            r.execute_command("RL.LOCKCOUNT", "l", "c", 100_000, 4, 100_000)
            r.execute_command("RL.CHECK", "z", t, 5, 1000)
            r.config_set("notify-keyspace-events", "KEA")
            r.set("fence", 1)
            seen[cfg] = [(ch.split(b":", 1)[1], k) for ch, k in drain(sub, b"fence")][:-1]
        assert seen["E$"] == [(b"incrby", b"c"), (b"set", b"h"), (b"set", b"l")]
        assert seen["Eg"] == [(b"expire", b"h"), (b"expire", b"l"), (b"del", b"c"), (b"expire", b"z")]
        assert seen["Ez"] == [(b"zadd", b"z"), (b"zremrangebyscore", b"z")]
    finally:
        sub.close()
