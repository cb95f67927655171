"""Failover: after the primary dies and its replica is promoted, every limit,
lock and full hour still holds on the new primary, member names stay unique,
and the new primary's own replica (without the module) follows it exactly."""

from __future__ import annotations

import pytest
import redis

from replay_workload import H, KEYS_LEFT, assert_limited_state, rl, run_workload
from servers import PRIMARY_ARGS, Server, keyspace, start_replica, wait_in_sync, wait_until


@pytest.fixture
def trio():
    """A primary and two replicas: one with the module, one without."""
    made: list[Server] = []
    try:
        primary = Server(args=PRIMARY_ARGS).start()
        made.append(primary)
        made.append(start_replica(primary, args=PRIMARY_ARGS))
        made.append(start_replica(primary, module=False))
        yield made
    finally:
        for s in reversed(made):
            s.stop()


def test_limits_survive_promotion(trio):
    primary, heir, follower = trio
    pc = primary.client()
    t = run_workload(pc, "fo")
    # A burst at an explicit now, to be continued at the same now after failover.
    assert rl(pc, "RL.CHECK", "fo:same", t, 20, H, "COST", 10)[:4] == [0, 1, 20, 10]
    assert pc.execute_command("WAIT", 2, 5000) == 2
    wait_in_sync(primary, heir, follower)
    before = keyspace(pc)
    assert len(before) == KEYS_LEFT + 1

    hc = heir.client()
    # While a replica: it answers RL.PEEK from the replicated state and refuses writes.
    assert rl(hc, "RL.PEEK", "fo:star", "*", 5, 60000, 10, H)[:4] == [1, 1, 5, 0]
    with pytest.raises(redis.exceptions.ReadOnlyError):
        rl(hc, "RL.CHECK", "fo:star", "*", 5, 60000, 10, H)

    # The primary dies; the replica with the module takes over.
    primary.stop()
    assert hc.execute_command("REPLICAOF", "NO", "ONE") in (b"OK", "OK", True)
    wait_until(lambda: hc.info("replication")["role"] == "master", 10, what="promotion")
    fc = follower.client()
    fc.execute_command("REPLICAOF", "127.0.0.1", heir.port)
    wait_until(lambda: fc.info("replication").get("master_link_status") == "up", 15, what="follower relink")

    assert keyspace(hc) == before
    assert_limited_state(hc, "fo")
    # The same `now` on the new primary adds new members, never merged with the old ones.
    assert rl(hc, "RL.CHECK", "fo:same", t, 20, H, "COST", 10)[:4] == [0, 1, 20, 0]
    members = hc.zrange("fo:same", 0, -1, withscores=True)
    assert len(members) == 20 and {s for _, s in members} == {float(t)}
    assert rl(hc, "RL.CHECK", "fo:same", t, 20, H)[0] == 1
    # A new lock trips on the new primary.
    assert [rl(hc, "RL.LOCKCOUNT", "fo:{n}:lock", "fo:{n}:count", H, 1, H)[:2] for _ in range(3)] == \
        [[0, 1], [1, 1], [1, 0]]

    assert hc.execute_command("WAIT", 1, 5000) == 1
    wait_in_sync(heir, follower)
    after = keyspace(hc)
    assert keyspace(fc) == after
    assert after[b"fo:{n}:lock"][0:2] == ("string", b"1")
