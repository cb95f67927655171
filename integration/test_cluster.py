"""Redis Cluster and key declarations: three primaries with the module,
redis-py's RedisCluster routing RL commands by their declared keys, CROSSSLOT
for two-key calls across slots, COMMAND GETKEYS / INFO / DOCS, and RL.PEEK on
replicas (cluster and plain) while the writing commands are refused there."""

from __future__ import annotations

import pytest
import redis

from replay_workload import H, rl, server_ms
from servers import PRIMARY_ARGS, Cluster, Server, keyspace, redis_cli, start_replica, wait_in_sync

pytestmark = pytest.mark.skipif(redis_cli() is None, reason="redis-cli is needed to create a cluster")


@pytest.fixture(scope="module")
def cluster():
    cl = Cluster(3, args=PRIMARY_ARGS)
    cl.start()
    try:
        yield cl
    finally:
        cl.stop()


@pytest.fixture
def rc(cluster):
    c = cluster.client()
    yield c
    c.close()


def owner_client(cluster: Cluster, key: str) -> redis.Redis:
    c0 = cluster.nodes[0].client()
    slot = c0.execute_command("CLUSTER KEYSLOT", key)
    c0.close()
    return cluster.slot_owner(int(slot)).client()


def test_check_lands_on_owning_node_and_behaves_as_one_server(cluster, rc):
    keys = [f"cl:ip:{i}" for i in range(200)]
    with Server() as single:
        sc = single.client()
        t = server_ms(sc)
        calls = [(key, t + k) for key in keys for k in range(3)]
        expected = [rl(sc, "RL.CHECK", key, now, 2, H, 10, 2 * H) for key, now in calls]
        got = [rc.execute_command("RL.CHECK", key, now, 2, H, 10, 2 * H) for key, now in calls]
        assert got == expected
        assert [r[0] for r in got[:3]] == [0, 0, 1]

    c0 = cluster.nodes[0].client()
    nodes = {n.port: n.client() for n in cluster.nodes}
    # What each node holds locally (SCAN is not redirected).
    local = {port: {k.decode() for k in c.scan_iter(match="cl:ip:*", count=1000)} for port, c in nodes.items()}
    per_node = {port: 0 for port in nodes}
    for key in keys:
        slot = c0.execute_command("CLUSTER KEYSLOT", key)
        owner = cluster.slot_owner(int(slot)).port
        per_node[owner] += 1
        assert [port for port in nodes if key in local[port]] == [owner], key
        assert nodes[owner].zcard(key) == 2, key
        assert nodes[owner].execute_command("PEXPIRETIME", key) > t
    # 200 keys spread over all three primaries.
    assert all(n > 20 for n in per_node.values()), per_node
    assert sum(len(v) for v in local.values()) == 200


def test_throttle_lands_on_owning_node_and_behaves_as_one_server(cluster, rc):
    keys = [f"cl:tb:{i}" for i in range(100)]
    with Server() as single:
        sc = single.client()
        t = server_ms(sc)
        calls = [(key, t + k) for key in keys for k in range(3)]
        expected = [rl(sc, "RL.THROTTLE", key, now, 2, 1, H, 5, 5, 2 * H) for key, now in calls]
        got = [rc.execute_command("RL.THROTTLE", key, now, 2, 1, H, 5, 5, 2 * H) for key, now in calls]
        assert got == expected
        assert [r[0] for r in got[:3]] == [0, 0, 1]
    c0 = cluster.nodes[0].client()
    for key in keys[:20]:
        owner = cluster.slot_owner(int(c0.execute_command("CLUSTER KEYSLOT", key))).client()
        assert sorted(owner.hkeys(key)) == [str(H).encode(), str(2 * H).encode()], key
        assert rc.execute_command("RL.THROTTLEPEEK", key, t + 2, 2, 1, H)[:4] == [1, 1, 2, 0]


def test_quota_lands_on_owning_node(cluster, rc):
    keys = [f"cl:q:{i}" for i in range(60)]
    t = 1_796_054_400_000
    for key in keys:
        got = [rc.execute_command("RL.QUOTA", key, t, "Europe/Berlin", "DAY", 2, "YEAR", 10)[:4] for _ in range(3)]
        assert got == [[0, 1, 2, 1], [0, 1, 2, 0], [1, 1, 2, 0]], key
    c0 = cluster.nodes[0].client()
    for key in keys[:10]:
        owner = cluster.slot_owner(int(c0.execute_command("CLUSTER KEYSLOT", key))).client()
        assert owner.hgetall(key) == {b"day:2026-11-30T00:00+01:00": b"2", b"year:2026-01-01T00:00+01:00": b"2"}


