"""Replication: replicas (with or without the module) and AOF replays end up
with exactly the primary's keys, values, members, scores and absolute expiry
times; rejected calls and errors replicate nothing; the stream carries native
commands only."""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

import pytest
import redis

from replay_workload import H, KEYS_LEFT, grid_at, is_foreign_looking, rejected_calls, rl, run_workload, server_ms
from servers import FUNCTIONS, PRIMARY_ARGS, ReplStream, Server, keyspace, repl_offset, start_replica, wait_in_sync


@contextlib.contextmanager
def servers():
    """Collects started servers and stops them all, whatever happens."""
    started: list[Server] = []
    try:
        yield started
    finally:
        for s in reversed(started):
            s.stop()


def started(pool: list, server: Server) -> Server:
    pool.append(server)
    return server.start() if not server.alive() else server


def test_replicas_with_and_without_module_equal_primary():
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        with_module = start_replica(primary)
        pool.append(with_module)
        without_module = start_replica(primary, module=False)
        pool.append(without_module)
        nc = without_module.client()
        if not FUNCTIONS:  # the library's functions replicate with the data
            with pytest.raises(redis.ResponseError, match="(?i)unknown command"):
                nc.execute_command("RL.PEEK", "x", "*", "1", "1000")

        pc = primary.client()
        run_workload(pc, "rep")
        run_workload(pc, "rep2")
        assert pc.execute_command("WAIT", 2, 5000) == 2
        wait_in_sync(primary, with_module, without_module)

        expected = keyspace(pc)
        assert len(expected) == 2 * KEYS_LEFT
        assert all(exp > 0 for kind, _, exp in expected.values() if kind == "zset")
        assert keyspace(with_module.client()) == expected
        assert keyspace(nc) == expected

        # A replica that joins afterwards (full sync from the RDB) without the module.
        late = start_replica(primary, module=False)
        pool.append(late)
        assert keyspace(late.client()) == expected


def test_rejections_and_errors_replicate_nothing():
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        replica = start_replica(primary)
        pool.append(replica)
        pc = primary.client()
        run_workload(pc, "rej")
        wait_in_sync(primary, replica)
        before = keyspace(pc)

        stream = ReplStream(primary)
        try:
            offset = repl_offset(primary)
            made = rejected_calls(pc, "rej")
            assert made > 50
            assert repl_offset(primary) == offset, "rejected calls or errors moved master_repl_offset"
            assert keyspace(pc) == before
            # The stream holds nothing but the marker written after them.
            pc.set("marker", "1")
            received = stream.until([b"SET", b"marker", b"1"])
            assert [cmd for cmd in received if cmd[0].upper() not in (b"SELECT", b"PING")] == \
                [[b"SET", b"marker", b"1"]]
            # The measure can fail: an admitted call moves the offset.
            offset = repl_offset(primary)
            assert rl(pc, "RL.CHECK", "rej:fresh", "*", 5, H)[0] == 0
            assert repl_offset(primary) > offset
        finally:
            stream.close()
        wait_in_sync(primary, replica)
        assert keyspace(replica.client()) == keyspace(pc)


def effects(received: list[list[bytes]]) -> list[list[bytes]]:
    return [cmd for cmd in received if cmd[0].upper() not in (b"SELECT", b"PING", b"REPLCONF")]


