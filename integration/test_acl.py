"""Access control: key patterns hold for every RL command and every key it
names; read-only key permissions allow RL.PEEK only; a user allowed RL.PEEK
by name can run just that. A refused call writes nothing."""

from __future__ import annotations

import pytest
import redis

from replay_workload import H, rl, server_ms
from servers import Server, keyspace

D = 86_400_000
NOPERM = redis.exceptions.NoPermissionError


@pytest.fixture(scope="module")
def acl_server():
    with Server() as s:
        admin = s.client()
        admin.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~app:*", "+@all")
        admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "%R~*", "+@all")
        admin.execute_command("ACL", "SETUSER", "appreader", "on", ">pw", "%R~app:*", "+@all")
        admin.execute_command("ACL", "SETUSER", "peeker", "on", ">pw", "~*", "+rl.peek")
        yield s


@pytest.fixture
def admin(acl_server):
    c = acl_server.client()
    c.flushall()
    t = server_ms(c)
    # Some state under each pattern, so refusals have something to leave alone.
    for prefix in ("app", "other"):
        assert rl(c, "RL.CHECK", f"{prefix}:z", t, 5, H)[0] == 0
        assert rl(c, "RL.DAYHOUR", f"{prefix}:d", f"{prefix}:h", 10, 10, D, H) == [1, 1]
        assert rl(c, "RL.LOCKCOUNT", f"{prefix}:l", f"{prefix}:c", H, 3, H) == [0, 1, H]
        assert rl(c, "RL.LEASE", f"{prefix}:jobs", t, 3, H, "TOKEN", "j1")[:4] == [0, 1, 3, 2]
    yield c
    c.close()


def user(server: Server, name: str) -> redis.Redis:
    return server.client(username=name, password="pw")


def all_calls(a: str, b: str) -> list[tuple]:
    """Every RL command, keys `a` (and `b`) in every position."""
    return [
        ("RL.CHECK", f"{a}:z", "*", 5, H),
        ("RL.PEEK", f"{a}:z", "*", 5, H),
        ("RL.DAYHOUR", f"{a}:d", f"{b}:h", 10, 10, D, H),
        ("RL.DAYHOUR", f"{b}:d", f"{a}:h", 10, 10, D, H),
        ("RL.LOCKCOUNT", f"{a}:l", f"{b}:c", H, 3, H),
        ("RL.LOCKCOUNT", f"{b}:l", f"{a}:c", H, 3, H),
        ("RL.THROTTLE", f"{a}:t", "*", 5, 1, H),
        ("RL.THROTTLEPEEK", f"{a}:t", "*", 5, 1, H),
        ("RL.QUOTA", f"{a}:q", "*", "UTC", "DAY", 5),
        ("RL.QUOTAPEEK", f"{a}:q", "*", "UTC", "DAY", 5),
        ("RL.LEASE", f"{a}:jobs", "*", 3, H, "TOKEN", "j9"),
        ("RL.LEASEPEEK", f"{a}:jobs", "*", 3),
        ("RL.RELEASE", f"{a}:jobs", "*", "j1"),
        ("RL.RENEW", f"{a}:jobs", "*", H, "j1"),
        ("RL.ALL", 2, f"{a}:z", f"{b}:t", "*", "CHECK", 1, 5, H, "THROTTLE", 2, 5, 1, H),
        ("RL.ALL", 2, f"{b}:z", f"{a}:t", "*", "CHECK", 1, 5, H, "THROTTLE", 2, 5, 1, H),
        ("RL.ALLPEEK", 2, f"{b}:jobs", f"{a}:q", "*", "LEASE", 1, 3, H, "QUOTA", 2, "UTC", "DAY", 5),
    ]


