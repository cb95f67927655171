"""Persistence: a server restarted from its AOF (rewritten mid-way) or from
an RDB holds exactly the keys, values, members, scores and absolute expiry
times it had, and its limits still hold."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from replay_workload import H, KEYS_LEFT, assert_limited_state, rejected_calls, rl, run_workload
from servers import Server, keyspace, wait_until


@pytest.fixture
def server_factory():
    made: list[Server] = []

    def make(args):
        s = Server(args=args)
        made.append(s)
        return s.start()
    yield make
    for s in made:
        s.stop()


def restart(server: Server) -> None:
    server.stop(keep_dir=True)
    server.start()


def more_workload(c, p: str, t: int) -> None:
    """Writes on keys the first workload made (after the rewrite / save)."""
    assert rl(c, "RL.CHECK", f"{p}:trim", t, 5, H)[:4] == [0, 1, 5, 3]
    assert rl(c, "RL.DAYHOUR", f"{p}:{{u2}}:day", f"{p}:{{u2}}:hour", 100, 10, 86_400_000, H) == [9, 2]
    c.zadd(f"{p}:trim", {"foreign-after": t - 10})


def check_restart_keeps_everything(server: Server, p: str, t: int, expected: dict) -> None:
    c = server.client()
    assert keyspace(c) == expected
    assert_limited_state(c, p)
    # Restarts never merge units: the same `now` again adds new members.
    assert rl(c, "RL.CHECK", f"{p}:trim", t, 10, H, "COST", 4)[:4] == [0, 1, 10, 3]
    members = c.zrange(f"{p}:trim", 0, -1, withscores=True)
    # (The workload's member a quarter hour ahead is the newest.)
    assert len(members) == 7 and [s for _, s in members] == [t - 10] + [float(t)] * 5 + [float(t + H // 4)]


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_rewrite_then_restart(server_factory, preamble):
    s = server_factory(["--appendonly", "yes", "--aof-use-rdb-preamble", preamble])
    c = s.client()
    t = run_workload(c, "aof")
    c.bgrewriteaof()
    wait_until(lambda: (i := c.info("persistence"))["aof_rewrite_in_progress"] == 0
               and i["aof_rewrite_scheduled"] == 0 and i["aof_last_bgrewrite_status"] == "ok",
               timeout=20, what="BGREWRITEAOF to finish")
    more_workload(c, "aof", t)
    run_workload(c, "aof2")
    rejected_calls(c, "aof")
    expected = keyspace(c)
    assert len(expected) == 2 * KEYS_LEFT
    # The AOF after the rewrite: a base and an increment holding native commands.
    files = {p.name for p in Path(s.dir).rglob("*.aof")} | {p.name for p in Path(s.dir).rglob("*.rdb")}
    assert any(".base." in f for f in files) and any(".incr." in f for f in files), files

    restart(s)
    check_restart_keeps_everything(s, "aof", t, expected)
    assert keyspace(s.client())[b"aof2:star"] == expected[b"aof2:star"]


def test_rdb_save_then_restart_keeps_absolute_expiry(server_factory):
    s = server_factory([])
    c = s.client()
    t = run_workload(c, "rdb")
    more_workload(c, "rdb", t)
    expected = keyspace(c)
    assert len(expected) == KEYS_LEFT
    pttl_before = {k: c.pttl(k) for k in expected}
    assert c.save()
    saved_at = time.monotonic()
    s.stop(keep_dir=True)
    time.sleep(1.0)  # expiry must not restart from the load
    s.start()
    c = s.client()
    assert keyspace(c) == expected
    elapsed = (time.monotonic() - saved_at) * 1000
    for key, before in pttl_before.items():
        if before > 0:
            assert c.pttl(key) <= before - elapsed + 50, key
    check_restart_keeps_everything(s, "rdb", t, expected)
