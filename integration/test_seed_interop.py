"""Interoperability with the data the seeds' Lua scripts and client flows write.

A fleet moves from the seed scripts to the module one instance at a time, so
both write the same keys: the module must count the scripts' data the way the
scripts do, and its own writes must not disturb them.

- seed 000: the multi-rule sliding-window scripts, Approach A (UUID members)
  and Approach B (timestamp members), run with EVAL;
- seed 001: the day/hour increment-then-roll-back script;
- seed 004: the interceptor's GET lock / GET count / SET / INCR / SET lock +
  DEL count flow, done client-side.

The scripts are loaded from bench/lua/, the one copy the benchmark runs too.

Randomised tests print their seed in every failure message; set RL_SEED to
replay one (RL_SEED=123 .venv/bin/python -m pytest integration -k seed).
"""

from __future__ import annotations

import math
from pathlib import Path
import os
import random
import re
import tempfile
import uuid

import pytest

from servers import Server

MAX_SAFE = 2**53 - 1
BASE_SEED = int(os.environ.get("RL_SEED", random.SystemRandom().randrange(2**32)))

NUMERIC = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)

# --------------------------------------------------------------------------
# The seeds' scripts: one copy, in bench/lua/, shared with the benchmark
# --------------------------------------------------------------------------

LUA_DIR = Path(__file__).resolve().parent.parent / "bench" / "lua"

# seed 000, Approach A (UUID members). The seed passes the UUID and the time as
# KEYS[2] and KEYS[3]; bench/lua/ takes them as ARGV (only the key is a key):
# KEYS = key; ARGV = uuid, currentTime, count, windowMs, ...
# Returns true (limited; Redis integer 1) or false (admitted; nil).
SEED000_A = (LUA_DIR / "check_uuid.lua").read_text()

# seed 000, Approach B (timestamp members, retry on a duplicate score).
# KEYS = key; ARGV = currentTime, count, windowMs, ... (the seed: KEYS[2] = time).
SEED000_B = (LUA_DIR / "check_timestamp.lua").read_text()

# seed 001, the combined day-hour rule.
# KEYS = daykey, hourkey; ARGV = daylimit, hourlimit, dayttl, hourttl.
SEED001_DAYHOUR = (LUA_DIR / "dayhour.lua").read_text()


def flat(rules):
    return [x for rule in rules for x in rule]


def lua_a(r, key, now, rules, member=None) -> tuple[bool, str]:
    """Seed 000 Approach A; returns (admitted, the UUID it used)."""
    member = member or str(uuid.uuid4())
    limited = r.eval(SEED000_A, 1, key, member, now, *flat(rules))
    assert limited in (1, None)
    return limited is None, member


def lua_b(r, key, now, rules) -> bool:
    """Seed 000 Approach B; returns admitted."""
    limited = r.eval(SEED000_B, 1, key, now, *flat(rules))
    assert limited in (1, None)
    return limited is None


def rl(r, cmd, key, now, rules, cost=1):
    args = [cmd, key, now, *flat(rules)]
    if cost != 1:
        args += ["COST", cost]
    return r.execute_command(*args)


def server_ms(r) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def scores(r, key) -> list[float]:
    return sorted(s for _, s in r.zrange(key, 0, -1, withscores=True))


def spec_reply(log: list[float], t: int, rules, cost: int = 1) -> list[int]:
    """RL.CHECK's reply by SPEC.md, computed from the scores in the log."""
    used = [sum(1 for s in log if s > t - w) for _, w in rules]
    violated = [i for i, (c, _) in enumerate(rules) if used[i] + cost > c]
    if violated:
        best, best_retry = None, None
        for i in violated:
            c, w = rules[i]
            inside = sorted(s for s in log if s > t - w)
            # Integer arithmetic: t + w can exceed 2^53, where floats round.
            retry = math.ceil(inside[used[i] + cost - c - 1]) + w - t
            if best is None or retry > best_retry:
                best, best_retry = i, retry
        state, limited, retry = log, 1, best_retry
        remaining = max(0, rules[best][0] - used[best])
    else:
        state = log + [t] * cost
        rem = [c - used[i] - cost for i, (c, _) in enumerate(rules)]
        # Ties in remaining go to the larger reset-after, then the lower index.
        best = min(range(len(rules)), key=lambda i: (rem[i], -reset_after(state, t, rules[i][1]), i))
        limited, retry, remaining = 0, -1, rem[best]
    reset = reset_after(state, t, rules[best][1])
    return [limited, best + 1, rules[best][0], remaining, retry, reset]