def test_stream_carries_native_effects_with_absolute_times():
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        pc = primary.client()
        stream = ReplStream(primary)
        try:
            t = server_ms(pc)
            assert rl(pc, "RL.CHECK", "eff:z", t - H - 5, 10, H)[0] == 0
            # A quarter hour on, the expiry must move: trim and PEXPIREAT.
            t2 = t + H // 4
            assert rl(pc, "RL.CHECK", "eff:z", t2, 10, H, "COST", 2)[0] == 0
            # Again at t2: the expiry is late enough, so one ZADD, no MULTI.
            assert rl(pc, "RL.CHECK", "eff:z", t2, 10, H)[0] == 0
            assert rl(pc, "RL.CHECK", "eff:z", t, 1, 1000)[0] == 1  # rejected: nothing
            assert rl(pc, "RL.CHECK", "eff:s", "*", 3, H)[0] == 0
            assert rl(pc, "RL.DAYHOUR", "eff:d", "eff:h", 10, 10, 86_400_000, H) == [1, 1]
            assert rl(pc, "RL.LOCKCOUNT", "eff:l", "eff:c", 60000, 1, 120000) == [0, 1, 60000]
            assert rl(pc, "RL.LOCKCOUNT", "eff:l", "eff:c", 60000, 1, 120000) == [1, 1, 120000]
            pc.set("marker", "1")
            got = effects(stream.until([b"SET", b"marker", b"1"]))
        finally:
            stream.close()

        names = [cmd[0].upper() for cmd in got]
        assert not any(n.startswith(b"RL.") for n in names), names
        members = pc.zrange("eff:z", 0, -1, withscores=True)
        exp = {k: pc.execute_command("PEXPIRETIME", k) for k in ("eff:z", "eff:s", "eff:d", "eff:h", "eff:l")}
        # The first call's expiry: never sooner than a window from the server clock.
        first_exp = int(got[2][2])
        assert first_exp >= t + H
        old_member = got[1][3]
        assert not is_foreign_looking(old_member), old_member
        zadd2, zadd3 = got[5], got[9]
        assert {zadd2[3], zadd2[5], zadd3[3]} == {m for m, _ in members}
        s_member = pc.zrange("eff:s", 0, -1, withscores=True)
        expected = [
            [b"MULTI"],
            [b"ZADD", b"eff:z", str(t - H - 5).encode(), old_member],
            [b"PEXPIREAT", b"eff:z", str(first_exp).encode()],
            [b"EXEC"],
            [b"MULTI"],
            [b"ZADD", b"eff:z", str(t2).encode(), zadd2[3], str(t2).encode(), zadd2[5]],
            [b"ZREMRANGEBYSCORE", b"eff:z", b"-inf", str(t2 - H).encode()],
            [b"PEXPIREAT", b"eff:z", str(exp["eff:z"]).encode()],
            [b"EXEC"],
            [b"ZADD", b"eff:z", str(t2).encode(), zadd3[3]],
            [b"MULTI"],
            [b"ZADD", b"eff:s", str(int(s_member[0][1])).encode(), s_member[0][0]],
            [b"PEXPIREAT", b"eff:s", str(exp["eff:s"]).encode()],
            [b"EXEC"],
            [b"MULTI"],
            [b"SET", b"eff:d", b"1", b"PXAT", str(exp["eff:d"]).encode()],
            [b"SET", b"eff:h", b"1", b"PXAT", str(exp["eff:h"]).encode()],
            [b"EXEC"],
            [b"SET", b"eff:c", b"1", b"PXAT", b"<count expiry>"],
            [b"MULTI"],
            [b"SET", b"eff:l", b"1", b"PXAT", str(exp["eff:l"]).encode()],
            [b"DEL", b"eff:c"],
            [b"EXEC"],
            [b"SET", b"marker", b"1"],
        ]
        # The counter deleted by the lock: its expiry was a window from the call.
        count_set = next(cmd for cmd in got if cmd[:2] == [b"SET", b"eff:c"])
        assert t + 60000 <= int(count_set[4]) <= server_ms(pc) + 60000
        got = [cmd[:4] + [b"<count expiry>"] if cmd[:2] == [b"SET", b"eff:c"] else cmd for cmd in got]
        assert got == expected
        assert len(members) == 3 and {s for _, s in members} == {float(t2)}
        # Expiries on the key's grid (SPEC "Expiries on a grid"): the first
        # call's from the server clock, the second's from its newest unit.
        assert any(first_exp == grid_at("eff:z", H, c + H) for c in range(t, server_ms(pc) + 1))
        assert exp["eff:z"] == grid_at("eff:z", H, t2 + H) and exp["eff:d"] > exp["eff:h"] > 0


