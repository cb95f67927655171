"""Eviction and limits (docs/guides/production.md "Loading in production"). Every limiter key has
a TTL, so `volatile-*` policies evict limiter keys before anything without a
TTL, and `allkeys-*` evict them like any key: an evicted key is an empty
limiter, and the next call is admitted inside its window. Under `noeviction`
a limit holds: above `maxmemory` the module refuses admissions with Redis's
OOM error (never admits), refunds and peeks still run, and once memory is
freed the limiter answers as before. On every server of the matrix
(RL_SERVER)."""

import pytest
import redis

from servers import Server

HOUR = 3_600_000
LIMITERS = 200
FILL = b"x" * 10_000


def limit_everyone(r):
    """One limiter per caller, each at its limit: one unit an hour, used."""
    for i in range(LIMITERS):
        assert r.execute_command("RL.THROTTLE", f"lim{i}", "*", 1, 1, HOUR)[0] == 0
    assert r.execute_command("RL.THROTTLE", "lim0", "*", 1, 1, HOUR)[0] == 1


def fill_past_maxmemory(r, headroom=1_000_000, values=400):
    """Sets `maxmemory` a little above what is used, then writes keys without
    a TTL worth several times the headroom. Returns the OOM refusals seen."""
    r.config_set("maxmemory", int(r.info("memory")["used_memory"]) + headroom)
    refused = 0
    for i in range(values):
        try:
            r.set(f"fill{i}", FILL)
        except redis.exceptions.OutOfMemoryError:
            refused += 1
    return refused


def surviving_limiters(r):
    return sum(r.exists(f"lim{i}") for i in range(LIMITERS))


def test_noeviction_holds_every_limit():
    with Server(args=["--maxmemory-policy", "noeviction"]) as s:
        r = s.client()
        limit_everyone(r)
        assert fill_past_maxmemory(r) > 0, "the fill must reach maxmemory"
        assert int(r.info("stats")["evicted_keys"]) == 0
        assert surviving_limiters(r) == LIMITERS
        # A refused SET frees its own 10 KB argument, which may bring memory
        # back under the limit: hold the server above it for what follows.
        r.config_set("maxmemory", int(r.info("memory")["used_memory"]) - 100_000)
        # Above maxmemory an admission is refused with Redis's error, not
        # admitted; a peek still tells the caller it is limited.
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            r.execute_command("RL.THROTTLE", "lim0", "*", 1, 1, HOUR)
        assert r.execute_command("RL.THROTTLEPEEK", "lim0", "*", 1, 1, HOUR)[0] == 1
        # A refund only shrinks state: it runs above maxmemory.
        r.execute_command("RL.THROTTLE", "lim1", "*", 1, 1, HOUR, "REFUND")
        assert not r.exists("lim1")
        # Memory back under the limit: every other limit is still in force.
        r.config_set("maxmemory", 0)
        for i in (0, 2, 100, LIMITERS - 1):
            assert r.execute_command("RL.THROTTLE", f"lim{i}", "*", 1, 1, HOUR)[0] == 1, i
        assert r.execute_command("RL.THROTTLE", "lim1", "*", 1, 1, HOUR)[0] == 0


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru"])
def test_evicting_policies_empty_limiters(policy):
    """The risk the README warns about: an evicting policy deletes limiter
    keys, and an evicted limiter admits again inside its hour. Under
    `volatile-lru` only keys with a TTL can go — the limiters, never the
    fill."""
    with Server(args=["--maxmemory-policy", policy, "--maxmemory-samples", "10"]) as s:
        r = s.client()
        limit_everyone(r)
        fill_past_maxmemory(r)
        evicted = [i for i in range(LIMITERS) if not r.exists(f"lim{i}")]
        assert int(r.info("stats")["evicted_keys"]) > 0
        assert evicted, "an evicting policy must have taken limiter keys"
        if policy == "volatile-lru":
            assert all(r.exists(f"fill{i}") for i in range(50)), "keys without a TTL are never evicted"
        r.config_set("maxmemory", 0)
        # The evicted limiter is empty: the caller gets a second unit in the hour.
        assert r.execute_command("RL.THROTTLE", f"lim{evicted[0]}", "*", 1, 1, HOUR)[0] == 0