def reset_after(state: list[float], t: int, w: int) -> int:
    """ms until the window of `w` ms ending at `t` holds no member of `state`."""
    inside = [s for s in state if s > t - w]
    return max(0, math.ceil(max(inside)) + w - t) if inside else 0


def module_used(r, key, t, window) -> int:
    """How many units the module counts in (t - window, ...]: a rule with the
    largest count is never violated and leaves count - used - 1."""
    reply = r.execute_command("RL.PEEK", key, t, MAX_SAFE, window)
    assert reply[0] == 0
    return MAX_SAFE - 1 - reply[3]


def assert_no_window_over_limit(admitted: list[int], rules, msg: str) -> None:
    """No window of `w` ms, (a - w, a], holds more than `count` admissions.
    Checking the windows that end at an admission covers every window."""
    admitted = sorted(admitted)
    for count, w in rules:
        lo = 0
        for hi, a in enumerate(admitted):
            while admitted[lo] <= a - w:
                lo += 1
            assert hi - lo + 1 <= count, f"{msg}: {hi - lo + 1} admitted in ({a - w}, {a}] > {count}"


def even_now(r) -> int:
    t = server_ms(r)
    return t - t % 2


# All calls below use even times and odd windows, so no member ever sits
# exactly at t - window: the one place where the seed (ZCOUNT from t - window
# inclusive) and the module (scores > t - window) count differently; that
# boundary has its own test.
SW_RULES = [(3, 999), (10, 9_999)]


# --------------------------------------------------------------------------
# Seed 000: sliding window
# --------------------------------------------------------------------------


@pytest.mark.parametrize("offset", range(3))
def test_seed_a_filled_set_is_counted_the_same(r, offset):
    seed = BASE_SEED + offset
    rng = random.Random(seed)
    print(f"seed={seed} (replay with RL_SEED={BASE_SEED})")  # shown on failure
    key = "rl:{lua-a}"
    t = even_now(r)
    model: list[int] = []  # scores a correct sliding window holds
    maxw = max(w for _, w in SW_RULES)
    for step in range(160):
        t += 2 * rng.randint(1, 200)
        msg = f"seed={seed} step={step} t={t}"
        # The Lua script fills the key...
        admitted, _ = lua_a(r, key, t, SW_RULES)
        assert admitted == (spec_reply(model, t, SW_RULES)[0] == 0), msg
        if admitted:
            model = [s for s in model + [t] if s > t - maxw]
        assert scores(r, key) == model, msg
        if step % 8:
            continue
        # ...and at a later instant the module sees what the script sees.
        probe = t + 2 * rng.randint(0, 400)
        msg += f" probe={probe}"
        for _, w in SW_RULES:
            assert module_used(r, key, probe, w) == r.zcount(key, probe - w, probe), msg
        peeked = rl(r, "RL.PEEK", key, probe, SW_RULES)
        assert peeked == spec_reply(model, probe, SW_RULES), msg
        # Same decision on two copies; the same scores afterwards.
        r.copy(key, "copy:lua", replace=True)
        r.copy(key, "copy:rl", replace=True)
        lua_admitted, _ = lua_a(r, "copy:lua", probe, SW_RULES)
        checked = rl(r, "RL.CHECK", "copy:rl", probe, SW_RULES)
        assert checked == peeked, msg
        assert lua_admitted == (checked[0] == 0), msg
        assert scores(r, "copy:lua") == scores(r, "copy:rl"), msg
        r.delete("copy:lua", "copy:rl")