def test_debits_and_reservations_replicate_as_admissions():
    """SPEC "Debits", "Reservations": a debit and an admitted reservation
    replicate as the command's admissions do (native commands with absolute
    times); a refused reservation replicates nothing; a replica without the
    module ends up with the same state."""
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        bare = start_replica(primary, module=False)
        pool.append(bare)
        pc = primary.client()
        stream = ReplStream(primary)
        try:
            t = server_ms(pc)
            # RL.CHECK: 3x the count, never refused; the reply is the state now.
            assert rl(pc, "RL.CHECK", "deb:z", t, 2, H, "COST", 6, "DEBIT") == [1, 1, 2, 0, H, H]
            # RL.THROTTLE: TAT = t + 6 * 600 s.
            assert rl(pc, "RL.THROTTLE", "deb:tb", t, 2, 1, 600000, "COST", 6, "DEBIT")[:5] == \
                [1, 1, 2, 0, 2_400_000]
            assert rl(pc, "RL.QUOTA", "deb:q", t, "UTC", "DAY", 3, "COST", 9, "DEBIT")[:4] == [1, 1, 3, 0]
            # A chain of two reservations, then one that would wait too long.
            assert rl(pc, "RL.THROTTLE", "res:tb", t, 1, 1, 600000, "RESERVE", H)[4] == 0
            assert rl(pc, "RL.THROTTLE", "res:tb", t, 1, 1, 600000, "RESERVE", H)[4] == 600000
            assert rl(pc, "RL.THROTTLE", "res:tb", t, 1, 1, 600000, "RESERVE", 1000)[:2] == [1, 1]
            pc.set("marker", "1")
            got = effects(stream.until([b"SET", b"marker", b"1"]))
        finally:
            stream.close()
        names = [cmd[0].upper() for cmd in got]
        assert not any(n.startswith(b"RL.") for n in names), names
        zadd = next(cmd for cmd in got if cmd[:2] == [b"ZADD", b"deb:z"])
        assert zadd[2::2] == [str(t).encode()] * 6
        assert [b"HSET", b"deb:tb", b"600000", str((t + 3_600_000) * 10**6).encode()] in got
        hsets = [cmd for cmd in got if cmd[:2] == [b"HSET", b"res:tb"]]
        assert [cmd[3] for cmd in hsets] == [str((t + k * 600_000) * 10**6).encode() for k in (1, 2)]
        quota = next(cmd for cmd in got if cmd[:2] == [b"HSET", b"deb:q"])
        assert quota[3] == b"9"
        for key in (b"deb:z", b"deb:tb", b"deb:q", b"res:tb"):
            assert any(cmd[:2] == [b"PEXPIREAT", key] for cmd in got), key
        assert pc.execute_command("WAIT", 1, 5000) == 1
        wait_in_sync(primary, bare)
        assert keyspace(bare.client()) == keyspace(pc)


