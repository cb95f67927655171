"""At first use the client checks the module is loaded and says so in one error."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis

from redis_rl import AsyncRateLimiter, ModuleNotLoadedError, RateLimiter
from servers import Server


def test_missing_module_is_one_clear_error():
    with Server(module=False) as s:
        rl = RateLimiter(s.client())
        with pytest.raises(ModuleNotLoadedError, match=r'--loadmodule .* or give the limiter backend="functions"'):
            rl.check("k", [(1, timedelta(seconds=1))])
        # The check ran before the command: nothing was sent that could fail otherwise.
        assert s.client().info("commandstats").get("cmdstat_rl.check") is None


@pytest.mark.anyio
async def test_missing_module_async():
    import redis.asyncio
    with Server(module=False) as s:
        client = redis.asyncio.Redis(host="127.0.0.1", port=s.port)
        with pytest.raises(ModuleNotLoadedError):
            await AsyncRateLimiter(client).quota("k", "UTC", {"day": 1})
        await client.aclose()


def test_details_support_is_probed(server):
    rl = RateLimiter(server.client())
    rl.ensure_module()
    from conftest import details_supported
    assert rl.details_supported == details_supported(server.client())


def test_a_probe_the_acl_refuses_does_not_turn_details_off(server):
    """A user whose ACL keys are ~app:* cannot touch the probe's key: the
    probe answers NOPERM, which says nothing about the engine. DETAILS stays
    on (every limit's state for the headers); only an engine that refuses
    the option by name turns it off."""
    from redis_rl import Policy, sliding_window

    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "appuser", "on", ">pw", "resetkeys", "~app:*", "+@all")
    try:
        rl = RateLimiter(server.client(username="appuser", password="pw"))
        p = Policy("acl", [sliding_window("short", 2, timedelta(seconds=10)),
                           sliding_window("dup", 1, timedelta(seconds=5), subkey=True)], prefix="app:")
        d = rl.decide(p, "k", subkeys={"dup": "x"})
        assert rl.details_supported is True
        assert set(d.states) == {"short", "dup"}, d.states
    finally:
        admin.execute_command("ACL", "DELUSER", "appuser")
        admin.close()


def test_an_engine_without_details_is_remembered_and_decided_without():
    """An engine that refuses DETAILS by name (an older build) where the
    probe could not tell (NOPERM): the first decision learns it and is sent
    again without; later ones go without."""
    from redis_rl import Policy, sliding_window

    sent = []

    class OldEngine:
        """A stand-in client: answers RL.ALL as a build without DETAILS does."""

        def execute_command(self, *args, **kw):
            sent.append(args)
            if args[:2] == ("COMMAND INFO", "RL.ALL"):
                return [["rl.all"]]
            if "rl:probe" in args:
                raise redis.exceptions.NoPermissionError("this user has no permissions to access the 'rl:probe' key")
            if args[-1] == "DETAILS":
                raise redis.exceptions.ResponseError(
                    "clause 1 (CHECK): syntax error: unknown option 'DETAILS' (expected COST, REFUND or DEBIT)")
            return [0, 1, 1, 2, 1, -1, 10000]

    rl = RateLimiter.__new__(RateLimiter)
    from redis_rl.client import _Limiter
    _Limiter.__init__(rl, OldEngine())
    p = Policy("old", [sliding_window("short", 2, timedelta(seconds=10)),
                       sliding_window("dup", 1, timedelta(seconds=5), subkey=True)])
    d = rl.decide(p, "k", subkeys={"dup": "x"})
    assert rl.details_supported is False and d.allowed and set(d.states) == {"short"}
    rl.decide(p, "k", subkeys={"dup": "y"})
    all_calls = [a for a in sent if a[0] == "RL.ALL"]
    assert [a[-1] == "DETAILS" for a in all_calls] == [True, False, False], all_calls
