"""How much a busy key replicates (SPEC "Expiries on a grid"): a key whose
expiry is already late enough keeps it, so most admitted RL.CHECK and
RL.THROTTLE calls replicate one native command (`ZADD` / `HSET`) with no
`PEXPIREAT`, `ZREMRANGEBYSCORE`, `MULTI` or `EXEC` around it. Counted on a
real replica (with the module, and one without it) by its own INFO
commandstats, which count every command the replica applied from the
stream."""

from __future__ import annotations

import pytest

from replay_workload import server_ms
from servers import PRIMARY_ARGS, Server, keyspace, start_replica, wait_in_sync

CALLS = 1000
GAP_MS = 2  # 1 s window, grid step 125 ms: 62 calls per step (>= 20 per g)

# (command template, the native commands it may replicate)
CASES = {
    "RL.CHECK": (["RL.CHECK", "busy:c", None, 1_000_000, 1000],
                 ("zadd", "zremrangebyscore", "pexpireat", "multi", "exec")),
    "RL.THROTTLE": (["RL.THROTTLE", "busy:t", None, 1000, 1000, 1000],
                    ("hset", "pexpireat", "multi", "exec")),
}


def applied(replica: Server) -> dict[str, int]:
    stats = replica.client().info("commandstats")
    return {name.removeprefix("cmdstat_"): v["calls"] for name, v in stats.items()}


@pytest.mark.parametrize("command", list(CASES))
def test_a_busy_key_replicates_about_one_command_per_admitted_call(command):
    template, natives = CASES[command]
    primary = Server(args=PRIMARY_ARGS).start()
    replicas = []
    try:
        replicas = [start_replica(primary), start_replica(primary, module=False)]
        pc = primary.client()
        for r in replicas:
            r.client().config_resetstat()
        # An explicit now ahead of the server clock, so X follows the calls
        # (not the server clock) and the count is the same on every run.
        base = server_ms(pc) + 10_000
        pipe = pc.pipeline(transaction=False)
        for i in range(CALLS):
            args = list(template)
            args[2] = base + GAP_MS * i
            pipe.execute_command(*args)
        replies = pipe.execute()
        admitted = sum(1 for r in replies if r[0] == 0)
        assert admitted == CALLS
        wait_in_sync(primary, *replicas)
        for r in replicas:
            stats = applied(r)
            entries = sum(stats.get(n, 0) for n in natives)
            # The first native command is applied once per call.
            assert stats.get(natives[0], 0) == CALLS
            # The expiry moves once per grid step of 125 ms: 2000 ms of
            # calls cross 16 or 17 steps; each move adds PEXPIREAT (and for
            # RL.CHECK, ZREMRANGEBYSCORE when something left the window)
            # inside MULTI/EXEC.
            assert stats.get("pexpireat", 0) <= 18, stats
            assert entries / admitted <= 1.2, (entries, admitted, stats)
        # And the replicas hold exactly the primary's keys and expiries.
        expected = keyspace(pc)
        for r in replicas:
            assert keyspace(r.client()) == expected
    finally:
        for r in replicas:
            r.stop()
        primary.stop()
