"""ACL categories (SPEC "Access control"): where the server has
RedisModule_SetCommandACLCategories (Redis 7.2+, Valkey 8+), the writing RL
commands are in @write, the peeks in @read, each in its data type's category
and all in @ratelimit, so `-@write` refuses every writing RL command with
nothing written. Redis 7.0 has no such API: there the gap is tested as such,
with the by-name rule the README gives to close it."""

from __future__ import annotations

import pytest
import redis

from replay_workload import H, rl
from servers import Server, keyspace

D = 86_400_000
NOPERM = redis.exceptions.NoPermissionError

# Every RL command: (name, categories where the server has them, a call).
COMMANDS = [
    ("rl.check", {"@write", "@sortedset", "@slow", "@ratelimit"}, ("RL.CHECK", "k:z", "*", 5, 1000)),
    ("rl.peek", {"@read", "@sortedset", "@slow", "@ratelimit"}, ("RL.PEEK", "k:z", "*", 5, 1000)),
    ("rl.dayhour", {"@write", "@string", "@fast", "@ratelimit"}, ("RL.DAYHOUR", "k:d", "k:h", 10, 10, D, H)),
    ("rl.lockcount", {"@write", "@string", "@fast", "@ratelimit"}, ("RL.LOCKCOUNT", "k:l", "k:c", H, 3, H)),
    ("rl.throttle", {"@write", "@hash", "@fast", "@ratelimit"}, ("RL.THROTTLE", "k:t", "*", 5, 1, 1000)),
    ("rl.throttlepeek", {"@read", "@hash", "@fast", "@ratelimit"}, ("RL.THROTTLEPEEK", "k:t", "*", 5, 1, 1000)),
    ("rl.quota", {"@write", "@hash", "@fast", "@ratelimit"}, ("RL.QUOTA", "k:q", "*", "UTC", "DAY", 5)),
    ("rl.quotapeek", {"@read", "@hash", "@fast", "@ratelimit"}, ("RL.QUOTAPEEK", "k:q", "*", "UTC", "DAY", 5)),
    ("rl.lease", {"@write", "@sortedset", "@slow", "@ratelimit"}, ("RL.LEASE", "k:j", "*", 3, H, "TOKEN", "j1")),
    ("rl.leasepeek", {"@read", "@sortedset", "@fast", "@ratelimit"}, ("RL.LEASEPEEK", "k:j", "*", 3)),
    ("rl.release", {"@write", "@sortedset", "@slow", "@ratelimit"}, ("RL.RELEASE", "k:j", "*", "j0")),
    ("rl.renew", {"@write", "@sortedset", "@slow", "@ratelimit"}, ("RL.RENEW", "k:j", "*", H, "j0")),
    # RL.ALL and its peek: the categories of every data type they touch.
    ("rl.all", {"@write", "@sortedset", "@hash", "@slow", "@ratelimit"},
     ("RL.ALL", 2, "k:a", "k:b", "*", "CHECK", 1, 5, 1000, "THROTTLE", 2, 5, 1, 1000)),
    ("rl.allpeek", {"@read", "@sortedset", "@hash", "@slow", "@ratelimit"},
     ("RL.ALLPEEK", 2, "k:a", "k:b", "*", "CHECK", 1, 5, 1000, "THROTTLE", 2, 5, 1, 1000)),
]
WRITING = [c for c in COMMANDS if "@write" in c[1]]
PEEKS = [c for c in COMMANDS if "@read" in c[1]]
# The rule that closes the gap on Redis 7.0 (docs/guides/production.md "Security: ACL categories"): every writing
# RL command by name.
BY_NAME_RULE = ["-" + name for name, _, _ in WRITING]


def has_category_api(c: redis.Redis) -> bool:
    """Redis 7.2+ and Valkey (which reports redis_version 7.2.4) have it."""
    major, minor = (int(x) for x in c.info("server")["redis_version"].split(".")[:2])
    return (major, minor) >= (7, 2)


@pytest.fixture(scope="module")
def server():
    with Server() as s:
        yield s


@pytest.fixture
def admin(server):
    c = server.client()
    c.flushall()
    # State to leave alone, and keys of other types the attack below targets.
    assert rl(c, "RL.CHECK", "k:z", "*", 5, 1000)[0] == 0
    c.zadd("leaderboard", {"alice": 100, "bob": 50})
    c.set("balance:42", 1000)
    c.set("stock:7", 3)
    c.hset("user:42", "name", "ada")
    yield c
    c.close()


