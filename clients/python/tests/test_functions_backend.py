"""Backend ``functions`` and ``auto`` on servers without the module: the
library loaded when absent or older, on every Cluster primary, again after
``Function not found``; a user without FUNCTION LOAD told the command to run
by hand; OOM answered as the module answers it; ``auto`` switching when the
module goes missing; ``health()`` naming the backend."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from redis_rl import (AsyncRateLimiter, LibraryNotLoadedError, Policy, RateLimiter, RateLimitError, quota,
                      sliding_window, token_bucket)
from redis_rl import commands
from redis_rl.backend import library, version_of
from servers import Cluster, Server, redis_cli

ROOT = Path(__file__).resolve().parents[3]
S = timedelta(seconds=1)
policy = Policy("fn", [sliding_window("w", 2, 60 * S), token_bucket("b", 10, 60 * S, burst=5),
                       quota("q", "Asia/Shanghai", "day", 100)])


@pytest.fixture(scope="module")
def bare():
    with Server(module=False) as s:
        yield s


@pytest.fixture
def c(bare):
    client = bare.client()
    client.function_flush()
    yield client
    client.close()


def calls(client, name: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{name}", {}).get("calls", 0))


def test_the_package_carries_the_repository_library_byte_for_byte():
    assert library().encode() == (ROOT / "functions" / "ratelimit.lua").read_bytes()


def test_functions_loads_the_library_and_decides_with_fcall(c):
    rl = RateLimiter(c, backend="functions")
    rl.ensure_module()
    assert int(c.fcall("rl_version", 0)) == version_of(library())
    before = calls(c, "fcall")
    got = [rl.decide(policy, "u1").limited for _ in range(3)]
    assert got == [False, False, True]  # the window's 2, then refused
    assert calls(c, "fcall") - before == 3  # one FCALL per decision
    assert rl.health() == {"status": "UP", "backend": "functions"}
    # the keys are the module's: a sorted set, a hash, a hash
    assert {c.type(k).decode() for k in c.keys("fn:*")} == {"zset", "hash"}


def test_an_older_library_is_replaced_a_newer_one_kept(c):
    older = re.sub(r"^(local\s+(?:RL_)?VERSION\s*=\s*)\d+", r"\g<1>1", library(), flags=re.M)
    c.function_load(older, replace=True)
    RateLimiter(c, backend="functions").ensure_module()
    assert int(c.fcall("rl_version", 0)) == version_of(library())
    newer = re.sub(r"^(local\s+(?:RL_)?VERSION\s*=\s*)\d+", r"\g<1>999999", library(), flags=re.M)
    c.function_load(newer, replace=True)
    RateLimiter(c, backend="functions").ensure_module()
    assert int(c.fcall("rl_version", 0)) == 999999  # another app's newer client loaded it: kept


def test_function_not_found_loads_it_again_and_retries_once(c):
    rl = RateLimiter(c, backend="functions")
    rl.ensure_module()
    c.function_flush()  # a flush, or a failover to a primary that never had it
    assert rl.check("fnf", [(5, 60000)]).remaining == 4
    assert int(c.fcall("rl_version", 0)) == version_of(library())
    c.function_flush()
    assert rl.run_many([commands.check("fnf2", [(5, 60000)])])[0].remaining == 4  # pipelined calls too


def test_a_user_without_function_load_is_told_the_command_and_then_uses_a_hand_loaded_library(bare, c):
    c.acl_setuser("app", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-function|load"])
    app = bare.client(username="app", password="pw")
    try:
        with pytest.raises(LibraryNotLoadedError) as e:
            RateLimiter(app, backend="functions").ensure_module()
        assert "FUNCTION LOAD REPLACE <" in str(e.value) and "redis-cli" in str(e.value)
        path = str(e.value).split("< ", 1)[1].split("`", 1)[0]
        c.function_load(Path(path).read_text(), replace=True)  # what the operator runs, as an admin
        rl = RateLimiter(app, backend="functions")
        rl.ensure_module()
        assert rl.decide(policy, "acl").limited is False
    finally:
        app.close()
        c.acl_deluser("app")


def test_oom_is_the_module_s_error_and_refunds_still_run(c):
    rl = RateLimiter(c, backend="functions")
    rl.ensure_module()
    assert rl.check("oom", [(5, 60000)]).remaining == 4
    c.config_set("maxmemory", 1)
    try:
        with pytest.raises(RateLimitError, match=r"^OOM command not allowed when used memory > 'maxmemory'\.$"):
            rl.check("oom", [(5, 60000)])
        assert rl.check("oom", [(5, 60000)], mode="refund").remaining == 5
    finally:
        c.config_set("maxmemory", 0)


def test_health_says_down_when_the_library_is_gone(c):
    rl = RateLimiter(c, backend="functions")
    rl.ensure_module()
    c.function_flush()
    h = rl.health()
    assert h["status"] == "DOWN" and h["backend"] == "functions" and "Functions library is not loaded" in h["detail"]


def test_auto_takes_the_library_where_no_module_is(c):
    rl = RateLimiter(c, backend="auto")
    rl.ensure_module()
    assert rl.backend == "functions"
    assert rl.decide(policy, "auto").limited is False


def test_auto_switches_when_the_module_goes_missing_at_run_time():
    with Server(args=["--enable-module-command", "yes"]) as s:
        c = s.client()
        rl = RateLimiter(c, backend="auto")
        rl.ensure_module()
        assert rl.backend == "module"
        assert rl.check("sw", [(5, 60000)]).remaining == 4
        c.execute_command("MODULE", "UNLOAD", "ratelimit")  # as a failover to a server without it
        assert rl.check("sw", [(5, 60000)]).remaining == 3  # the same key, counted on by the library
        assert rl.backend == "functions"
        assert rl.health() == {"status": "UP", "backend": "functions"}
        c.close()


@pytest.mark.skipif(redis_cli() is None, reason="redis-cli is needed to create a cluster")
def test_cluster_every_primary_gets_the_library():
    with Cluster(3, module=False) as cl:
        seeds = [redis.cluster.ClusterNode("127.0.0.1", n.port) for n in cl.nodes]
        rc = redis.cluster.RedisCluster(startup_nodes=seeds)
        try:
            rl = RateLimiter(rc, backend="functions")
            rl.ensure_module()
            for n in cl.nodes:
                nc = n.client()
                assert int(nc.fcall("rl_version", 0)) == version_of(library())
                nc.function_flush()  # gone again: each node reloads on its first call
                nc.close()
            for i in range(30):  # keys on every primary
                assert rl.decide(policy, f"user{i}").limited is False
            for n in cl.nodes:
                nc = n.client()
                assert int(nc.fcall("rl_version", 0)) == version_of(library())
                assert int(nc.info("errorstats").get("errorstat_MOVED", {}).get("count", 0)) == 0
                nc.close()
            assert rl.health()["status"] == "UP"
        finally:
            rc.close()


@pytest.mark.anyio
@pytest.mark.skipif(redis_cli() is None, reason="redis-cli is needed to create a cluster")
async def test_async_cluster_functions_and_health():
    with Cluster(3, module=False) as cl:
        rc = AsyncRedisCluster(host="127.0.0.1", port=cl.nodes[0].port)
        try:
            rl = AsyncRateLimiter(rc, backend="auto")
            await rl.ensure_module()
            assert rl.backend == "functions"
            for i in range(10):
                assert (await rl.decide(policy, f"a{i}")).limited is False
            assert await rl.health() == {"status": "UP", "backend": "functions"}
        finally:
            await rc.aclose()