def test_lease_lands_on_owning_node(cluster, rc):
    keys = [f"cl:jobs:{i}" for i in range(60)]
    t = 1_796_054_400_000
    for key in keys:
        got = [rc.execute_command("RL.LEASE", key, t, 2, H, "TOKEN", f"j{k}") for k in range(3)]
        assert [r[:4] for r in got] == [[0, 1, 2, 1], [0, 1, 2, 0], [1, 1, 2, 0]], key
        assert [r[6] for r in got] == [b"j0", b"j1", None], key
        assert rc.execute_command("RL.LEASEPEEK", key, t, 2, "COST", 0)[:4] == [0, 1, 2, 0]
        assert rc.execute_command("RL.RENEW", key, t, 2 * H, "j0", "j2") == [1, 0]
    c0 = cluster.nodes[0].client()
    for key in keys[:10]:
        owner = cluster.slot_owner(int(c0.execute_command("CLUSTER KEYSLOT", key))).client()
        assert owner.zrange(key, 0, -1, withscores=True) == [(b"j1", float(t + H)), (b"j0", float(t + 2 * H))]
        assert rc.execute_command("RL.RELEASE", key, t, "j0", "j1") == [1, 1]
        assert not owner.exists(key)


def test_hash_tagged_two_key_commands(cluster, rc):
    day, hour = "{user:42}:day", "{user:42}:hour"
    assert [rc.execute_command("RL.DAYHOUR", day, hour, 10, 2, 86_400_000, H) for _ in range(3)] == \
        [[1, 1], [2, 2], [2, 3]]
    lock, count = "{user:7}:lock", "{user:7}:count"
    replies = [rc.execute_command("RL.LOCKCOUNT", lock, count, 60000, 1, 120000) for _ in range(3)]
    assert [r[:2] for r in replies] == [[0, 1], [1, 1], [1, 0]]
    oc = owner_client(cluster, day)
    assert oc.get(day) == b"2" and oc.get(hour) == b"2"
    oc = owner_client(cluster, lock)
    assert oc.get(lock) == b"1" and not oc.exists(count)
    assert 0 < oc.pttl(lock) <= 120000


@pytest.mark.parametrize("command", ["RL.DAYHOUR", "RL.LOCKCOUNT"])
def test_two_keys_in_different_slots_are_crossslot(cluster, rc, command):
    first, second = "xs:alpha", "xs:beta"
    c0 = cluster.nodes[0].client()
    assert c0.execute_command("CLUSTER KEYSLOT", first) != c0.execute_command("CLUSTER KEYSLOT", second)
    args = [first, second, 10, 10, 60000] + ([60000] if command == "RL.DAYHOUR" else [])
    # redis-py refuses client-side; the server refuses too when asked directly.
    with pytest.raises((redis.exceptions.RedisClusterException, redis.ResponseError)):
        rc.execute_command(command, *args)
    oc = owner_client(cluster, first)
    field = "ratelimit_" + command[3:].lower() + "_calls"
    calls_before = oc.info("ratelimit")[field]
    with pytest.raises(redis.ResponseError, match="^CROSSSLOT"):
        oc.execute_command(command, *args)
    for node in cluster.nodes:
        assert list(node.client().scan_iter(match="xs:*")) == []
    # Refused by Redis before the module ran: not counted.
    assert oc.info("ratelimit")[field] == calls_before


def test_all_lands_on_owning_node_and_behaves_as_one_server(cluster, rc):
    """RL.ALL on one hash tag per user: routed by its key-count key spec to
    the node owning the tag's slot, answering as one server does."""
    users = [f"{{user:{i}}}" for i in range(40)]
    t = 1_796_054_400_000

    def call(c, u, now, token):
        return c.execute_command("RL.ALL", 3, f"{u}:rate", f"{u}:tokens", f"{u}:inflight", now,
                                 "CHECK", 1, 2, 60000, "QUOTA", 2, "UTC", "DAY", 1000, "COST", 300,
                                 "LEASE", 3, 2, H, "TOKEN", token)

    with Server() as single:
        sc = single.client()
        expected = [call(sc, u, t + k, f"r{k}") for u in users for k in range(4)]
    got = [call(rc, u, t + k, f"r{k}") for u in users for k in range(4)]
    assert got == expected
    # The lease binds: as little headroom as the minute, a longer reset.
    assert [r[:2] for r in got[:4]] == [[0, 3], [0, 3], [1, 3], [1, 3]], got[:4]
    for u in users[:10]:
        oc = owner_client(cluster, f"{u}:rate")
        assert oc.zcard(f"{u}:rate") == 2
        assert oc.hvals(f"{u}:tokens") == [b"600"]
        assert oc.zrange(f"{u}:inflight", 0, -1) == [b"r0", b"r1"]
        peek = rc.execute_command("RL.ALLPEEK", 2, f"{u}:rate", f"{u}:inflight", t + 5,
                                  "CHECK", 1, 2, 60000, "COST", 0, "LEASE", 2, 2, H, "COST", 0)
        assert peek[:5] == [0, 2, 1, 2, 0], peek  # both full: the longer reset binds