@pytest.mark.parametrize("offset", range(3))
def test_seed_a_and_module_mixed_fleet_on_one_key(r, offset):
    """Instances running the Lua script and instances running RL.CHECK share
    a key: each decides as one correct sliding window would, and together they
    never admit more than the rules allow in any window."""
    seed = BASE_SEED + 100 + offset
    rng = random.Random(seed)
    print(f"seed={seed} (replay with RL_SEED={BASE_SEED})")  # shown on failure
    key = "rl:{fleet}:login"
    t = even_now(r)
    maxw = max(w for _, w in SW_RULES)
    model: list[int] = []
    owner: dict[int, str] = {}  # score -> the member that holds it (UUID) or "module"
    admitted_at: list[int] = []
    callers = {"lua": 0, "module": 0}
    for step in range(300):
        t += 2 * rng.randint(1, 150)
        caller = rng.choice(("lua", "module"))
        expected = spec_reply(model, t, SW_RULES)
        msg = f"seed={seed} step={step} t={t} caller={caller}"
        if caller == "lua":
            admitted, member = lua_a(r, key, t, SW_RULES)
        else:
            before = server_ms(r)
            expiry_before = r.pexpiretime(key)
            reply = rl(r, "RL.CHECK", key, t, SW_RULES)
            after = server_ms(r)
            assert reply == expected, msg
            admitted, member = reply[0] == 0, "module"
            if admitted:  # absolute expiry: the newest unit leaves the longest window,
                # on the key's grid (SPEC "Expiries on a grid": at most maxw/8 later)
                at = r.pexpiretime(key)
                assert max(t, before) + maxw <= at < max(t, after) + maxw + max(1, maxw // 8), msg
        assert admitted == (expected[0] == 0), msg
        if admitted:
            callers[caller] += 1
            admitted_at.append(t)
            owner[t] = member
            # The script trims on every admission; the module only when its
            # expiry moves (SPEC "Expiries on a grid").
            if caller == "lua" or r.pexpiretime(key) != expiry_before:
                model = [s for s in model + [t] if s > t - maxw]
            else:
                model = model + [t]
        # The key stays readable: ZRANGE shows who wrote what, at which time.
        zr = r.zrange(key, 0, -1, withscores=True)
        assert sorted(s for _, s in zr) == model, msg
        for name, score in zr:
            name = name.decode()
            if owner[int(score)] == "module":
                assert not UUID_RE.match(name) and not NUMERIC.match(name), msg
            else:
                assert name == owner[int(score)], msg
        assert r.pttl(key) > 0, msg
    assert_no_window_over_limit(admitted_at, SW_RULES, f"seed={seed}")
    # Both kinds of instance did admit and refuse.
    assert callers["lua"] > 5 and callers["module"] > 5, (seed, callers)
    assert len(admitted_at) < 300, seed


def test_seed_b_timestamp_members_count_and_never_collide(r):
    key = "rl:{lua-b}"
    rules = [(5, 999)]
    t0 = even_now(r)
    for dt in (0, 10, 20):
        assert lua_b(r, key, t0 + dt, rules)
    assert [m for m, _ in r.zrange(key, 0, -1, withscores=True)] == \
        [str(t0).encode(), str(t0 + 10).encode(), str(t0 + 20).encode()]
    assert module_used(r, key, t0 + 30, 999) == 3
    assert rl(r, "RL.PEEK", key, t0 + 30, rules) == [0, 1, 5, 1, -1, 999]

    # The module admits at t0+30, then the script at the same ms: the script's
    # ZADD of member "t0+30" finds no clash, so its score is not shifted.
    assert rl(r, "RL.CHECK", key, t0 + 30, rules)[0] == 0
    assert lua_b(r, key, t0 + 30, rules)
    assert r.zscore(key, str(t0 + 30)) == t0 + 30
    assert r.zcount(key, t0 + 30, t0 + 30) == 2
    # Five in the window: both refuse now.
    assert rl(r, "RL.CHECK", key, t0 + 40, rules) == [1, 1, 5, 0, 959, 989]
    assert not lua_b(r, key, t0 + 40, rules)
    assert r.zcard(key) == 5

    # Approach B's own same-ms clash shifts its second member 1 ms into the
    # future; the module counts such future-stamped members too (SPEC), so a
    # burst written by the script is never undercounted.
    other = "rl:{lua-b}:clash"
    assert lua_b(r, other, t0, [(10, 999)]) and lua_b(r, other, t0, [(10, 999)])
    assert scores(r, other) == [t0, t0 + 1]
    assert module_used(r, other, t0, 999) == 2
    assert rl(r, "RL.PEEK", other, t0, [(2, 999)])[:2] == [1, 1]


def test_seed_window_boundary_difference_is_documented(r):
    """The seed's ZCOUNT min is inclusive: it counts a unit exactly one window
    old, i.e. its window is window+1 ms wide. The module's window is (t - w, t]
    (SPEC: score > t - window), so at t0 + w the unit from t0 has left it."""
    key = "rl:{edge}"
    rules = [(1, 1000)]
    t0 = server_ms(r)
    assert lua_a(r, key, t0, rules)[0]
    assert r.zcount(key, t0 + 1000 - 1000, t0 + 1000) == 1  # what the script counts
    r.copy(key, "rl:{edge}:copy")
    assert not lua_a(r, "rl:{edge}:copy", t0 + 1000, rules)[0]  # the seed refuses
    assert rl(r, "RL.PEEK", key, t0 + 1000, rules) == [0, 1, 1, 0, -1, 1000]
    assert rl(r, "RL.CHECK", key, t0 + 999, rules) == [1, 1, 1, 0, 1, 1]
    assert rl(r, "RL.CHECK", key, t0 + 1000, rules)[0] == 0
    assert scores(r, key) == [t0 + 1000]  # the unit from t0 trimmed (<= t - max_window)


# --------------------------------------------------------------------------
# Seed 001: day/hour
# --------------------------------------------------------------------------


def value(r, key) -> int:
    v = r.get(key)
    return 0 if v is None else int(v)


@pytest.mark.parametrize("offset", range(6))
def test_seed_dayhour_script_and_module_give_the_same_replies(r, offset):
    seed = BASE_SEED + 200 + offset
    rng = random.Random(seed)
    print(f"seed={seed} (replay with RL_SEED={BASE_SEED})")  # shown on failure
    days, hours = range(2), range(3)
    sd = [f"{{s}}:day:{i}" for i in days]
    sh = [f"{{s}}:hour:{j}" for j in hours]
    md = [f"{{m}}:day:{i}" for i in days]
    mh = [f"{{m}}:hour:{j}" for j in hours]
    pairs = list(zip(sd + sh, md + mh))
    calls = admitted = refused = 0
    for step in range(220):
        op = rng.random()
        if op < 0.12:  # a counter pre-set by something else (another instance, an admin)
            s_key, m_key = rng.choice(pairs)
            v = rng.randint(0, 8)
            px = rng.choice([None, rng.randint(60_000, 86_400_000)])
            r.set(s_key, v, px=px)
            r.set(m_key, v, px=px)
            what = f"SET {v} px={px} on {s_key}/{m_key}"
        elif op < 0.2:  # a key expires
            s_key, m_key = rng.choice(pairs)
            r.delete(s_key, m_key)
            what = f"DEL {s_key}/{m_key}"
        else:
            i, j = rng.choice(days), rng.choice(hours)
            dl, hl = rng.randint(1, 6), rng.randint(1, 4)  # limits change at run time
            dttl, httl = rng.randint(60_000, 86_400_000), rng.randint(60_000, 3_600_000)
            what = f"day {i} hour {j} limits {dl}/{hl} ttls {dttl}/{httl}"
            before = {k: value(r, k) for k in (sd[i], sh[j])}
            expected = r.eval(SEED001_DAYHOUR, 2, sd[i], sh[j], dl, hl, dttl, httl)
            got = r.execute_command("RL.DAYHOUR", md[i], mh[j], dl, hl, dttl, httl)
            assert got == expected, f"seed={seed} step={step} {what} counters={before}"
            calls += 1
            if got[0] <= dl and got[1] <= hl:
                admitted += 1
                assert r.pttl(md[i]) > 0 and r.pttl(mh[j]) > 0, f"seed={seed} step={step} {what}"
            else:
                refused += 1
        for s_key, m_key in pairs:
            assert value(r, m_key) == value(r, s_key), f"seed={seed} step={step} after {what}: {m_key}"
    # Both paths taken (the replies above are what is tested). Over 3,000 seeds of this workload:
    # admitted min 7, 1st percentile 15, median 28; refused min 119. "> 10" failed 3 seeds in
    # 3,000 (one CI run: seed 1038807683 admitted 10).
    assert admitted >= 5 and refused >= 5, (seed, admitted, refused)


def test_seed_dayhour_deliberate_differences(r):
    """Limit 0 on a missing key: the seed's SET branch admits (its kill
    switch does not work for a new day/hour); RL.DAYHOUR refuses and writes
    nothing. And a negative counter (the seed's roll-back racing an expiry)
    counts as 0 and becomes 1, where the seed's INCR makes it 0."""
    assert r.eval(SEED001_DAYHOUR, 2, "{s}:d", "{s}:h", 0, 5, 60_000, 60_000) == [1, 1]
    assert value(r, "{s}:d") == 1 and value(r, "{s}:h") == 1
    assert r.execute_command("RL.DAYHOUR", "{m}:d", "{m}:h", 0, 5, 60_000, 60_000) == [1, 0]
    assert r.exists("{m}:d", "{m}:h") == 0
    # Hour limit 0 likewise.
    assert r.execute_command("RL.DAYHOUR", "{m}:d", "{m}:h", 5, 0, 60_000, 60_000) == [0, 1]
    assert r.exists("{m}:d", "{m}:h") == 0
    # Where the key exists both refuse alike.
    r.set("{m}:d", 1, px=60_000)
    assert r.eval(SEED001_DAYHOUR, 2, "{s}:d", "{s}:h", 0, 5, 60_000, 60_000) == [2, 1]
    assert r.execute_command("RL.DAYHOUR", "{m}:d", "{m}:h", 0, 5, 60_000, 60_000) == [2, 0]

    for prefix in ("{s}", "{m}"):
        r.set(f"{prefix}:nd", -1, px=60_000)
        r.set(f"{prefix}:nh", 0, px=60_000)
    assert r.eval(SEED001_DAYHOUR, 2, "{s}:nd", "{s}:nh", 3, 3, 60_000, 60_000) == [0, 1]
    assert r.execute_command("RL.DAYHOUR", "{m}:nd", "{m}:nh", 3, 3, 60_000, 60_000) == [1, 1]
    assert value(r, "{m}:nd") == 1 and value(r, "{s}:nd") == 0


# --------------------------------------------------------------------------
# Seed 004: lock after max requests
# --------------------------------------------------------------------------


def seed004_interceptor(r, lock, count_key, window, maxn, locktime) -> bool:
    """The interceptor's preHandle, client-side; True when the request passes."""
    if r.get(lock) is not None:
        return False
    count = r.get(count_key)
    if count is None:
        r.set(count_key, 1, px=window)
    elif int(count) < maxn:
        r.incr(count_key)
    else:
        r.set(lock, 1, px=locktime)
        r.delete(count_key)
        return False
    return True


@pytest.mark.parametrize("offset", range(4))
def test_seed_lockcount_matches_interceptor_flow(r, offset):
    seed = BASE_SEED + 300 + offset
    rng = random.Random(seed)
    print(f"seed={seed} (replay with RL_SEED={BASE_SEED})")  # shown on failure
    users = [f"10.0.0.{i}/api/pay" for i in range(3)]
    maxes = {u: rng.randint(1, 5) for u in users}
    window, locktime = 600_000, 300_000
    keys = {u: (f"LOCK{u}", f"COUNT{u}", f"{{rl}}:LOCK{u}", f"{{rl}}:COUNT{u}") for u in users}
    passed = blocked = 0
    for step in range(250):
        u = rng.choice(users)
        s_lock, s_count, m_lock, m_count = keys[u]
        op = rng.random()
        if op < 0.14:
            r.delete(s_lock, m_lock)
            what = "lock lifts"
        elif op < 0.20:
            r.delete(s_count, m_count)
            what = "window ends"
        elif op < 0.23:
            maxes[u] = rng.randint(1, 5)
            what = f"max -> {maxes[u]}"
        elif op < 0.26:  # another instance's count
            v = rng.randint(0, 6)
            r.set(s_count, v, px=window)
            r.set(m_count, v, px=window)
            what = f"SET count {v}"
        else:
            what = f"request max={maxes[u]}"
            seed_pass = seed004_interceptor(r, s_lock, s_count, window, maxes[u], locktime)
            reply = r.execute_command("RL.LOCKCOUNT", m_lock, m_count, window, maxes[u], locktime)
            msg = f"seed={seed} step={step} user={u} {what}"
            assert reply[0] == (0 if seed_pass else 1), msg
            if seed_pass:
                passed += 1
                assert reply[1] == value(r, s_count), msg
                assert 0 < reply[2] <= window, msg
            else:
                blocked += 1
                assert 0 < reply[2] <= locktime, msg
        for v in users:
            sl, sc, ml, mc = keys[v]
            msg = f"seed={seed} step={step} after {what} on {u}: user {v}"
            assert value(r, mc) == value(r, sc), msg
            assert r.exists(ml) == r.exists(sl), msg
    assert passed > 15 and blocked > 15, (seed, passed, blocked)


def test_seed_lockcount_max_zero_locks_at_once(r):
    """Deliberate difference: with max 0 the seed's first request takes the
    'count missing' branch and passes; RL.LOCKCOUNT applies c >= max to c = 0
    and locks at once (SPEC)."""
    assert seed004_interceptor(r, "LOCKa", "COUNTa", 60_000, 0, 30_000) is True
    reply = r.execute_command("RL.LOCKCOUNT", "{m}LOCKa", "{m}COUNTa", 60_000, 0, 30_000)
    assert reply == [1, 0, 30_000]
    assert r.get("{m}LOCKa") == b"1" and r.exists("{m}COUNTa") == 0


# --------------------------------------------------------------------------
# Member names
# --------------------------------------------------------------------------


def module_names(r, key) -> set[str]:
    return {m.decode() for m in r.zrange(key, 0, -1)}


def assert_names_safe(names, foreign=()):
    for name in names:
        assert not NUMERIC.match(name), name
        assert not UUID_RE.match(name), name
        assert 0 < len(name) <= 16, name
    assert not set(names) & set(foreign)


def test_seed_member_names_never_look_like_numbers_or_uuids(r):
    key = "rl:{names}"
    t = server_ms(r)
    rules = [(MAX_SAFE, 60_000)]
    for _ in range(3):
        assert rl(r, "RL.CHECK", key, t, rules, cost=10_000)[0] == 0
    for _ in range(300):  # many single units in one millisecond
        assert rl(r, "RL.CHECK", key, t, rules)[0] == 0
    assert r.zcard(key) == 30_300  # no two units merged
    assert r.zcount(key, t, t) == 30_300  # and every score is exactly now
    names = module_names(r, key)
    assert_names_safe(names)

    # The scripts' members at the same millisecond live alongside.
    admitted, uid = lua_a(r, key, t, rules)
    assert admitted and lua_b(r, key, t, rules)
    assert r.zscore(key, uid) == t and r.zscore(key, str(t)) == t
    assert r.zcard(key) == 30_302
    assert module_used(r, key, t, 60_000) == 30_302


def test_seed_member_names_stay_unique_across_a_restart():
    """After a restart from RDB the module's names for new units never reuse a
    name already in the set (SPEC: restarts never merge two units)."""
    with tempfile.TemporaryDirectory(prefix="rl-it-names-") as d:
        key, rules = "rl:{restart}", [(MAX_SAFE, 3_600_000)]
        with Server(directory=d) as s:
            r = s.client()
            t = server_ms(r)
            rl(r, "RL.CHECK", key, t, rules, cost=5_000)
            first = module_names(r, key)
            assert r.save()
            r.close()
        with Server(directory=d) as s:
            r = s.client()
            assert module_names(r, key) == first
            rl(r, "RL.CHECK", key, t, rules, cost=5_000)
            after = module_names(r, key)
            assert r.zcard(key) == 10_000 and r.zcount(key, t, t) == 10_000
            assert len(after - first) == 5_000
            assert_names_safe(after - first)
            r.close()