def user(server: Server, name: str, *rules: str) -> redis.Redis:
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", name, "reset", "on", "nopass", "~*", *rules)
    admin.close()
    return server.client(username=name, password="x")


def categories(c: redis.Redis, name: str) -> set[str]:
    raw = redis.Redis(host="127.0.0.1", port=c.connection_pool.connection_kwargs["port"])
    raw.response_callbacks.pop("COMMAND", None)
    try:
        (info,) = raw.execute_command("COMMAND", "INFO", name)
    finally:
        raw.close()
    return {x.decode() for x in info[6]}


def test_command_info_shows_the_categories(admin):
    for name, want, _ in COMMANDS:
        if has_category_api(admin):
            assert categories(admin, name) == want, name
        else:
            assert categories(admin, name) == set(), name  # Redis 7.0: none


def test_minus_write_refuses_every_writing_command_and_runs_the_peeks(server, admin):
    if not has_category_api(admin):
        pytest.skip("Redis 7.0 has no module ACL categories (see the 7.0 tests below)")
    u = user(server, "nowrite", "+@all", "-@write")
    before = keyspace(admin)
    for name, _, call in WRITING:
        with pytest.raises(NOPERM, match=name):
            rl(u, *call)
    assert keyspace(admin) == before
    for _, _, call in PEEKS:
        assert rl(u, *call)[:4] == rl(admin, *call)[:4]  # the times move with the clock


def test_ratelimit_category_allows_and_refuses_them_all(server, admin):
    if not has_category_api(admin):
        pytest.skip("Redis 7.0 has no module ACL categories")
    assert sorted(x.decode() for x in admin.execute_command("ACL", "CAT", "ratelimit")) == \
        sorted(name for name, _, _ in COMMANDS)
    denied = user(server, "nolimits", "+@all", "-@ratelimit")
    before = keyspace(admin)
    for name, _, call in COMMANDS:
        with pytest.raises(NOPERM, match=name):
            rl(denied, *call)
    assert keyspace(admin) == before
    assert denied.get("balance:42") == b"1000"  # the rest of +@all still holds
    only = user(server, "onlylimits", "+@ratelimit")
    for _, _, call in COMMANDS:
        assert isinstance(rl(only, *call), list)
    with pytest.raises(NOPERM):
        only.get("balance:42")


def test_redis_7_0_gap_is_real_and_the_by_name_rule_closes_it(server, admin):
    """On 7.0 a `+@all -@write` user can destroy data of other types through
    the module; `-rl.check -rl.dayhour -rl.lockcount` (docs/guides/production.md "Security: ACL categories")
    stops it. The by-name rule holds on every server."""
    attacks = [
        # Trims every member of an unrelated sorted set, gives it a 1 ms expiry.
        ("RL.CHECK", "leaderboard", "*", 9007199254740991, 1),
        # Deletes a string (the count key) and writes a lock.
        ("RL.LOCKCOUNT", "x:lock", "balance:42", 1, 0, 1),
        # Increments a foreign counter.
        ("RL.DAYHOUR", "stock:7", "y", 10, 10, D, H),
        # Writes a field into (and sets an expiry on) an unrelated hash.
        ("RL.THROTTLE", "user:42", "*", 1, 1, 1000),
    ]
    before = keyspace(admin)
    if not has_category_api(admin):
        u = user(server, "nowrite", "+@all", "-@write")
        for call in attacks:
            rl(u, *call)  # the documented limitation: it runs
        assert admin.exists("leaderboard") == 0 or admin.pttl("leaderboard") <= 1
        assert admin.get("balance:42") is None and admin.get("stock:7") == b"4"
        assert admin.hexists("user:42", "1000") and admin.pttl("user:42") > 0
        admin.zadd("leaderboard", {"alice": 100, "bob": 50})
        admin.delete("user:42")
        admin.hset("user:42", "name", "ada")
        admin.set("balance:42", 1000)
        admin.set("stock:7", 3)
        admin.delete("x:lock", "y")
        admin.persist("leaderboard")
        before = keyspace(admin)
    closed = user(server, "closed", "+@all", "-@write", *BY_NAME_RULE)
    for call in attacks:
        with pytest.raises(NOPERM):
            rl(closed, *call)
    assert keyspace(admin) == before
    for _, _, call in PEEKS:
        assert rl(closed, *call)[:4] == rl(admin, *call)[:4]