def test_all_details_lands_on_owning_node_and_answers_as_one_server(cluster, rc):
    """DETAILS at the end changes neither the keys nor the routing: the
    cluster answers every rule's state as one server does."""
    users = [f"{{det:{i}}}" for i in range(12)]
    t = 1_796_054_400_000  # on an hour boundary

    def call(c, u, now, command="RL.ALL"):
        return c.execute_command(command, 2, f"{u}:rate", f"{u}:quota", now,
                                 "CHECK", 1, 2, 10000, 5, 3600000, "QUOTA", 2, "UTC", "HOUR", 100, "DAY", 1000,
                                 "DETAILS")

    with Server() as single:
        sc = single.client()
        expected = [call(sc, u, t + k, c) for u in users for k in range(3) for c in ("RL.ALLPEEK", "RL.ALL")]
    got = [call(rc, u, t + k, c) for u in users for k in range(3) for c in ("RL.ALLPEEK", "RL.ALL")]
    assert got == expected
    assert got[1][:7] == [0, 1, 1, 2, 1, -1, 10000], got[1]
    assert got[1][7] == [[0, 1, 2, 1, -1, 10000], [0, 2, 5, 4, -1, 3600000]], got[1]
    assert got[1][8][0] == [0, 1, 100, 99, -1, 3600000], got[1]
    # The third call is refused by "2 per 10 s"; nothing written.
    assert got[5][:2] == [1, 1] and got[5][7][0][0] == 1, got[5]
    for u in users[:4]:
        assert owner_client(cluster, f"{u}:rate").zcard(f"{u}:rate") == 2


@pytest.mark.parametrize("command", ["RL.ALL", "RL.ALLPEEK"])
def test_all_keys_in_different_slots_are_crossslot(cluster, rc, command):
    first, second = "xs:alpha", "xs:beta"
    args = [2, first, second, "*", "CHECK", 1, 5, 60000, "CHECK", 2, 5, 60000]
    with pytest.raises((redis.exceptions.RedisClusterException, redis.ResponseError)):
        rc.execute_command(command, *args)
    oc = owner_client(cluster, first)
    field = "ratelimit_" + command[3:].lower() + "_calls"
    calls_before = oc.info("ratelimit")[field]
    with pytest.raises(redis.ResponseError, match="^CROSSSLOT"):
        oc.execute_command(command, *args)
    for node in cluster.nodes:
        assert list(node.client().scan_iter(match="xs:*")) == []
    assert oc.info("ratelimit")[field] == calls_before
    # With one hash tag the same call runs.
    tagged = [2, "{xs}:alpha", "{xs}:beta", *args[3:]]
    assert rc.execute_command(command, *tagged)[:2] == [0, 1]


def test_all_command_getkeys_info_docs(cluster):
    """RL.ALL and RL.ALLPEEK declare their keys as EVAL does: one key-count
    spec (numkeys at index 1, keys from index 2), so COMMAND GETKEYS and
    redis-py's router see every key."""
    c = cluster.nodes[0].client()
    router = cluster.client()
    for name, flag, key_flag in (("rl.all", "write", "RW"), ("rl.allpeek", "readonly", "RO")):
        rest = ["*", "CHECK", 1, 5, 1000, "THROTTLE", 3, 5, 1, 1000, "QUOTA", 2, "UTC", "DAY", 5]
        keys = ["{t}a", "{t}b", "{t}c"]
        assert decode(c.execute_command("COMMAND GETKEYS", name.upper(), 3, *keys, *rest)) == keys
        got = decode(c.execute_command("COMMAND GETKEYSANDFLAGS", name, 3, *keys, *rest))
        assert [k for k, _ in got] == keys and all(key_flag in kf for _, kf in got), got
        (info,) = decode(c.execute_command("COMMAND INFO", name))
        assert info[1] == -5 and flag in info[2] and "movablekeys" in info[2], info
        assert "fast" not in info[2]
        (spec,) = [pairs(x) for x in info[8]]
        assert key_flag in spec["flags"]
        assert pairs(spec["begin_search"]) == {"type": "index", "spec": ["index", 1]}
        assert pairs(spec["find_keys"]) == {
            "type": "keynum", "spec": ["keynumidx", 0, "firstkey", 1, "keystep", 1]}
        doc = pairs(decode(c.execute_command("COMMAND DOCS", name))[1])
        assert doc["module"] == "ratelimit" and doc["summary"] and doc["complexity"]
        assert router.commands_parser.get_keys(router, name.upper(), 3, *keys, *rest) == keys
    router.close()