def test_lease_stream_carries_native_effects():
    """RL.LEASE, RL.RENEW and RL.RELEASE replicate as ZADD, ZREM,
    ZREMRANGEBYSCORE, ZADD XX and PEXPIREAT with absolute times; a call that
    keeps the expiry sends one command, without MULTI/EXEC."""
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        replica = start_replica(primary, module=False)
        pool.append(replica)
        pc = primary.client()
        # A `now` ahead of the server clock: no lag, so X is fixed.
        t = server_ms(pc) + 60_000
        pc.zadd("le:r", {"old": 1000})
        stream = ReplStream(primary)
        try:
            assert rl(pc, "RL.LEASE", "le:k", t, 2, H, "TOKEN", "a", "COST", 2)[:4] == [0, 1, 2, 0]
            e1 = pc.execute_command("PEXPIRETIME", "le:k")
            assert rl(pc, "RL.LEASE", "le:k", t, 2, H, "TOKEN", "a")[:4] == [0, 1, 2, 1]
            assert rl(pc, "RL.LEASE", "le:k", t, 1, H, "TOKEN", "b")[0] == 1  # nothing
            assert rl(pc, "RL.RENEW", "le:k", t, 2 * H, "a", "b") == [1, 0]
            e2 = pc.execute_command("PEXPIRETIME", "le:k")
            assert rl(pc, "RL.RELEASE", "le:k", t, "a", "b") == [1, 0]
            assert rl(pc, "RL.RELEASE", "le:k", t, "a") == [0]  # nothing
            r = rl(pc, "RL.LEASE", "le:r", t, 1, H)
            e3 = pc.execute_command("PEXPIRETIME", "le:r")
            # The first unit of a lease of 2 or more half a ms early, in
            # RL.LEASE's ZADD and in RL.RENEW's ZADD XX of several leases.
            assert rl(pc, "RL.LEASE", "le:m", t, 5, H, "TOKEN", "c", "COST", 3)[0] == 0
            e4 = pc.execute_command("PEXPIRETIME", "le:m")
            assert rl(pc, "RL.LEASE", "le:m", t, 5, H, "TOKEN", "d")[0] == 0
            assert rl(pc, "RL.RENEW", "le:m", t, 2 * H, "d", "c") == [1, 3]
            e5 = pc.execute_command("PEXPIRETIME", "le:m")
            pc.set("marker", "1")
            got = effects(stream.until([b"SET", b"marker", b"1"]))
        finally:
            stream.close()
        at, at2 = str(t + H).encode(), str(t + 2 * H).encode()
        half, half2 = f"{t + H - 1}.5".encode(), f"{t + 2 * H - 1}.5".encode()
        assert t + H <= e1 < t + H + H // 8 and t + 2 * H <= e2 < t + 2 * H + H // 4, (e1, e2)
        reap = got[15]
        assert reap[:3] == [b"ZREMRANGEBYSCORE", b"le:r", b"-inf"] and 1000 <= int(reap[3]) <= t
        assert got == [
            [b"MULTI"],
            [b"ZADD", b"le:k", half, b"a", at, b"a#2"],
            [b"PEXPIREAT", b"le:k", str(e1).encode()],
            [b"EXEC"],
            [b"MULTI"],
            [b"ZREM", b"le:k", b"a#2"],
            [b"ZADD", b"le:k", at, b"a"],
            [b"EXEC"],
            [b"MULTI"],
            [b"ZADD", b"le:k", b"XX", at2, b"a"],
            [b"PEXPIREAT", b"le:k", str(e2).encode()],
            [b"EXEC"],
            [b"ZREM", b"le:k", b"a"],
            [b"MULTI"],
            [b"ZADD", b"le:r", at, r[6]],
            reap,
            [b"PEXPIREAT", b"le:r", str(e3).encode()],
            [b"EXEC"],
            [b"MULTI"],
            [b"ZADD", b"le:m", half, b"c", at, b"c#2", at, b"c#3"],
            [b"PEXPIREAT", b"le:m", str(e4).encode()],
            [b"EXEC"],
            [b"ZADD", b"le:m", at, b"d"],
            [b"MULTI"],
            [b"ZADD", b"le:m", b"XX", at2, b"d", half2, b"c", at2, b"c#2", at2, b"c#3"],
            [b"PEXPIREAT", b"le:m", str(e5).encode()],
            [b"EXEC"],
            [b"SET", b"marker", b"1"],
        ], got
        wait_in_sync(primary, replica)
        assert keyspace(replica.client()) == keyspace(pc)


def test_all_stream_carries_each_clauses_native_effects():
    """RL.ALL replicates each clause's writes as its command does, all in
    the call's one MULTI/EXEC, in key order; a refusal replicates nothing; a
    refund replicates each clause's refund (RL.RELEASE's ZREM for a lease)."""
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        replica = start_replica(primary, module=False)
        pool.append(replica)
        pc = primary.client()
        # A `now` ahead of the server clock: no lag, so X is fixed.
        t = server_ms(pc) + 60_000
        keys = ["{a}:c", "{a}:t", "{a}:l"]
        call = ("RL.ALL", 3, *keys, t, "LEASE", 3, 2, H, "TOKEN", "job",
                "CHECK", 1, 5, 60000, "THROTTLE", 2, 5, 1, 1000)
        stream = ReplStream(primary)
        try:
            assert rl(pc, *call)[:2] == [0, 1]
            refused = list(call)
            refused[5] = t + 1
            refused[8] = 1  # the lease clause: limit 1, full for another token
            refused[11] = "other"
            assert rl(pc, *refused)[:2] == [1, 1]
            assert rl(pc, *call, "REFUND")[0] == 0
            pc.set("marker", "1")
            got = effects(stream.until([b"SET", b"marker", b"1"]))
        finally:
            stream.close()
        member = got[1][3]
        e_c = grid_at("{a}:c", 60000, t + 60000)
        e_l = grid_at("{a}:l", H, t + H)
        tat = (t + 1000) * 10**6  # burst 5, one unit of 1000 ms
        e_t = grid_at("{a}:t", 5 * 1000, t + 1000)
        assert got[:9] == [
            [b"MULTI"],
            [b"ZADD", b"{a}:c", str(t).encode(), member],
            [b"PEXPIREAT", b"{a}:c", str(e_c).encode()],
            [b"HSET", b"{a}:t", b"1000", str(tat).encode()],
            [b"PEXPIREAT", b"{a}:t", str(e_t).encode()],
            [b"ZADD", b"{a}:l", str(t + H).encode(), b"job"],
            [b"PEXPIREAT", b"{a}:l", str(e_l).encode()],
            [b"EXEC"],
            # The refused call wrote nothing; the refund: each clause's.
            [b"MULTI"],
        ], got
        assert got[9:] == [
            [b"ZREM", b"{a}:c", member],
            [b"DEL", b"{a}:t"],
            [b"ZREM", b"{a}:l", b"job"],
            [b"EXEC"],
            [b"SET", b"marker", b"1"],
        ], got
        wait_in_sync(primary, replica)
        assert keyspace(replica.client()) == keyspace(pc)
        assert pc.exists(*keys) == 0