def test_key_pattern_holds_for_every_key_of_every_command(acl_server, admin):
    c = user(acl_server, "app")
    before = keyspace(admin)
    for args in all_calls("other", "app"):
        with pytest.raises(NOPERM):
            rl(c, *args)
    assert keyspace(admin) == before
    # Inside the pattern every command works.
    assert rl(c, "RL.CHECK", "app:z", "*", 5, H)[:4] == [0, 1, 5, 3]
    assert rl(c, "RL.PEEK", "app:z", "*", 5, H)[:4] == [0, 1, 5, 2]
    assert rl(c, "RL.DAYHOUR", "app:d", "app:h", 10, 10, D, H) == [2, 2]
    assert rl(c, "RL.LOCKCOUNT", "app:l", "app:c", H, 3, H)[:2] == [0, 2]
    assert rl(c, "RL.LEASEPEEK", "app:jobs", "*", 3)[:4] == [0, 1, 3, 1]
    assert rl(c, "RL.LEASE", "app:jobs", "*", 3, H, "TOKEN", "j2")[:4] == [0, 1, 3, 1]
    assert rl(c, "RL.RENEW", "app:jobs", "*", H, "j1", "j2") == [1, 1]
    assert rl(c, "RL.RELEASE", "app:jobs", "*", "j2") == [1]
    assert rl(c, "RL.ALLPEEK", 2, "app:jobs", "app:all", "*", "LEASE", 1, 3, H, "CHECK", 2, 5, H)[:2] == [0, 1]
    assert rl(c, "RL.ALL", 2, "app:jobs", "app:all", "*", "LEASE", 1, 3, H, "TOKEN", "j3",
              "CHECK", 2, 5, H) == [0, 1, 1, 3, 1, -1, H]
    after = keyspace(admin)
    assert {k: v for k, v in after.items() if k.startswith(b"other:")} == \
        {k: v for k, v in before.items() if k.startswith(b"other:")}
    assert len(after[b"app:z"][1]) == 2 and after[b"app:d"][1] == b"2"


def test_read_only_key_permission_allows_peek_only(acl_server, admin):
    before = keyspace(admin)
    for name in ("reader", "appreader"):
        c = user(acl_server, name)
        assert rl(c, "RL.PEEK", "app:z", "*", 5, H)[:4] == rl(admin, "RL.PEEK", "app:z", "*", 5, H)[:4]
        assert rl(c, "RL.PEEK", "app:z", "*", 1, H)[0] == 1
        for args in all_calls("app", "app"):
            if args[0] in ("RL.PEEK", "RL.THROTTLEPEEK", "RL.QUOTAPEEK", "RL.LEASEPEEK", "RL.ALLPEEK"):
                continue
            with pytest.raises(NOPERM):
                rl(c, *args)
    # The read-only pattern limits RL.PEEK's key too.
    with pytest.raises(NOPERM):
        rl(user(acl_server, "appreader"), "RL.PEEK", "other:z", "*", 5, H)
    assert rl(user(acl_server, "reader"), "RL.PEEK", "other:z", "*", 5, H)[:4] == [0, 1, 5, 3]
    assert rl(user(acl_server, "appreader"), "RL.LEASEPEEK", "app:jobs", "*", 3, "COST", 0)[:4] == [0, 1, 3, 2]
    with pytest.raises(NOPERM):
        rl(user(acl_server, "appreader"), "RL.LEASEPEEK", "other:jobs", "*", 3)
    # RL.ALLPEEK reads every key it names: one outside the pattern refuses it.
    allpeek = ("RL.ALLPEEK", 2, "app:z", "app:jobs", "*", "CHECK", 1, 5, H, "LEASE", 2, 3, H, "COST", 0)
    assert rl(user(acl_server, "appreader"), *allpeek)[:2] == [0, 2]
    with pytest.raises(NOPERM):
        rl(user(acl_server, "appreader"), "RL.ALLPEEK", 2, "app:z", "other:jobs", "*",
           "CHECK", 1, 5, H, "LEASE", 2, 3, H)
    assert keyspace(admin) == before


def test_user_allowed_peek_by_name_runs_just_that(acl_server, admin):
    c = user(acl_server, "peeker")
    before = keyspace(admin)
    assert rl(c, "RL.PEEK", "other:z", "*", 5, H)[:4] == [0, 1, 5, 3]
    assert rl(c, "RL.PEEK", "app:z", "*", 1, H)[:4] == [1, 1, 1, 0]
    for args in all_calls("app", "app"):
        if args[0] == "RL.PEEK":
            continue
        with pytest.raises(NOPERM, match="(?i)rl\\.(check|dayhour|lockcount|throttle|throttlepeek|quota|quotapeek|lease|leasepeek|release|renew|all|allpeek)"):
            rl(c, *args)
    with pytest.raises(NOPERM):
        c.get("app:d")
    assert keyspace(admin) == before