def test_key_sent_to_wrong_node_is_moved(cluster):
    key = "mv:key"
    c0 = cluster.nodes[0].client()
    slot = int(c0.execute_command("CLUSTER KEYSLOT", key))
    owner = cluster.slot_owner(slot)
    other = next(n for n in cluster.nodes if n is not owner).client()
    for args in (("RL.CHECK", key, "*", 1, 1000), ("RL.PEEK", key, "*", 1, 1000),
                 ("RL.DAYHOUR", key, "{mv:key}x", 1, 1, 1000, 1000),
                 ("RL.LOCKCOUNT", key, "{mv:key}x", 1000, 1, 1000),
                 ("RL.THROTTLE", key, "*", 1, 1, 1000), ("RL.THROTTLEPEEK", key, "*", 1, 1, 1000),
                 ("RL.QUOTA", key, "*", "UTC", "DAY", 1), ("RL.QUOTAPEEK", key, "*", "UTC", "DAY", 1),
                 ("RL.LEASE", key, "*", 1, 1000), ("RL.LEASEPEEK", key, "*", 1),
                 ("RL.RELEASE", key, "*", "a"), ("RL.RENEW", key, "*", 1000, "a"),
                 ("RL.ALL", 1, key, "*", "CHECK", 1, 1, 1000),
                 ("RL.ALLPEEK", 2, "{mv:key}x", key, "*", "CHECK", 2, 1, 1000, "LEASE", 1, 1, 1000)):
        with pytest.raises(redis.ResponseError, match=f"^MOVED {slot} 127.0.0.1:{owner.port}$"):
            rl(other, *args)


EXPECTED_COMMANDS = {
    # name: (arity, command flags, key flags per key, sample args after the keys)
    # No `denyoom`: the module applies the OOM rule itself so that refunds
    # run above maxmemory (SPEC "Memory", integration/test_clock_and_memory.py).
    "rl.check": (-5, {"write"}, [{"RW"}], ["*", "5", "1000", "COST", "2"]),
    "rl.peek": (-5, {"readonly"}, [{"RO"}], ["*", "5", "1000", "10", "60000"]),
    "rl.dayhour": (7, {"write"}, [{"RW"}, {"RW"}], ["10", "5", "86400000", "3600000"]),
    "rl.lockcount": (6, {"write"}, [{"RW"}, {"RW"}], ["60000", "3", "120000"]),
    "rl.throttle": (-6, {"write", "fast"}, [{"RW"}], ["*", "5", "1", "1000", "COST", "2"]),
    "rl.throttlepeek": (-6, {"readonly", "fast"}, [{"RO"}], ["*", "5", "1", "1000"]),
    "rl.quota": (-6, {"write", "fast"}, [{"RW"}], ["*", "UTC", "DAY", "5", "COST", "2"]),
    "rl.quotapeek": (-6, {"readonly", "fast"}, [{"RO"}], ["*", "Asia/Shanghai", "HOUR", "5"]),
    "rl.lease": (-5, {"write"}, [{"RW"}], ["*", "3", "60000", "TOKEN", "j1"]),
    "rl.leasepeek": (-4, {"readonly", "fast"}, [{"RO"}], ["*", "3", "COST", "0"]),
    "rl.release": (-4, {"write"}, [{"RW"}], ["*", "j1", "j2"]),
    "rl.renew": (-5, {"write"}, [{"RW"}], ["*", "60000", "j1"]),
}
PEEKS = {"rl.peek", "rl.throttlepeek", "rl.quotapeek", "rl.leasepeek"}


def decode(x):
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, list):
        return [decode(i) for i in x]
    return x


def pairs(flat):
    return dict(zip(flat[::2], flat[1::2]))


