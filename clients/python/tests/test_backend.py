"""The backend setting (module ``redis_rl.backend``): the argv each RL call
becomes on the Functions library, zones as the library takes them, and the
start-up choice and ``health()`` of each backend against real servers."""

from __future__ import annotations

import pytest
import redis

from redis_rl import AsyncRateLimiter, ModuleNotLoadedError, RateLimiter
from redis_rl.backend import backend_arg, fcall, functions_zone
from servers import Server


def test_every_command_maps_to_its_function_keys_first():
    # SPEC.md's own example, then one per key layout and kind of entry point.
    assert fcall(("RL.ALL", 2, "a", "b", "*", "CHECK", 1, 5, 60000, "LEASE", 2, 3, 60000, "TOKEN", "t")) == (
        "FCALL", "rl_all", 2, "a", "b", "*", "CHECK", 1, 5, 60000, "LEASE", 2, 3, 60000, "TOKEN", "t")
    assert fcall(("RL.CHECK", "k", "*", 5, 1000, 10, 60000, "COST", 2)) == (
        "FCALL", "rl_check", 1, "k", "*", 5, 1000, 10, 60000, "COST", 2)
    assert fcall(("RL.DAYHOUR", "d", "h", 20, 5, 86400000, 3600000)) == (
        "FCALL", "rl_dayhour", 2, "d", "h", 20, 5, 86400000, 3600000)
    assert fcall(("RL.LOCKCOUNT", "l", "c", 10000, 5, 30000))[:5] == ("FCALL", "rl_lockcount", 2, "l", "c")
    assert fcall(("RL.RELEASE", "k", "*", "t1", "t2")) == ("FCALL", "rl_release", 1, "k", "*", "t1", "t2")
    assert fcall(("RL.THROTTLE", "k", "*", 10, 60, 60000, "RESERVE", 500))[:2] == ("FCALL", "rl_throttle")
    assert fcall(("DEL", "k1", "k2")) == ("DEL", "k1", "k2")  # not an RL command: unchanged


def test_peeks_go_read_only_and_refunds_through_rl_refund():
    for name in ("RL.PEEK", "RL.THROTTLEPEEK", "RL.LEASEPEEK"):
        assert fcall((name, "k", "*", 1, 1000))[:2] == ("FCALL_RO", "rl_" + name[3:].lower())
    assert fcall(("RL.ALLPEEK", 1, "k", "*", "CHECK", 1, 1, 1000, "DETAILS"))[:3] == ("FCALL_RO", "rl_allpeek", 1)
    assert fcall(("RL.CHECK", "k", "*", 5, 60000, "REFUND")) == (
        "FCALL", "rl_refund", 1, "k", "check", "*", 5, 60000, "REFUND")
    assert fcall(("RL.ALL", 1, "k", "*", "CHECK", 1, 5, 60000, "REFUND", "DETAILS"))[:5] == (
        "FCALL", "rl_refund", 1, "k", "all")
    # a DEBIT is an admission: no allow-oom entry point
    assert fcall(("RL.CHECK", "k", "*", 5, 60000, "DEBIT"))[:2] == ("FCALL", "rl_check")
    # a lease token spelled REFUND is a token, not the option
    assert fcall(("RL.ALL", 1, "k", "*", "LEASE", 1, 2, 60000, "TOKEN", "REFUND", "DETAILS"))[:2] == (
        "FCALL", "rl_all")


def test_zones_fixed_offsets_pass_and_daylight_saving_is_refused():
    assert fcall(("RL.QUOTA", "k", "*", "Asia/Shanghai", "DAY", 20))[5] == "+08:00"
    assert fcall(("RL.QUOTAPEEK", "k", "*", "UTC", "DAY", 20))[5] == "UTC"
    assert functions_zone("Asia/Kathmandu") == "+05:45"
    assert functions_zone("Etc/GMT+3") == "-03:00"  # POSIX sign: three hours behind
    assert functions_zone("-03:30") == "-03:30"
    # in RL.ALL, each QUOTA clause's zone; TOKEN's and COST's values are never a kind
    argv = fcall(("RL.ALL", 2, "a", "b", "*", "LEASE", 1, 2, 60000, "TOKEN", "QUOTA",
                  "QUOTA", 2, "Asia/Tokyo", "DAY", 100, "COST", 5))
    assert argv[11:15] == ("QUOTA", "QUOTA", 2, "+09:00")  # the token kept, the clause's zone mapped
    with pytest.raises(ValueError, match="daylight saving.*Functions library"):
        fcall(("RL.QUOTA", "k", "*", "Europe/Paris", "DAY", 20))
    with pytest.raises(ValueError, match="daylight saving"):
        fcall(("RL.ALL", 1, "k", "*", "QUOTA", 1, "America/New_York", "DAY", 20))


def test_backend_setting_is_checked():
    assert backend_arg("Functions") == "functions"
    with pytest.raises(ValueError, match="backend"):
        backend_arg("lua")
    with pytest.raises(ValueError, match="backend"):
        RateLimiter(redis.Redis(), backend="modules")


def test_auto_picks_the_module_where_it_is_loaded(server):
    c = server.client()
    rl = RateLimiter(c, backend="auto")
    rl.ensure_module()
    assert rl.backend == "module"
    assert rl.health() == {"status": "UP", "backend": "module"}
    c.close()


def test_module_backend_without_the_module_refuses_and_health_says_down():
    with Server(module=False) as bare:
        c = bare.client()
        with pytest.raises(ModuleNotLoadedError, match="module is not loaded"):
            RateLimiter(c).ensure_module()
        h = RateLimiter(c).health()
        assert h["status"] == "DOWN" and h["backend"] == "module" and "module is not loaded" in h["detail"]
        c.close()


@pytest.mark.anyio
async def test_async_health_names_an_unreachable_redis():
    c = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2)
    h = await AsyncRateLimiter(c).health()
    assert h["status"] == "DOWN" and h["backend"] == "module", h
    assert h["detail"].startswith("Redis cannot be reached (") and "connecting" in h["detail"], h
    await c.aclose()


def test_health_of_a_fresh_limiter_runs_the_first_use_check_so_a_new_app_is_up():
    """No decision yet: a readiness probe waiting for UP must get it (functions
    loads the library, auto picks it), as Node's health()."""
    with Server(module=False) as bare:
        c = bare.client()
        assert RateLimiter(c, backend="functions").health() == {"status": "UP", "backend": "functions"}
        c.function_flush()
        assert RateLimiter(c, backend="auto").health() == {"status": "UP", "backend": "functions"}
        c.close()


@pytest.mark.anyio
async def test_async_health_of_a_fresh_limiter_loads_the_library():
    with Server(module=False) as bare:
        c = redis.asyncio.Redis(port=bare.port)
        assert await AsyncRateLimiter(c, backend="functions").health() == {"status": "UP", "backend": "functions"}
        await c.aclose()