def test_all_details_replicates_what_the_call_without_does():
    """DETAILS changes only the reply: an admitted, a refused and a refunded
    RL.ALL with it replicate exactly what the same calls without it do
    (the sliding log's random member names aside), and the seven integers
    are the same."""
    keys = ["{d}:c", "{d}:t", "{d}:q", "{d}:l"]

    def named(cmds):
        # The sliding log's members are named at random: compared by place.
        out = []
        for c in cmds:
            if c[0].upper() == b"ZADD" and c[1] == b"{d}:c":
                c = c[:3] + [b"<member>"] * (len(c) - 3)
            elif c[0].upper() == b"ZREM" and c[1] == b"{d}:c":
                c = c[:2] + [b"<member>"] * (len(c) - 2)
            out.append(c)
        return out

    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        replica = start_replica(primary, module=False)
        pool.append(replica)
        pc = primary.client()
        # A `now` ahead of the server clock: no lag, so both runs compute
        # the same expiries.
        t = server_ms(pc) + 60_000
        call = ("RL.ALL", 4, *keys, t, "CHECK", 1, 2, 10000, 5, H, "THROTTLE", 2, 5, 1, 1000, 10, 5, 60000,
                "QUOTA", 3, "UTC", "hour", 10, "day", 50, "LEASE", 4, 1, H, "TOKEN", "job")
        refused = list(call)
        refused[6] = t + 1
        refused[-1] = "other"  # the lease holds one unit: full for another token
        runs = []
        for tail in ((), ("DETAILS",)):
            pc.flushall()
            stream = ReplStream(primary)
            try:
                replies = [rl(pc, *call, *tail), rl(pc, *refused, *tail), rl(pc, *call, "REFUND", *tail)]
                pc.set("marker", "1")
                got = effects(stream.until([b"SET", b"marker", b"1"]))
            finally:
                stream.close()
            runs.append((replies, named(got)))
            wait_in_sync(primary, replica)
            assert keyspace(replica.client()) == keyspace(pc)
        (plain, plain_stream), (detailed, detailed_stream) = runs
        assert [r[0] for r in plain] == [0, 1, 0], plain
        assert [r[:7] for r in detailed] == plain
        assert all(len(r) == 11 for r in detailed), detailed
        assert detailed_stream == plain_stream
        assert plain_stream[0] == [b"MULTI"] and len(plain_stream) > 10, plain_stream


def test_late_replica_does_not_extend_expiry():
    """A replica that applies the writes a second late holds the same
    absolute expiry times and scores as the primary (effects, not commands
    re-run against the replica's clock)."""
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        replica = start_replica(primary)
        pool.append(replica)
        pc = primary.client()
        replica.proc.send_signal(signal.SIGSTOP)
        try:
            for i in range(5):
                assert rl(pc, "RL.CHECK", "late:z", "*", 10, H)[0] == 0
            assert rl(pc, "RL.DAYHOUR", "late:{x}:d", "late:{x}:h", 10, 10, 2 * H, H) == [1, 1]
            assert rl(pc, "RL.LOCKCOUNT", "late:{y}:l", "late:{y}:c", H, 5, H)[0] == 0
            time.sleep(1.0)
        finally:
            replica.proc.send_signal(signal.SIGCONT)
        wait_in_sync(primary, replica)
        rc = replica.client()
        expected = keyspace(pc)
        assert len(expected) == 4
        assert keyspace(rc) == expected
        # PTTL on the replica reflects the second it lost, like on the primary.
        for key in expected:
            assert rc.pttl(key) <= pc.pttl(key) + 50