@pytest.mark.parametrize("name", sorted(EXPECTED_COMMANDS))
def test_command_getkeys_info_docs(cluster, name):
    arity, flags, key_flags, rest = EXPECTED_COMMANDS[name]
    c = cluster.nodes[0].client()
    keys = ["{t}a", "{t}b"][:len(key_flags)]
    assert decode(c.execute_command("COMMAND GETKEYS", name.upper(), *keys, *rest)) == keys
    got = decode(c.execute_command("COMMAND GETKEYSANDFLAGS", name, *keys, *rest))
    assert [k for k, _ in got] == keys
    for (_, kf), want in zip(got, key_flags):
        assert want <= set(kf), (name, kf)
        assert ({"RO", "RW"} - want).isdisjoint(kf), (name, kf)

    (info,) = decode(c.execute_command("COMMAND INFO", name))
    assert info[0] == name and info[1] == arity
    assert flags <= set(info[2]), info[2]
    assert ("write" in info[2]) == (name not in PEEKS)
    assert info[3:6] == [1, len(key_flags), 1]
    specs = [pairs(spec) for spec in info[8]]
    assert len(specs) == len(key_flags)
    for i, (spec, want) in enumerate(zip(specs, key_flags)):
        assert want <= set(spec["flags"]), (name, spec)
        assert ({"RO", "RW"} - want).isdisjoint(spec["flags"])
        assert pairs(spec["begin_search"]) == {"type": "index", "spec": ["index", i + 1]}
        assert pairs(spec["find_keys"])["type"] == "range"

    docs = decode(c.execute_command("COMMAND DOCS", name))
    assert docs[0] == name
    doc = pairs(docs[1])
    assert doc["group"] == "module" and doc["module"] == "ratelimit"
    assert doc["summary"] and doc["complexity"]
    # redis-py's cluster router reads the same table.
    router = cluster.client()
    assert router.commands_parser.get_keys(router, name.upper(), *keys, *rest) == keys
    router.close()


def test_cluster_replica_peeks_after_readonly(cluster, rc):
    primary = cluster.nodes[0]
    replica = cluster.replicas[0] if cluster.replicas else cluster.add_replica(primary)
    c0 = primary.client()
    key = next(k for k in (f"rp:{i}" for i in range(1000))
               if cluster.slot_owner(int(c0.execute_command("CLUSTER KEYSLOT", k))) is primary)
    t = server_ms(c0)
    for i in range(3):
        assert rc.execute_command("RL.CHECK", key, t + i, 3, H)[0] == 0
    wait_in_sync(primary, replica)
    on_primary = rl(c0, "RL.PEEK", key, t + 5, 3, H)
    assert on_primary[:4] == [1, 1, 3, 0]

    plain = replica.client()
    with pytest.raises(redis.ResponseError, match="^MOVED"):
        rl(plain, "RL.PEEK", key, t + 5, 3, H)
    ro = replica.client(single_connection_client=True)
    assert ro.execute_command("READONLY") in (b"OK", "OK", True)
    assert rl(ro, "RL.PEEK", key, t + 5, 3, H) == on_primary
    # Writes go to the primary even after READONLY.
    with pytest.raises(redis.ResponseError, match="^MOVED"):
        rl(ro, "RL.CHECK", key, t + 5, 10, H)
    ro.close()
    assert c0.zcard(key) == 3


def test_plain_replica_runs_peek_and_refuses_writes():
    with Server(args=PRIMARY_ARGS) as primary:
        replica = start_replica(primary)
        try:
            pc, rc_ = primary.client(), replica.client()
            t = server_ms(pc)
            assert [rl(pc, "RL.CHECK", "pr:k", t, 2, H)[0] for _ in range(2)] == [0, 0]
            assert rl(pc, "RL.DAYHOUR", "pr:d", "pr:h", 5, 5, 86_400_000, H) == [1, 1]
            wait_in_sync(primary, replica)
            before = keyspace(rc_)
            assert rl(rc_, "RL.PEEK", "pr:k", t, 2, H) == rl(pc, "RL.PEEK", "pr:k", t, 2, H) == \
                [1, 1, 2, 0, H, H]
            assert rl(rc_, "RL.PEEK", "pr:new", t, 2, H)[:4] == [0, 1, 2, 1]
            allpeek = ("RL.ALLPEEK", 2, "pr:k", "pr:new", t, "CHECK", 1, 2, H, "LEASE", 2, 3, H, "COST", 0)
            assert rl(rc_, *allpeek) == rl(pc, *allpeek) == [1, 1, 1, 2, 0, H, H]
            for args in (("RL.CHECK", "pr:new", "*", 2, H),
                         ("RL.ALL", 1, "pr:new", "*", "CHECK", 1, 2, H),
                         ("RL.DAYHOUR", "pr:d", "pr:h", 5, 5, 86_400_000, H),
                         ("RL.LOCKCOUNT", "pr:l", "pr:c", 1000, 1, 1000)):
                with pytest.raises(redis.exceptions.ReadOnlyError):
                    rl(rc_, *args)
            assert keyspace(rc_) == before
        finally:
            replica.stop()