def test_aof_written_with_module_loads_without_it():
    with servers() as pool:
        primary = started(pool, Server(args=["--appendonly", "yes"]))
        pc = primary.client()
        run_workload(pc, "aof")
        rejected_calls(pc, "aof")
        expected = keyspace(pc)
        assert len(expected) == KEYS_LEFT
        primary.stop(keep_dir=True)

        incr = list(Path(primary.dir).rglob("*.incr.aof"))
        assert incr, sorted(str(p) for p in Path(primary.dir).rglob("*"))
        text = b"".join(p.read_bytes() for p in incr).lower()
        assert b"zadd" in text and b"pexpireat" in text and b"pxat" in text
        assert b"rl.check" not in text and b"rl.dayhour" not in text and b"rl.lockcount" not in text
        assert b"rl.lease" not in text and b"rl.release" not in text and b"rl.renew" not in text
        assert b"zremrangebyscore" in text and b"xx" in text

        plain = started(pool, Server(module=False, directory=primary.dir, args=["--appendonly", "yes"]))
        c = plain.client()
        with pytest.raises(redis.ResponseError, match="(?i)unknown command"):
            c.execute_command("RL.PEEK", "x", "*", "1", "1000")
        assert keyspace(c) == expected
        plain.stop()
        pool.remove(plain)


def test_transactions_scripts_and_other_dbs_replicate_effects():
    """RL calls inside MULTI/EXEC, inside a Lua script, and in another db reach
    a replica without the module exactly."""
    with servers() as pool:
        primary = started(pool, Server(args=PRIMARY_ARGS))
        replica = start_replica(primary, module=False)
        pool.append(replica)
        pc = primary.client()
        pipe = pc.pipeline(transaction=True)
        for _ in range(4):
            pipe.execute_command("RL.CHECK", "tx:z", "*", 3, H)
        pipe.execute_command("RL.DAYHOUR", "tx:{a}:d", "tx:{a}:h", 5, 1, 86_400_000, H)
        pipe.execute_command("RL.DAYHOUR", "tx:{a}:d", "tx:{a}:h", 5, 1, 86_400_000, H)
        pipe.execute_command("RL.LOCKCOUNT", "tx:{b}:l", "tx:{b}:c", H, 1, H)
        pipe.execute_command("RL.LOCKCOUNT", "tx:{b}:l", "tx:{b}:c", H, 1, H)
        replies = pipe.execute()
        assert [r[0] for r in replies[:4]] == [0, 0, 0, 1]
        assert replies[4:6] == [[1, 1], [1, 2]]
        assert [r[:2] for r in replies[6:]] == [[0, 1], [1, 1]]

        script = "return redis.call('RL.CHECK', KEYS[1], '*', ARGV[1], ARGV[2])"
        assert [pc.eval(script, 1, "lua:z", 2, H)[0] for _ in range(3)] == [0, 0, 1]
        script2 = ("local a = redis.call('RL.LOCKCOUNT', KEYS[1], KEYS[2], ARGV[1], 0, ARGV[1]) "
                   "local b = redis.call('RL.DAYHOUR', KEYS[3], KEYS[4], 1, 1, ARGV[1], ARGV[1]) "
                   "return {a[1], b[1], b[2]}")
        assert pc.eval(script2, 4, "{l}:lock", "{l}:count", "{l}:d", "{l}:h", H) == [1, 1, 1]

        db3 = primary.client(db=3)
        t = server_ms(db3)
        for _ in range(3):
            assert rl(db3, "RL.CHECK", "db3:z", t, 5, H)[0] == 0
        assert rl(db3, "RL.DAYHOUR", "db3:d", "db3:h", 5, 5, 86_400_000, H) == [1, 1]

        assert pc.execute_command("WAIT", 1, 5000) == 1
        wait_in_sync(primary, replica)
        expected = keyspace(pc)
        assert len(expected) == 8 and len(expected[b"tx:z"][1]) == 3 and len(expected[b"lua:z"][1]) == 2
        assert keyspace(replica.client()) == expected
        assert len(keyspace(db3)) == 3
        assert keyspace(replica.client(db=3)) == keyspace(db3)
