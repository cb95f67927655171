"""At first use the client checks the module is loaded and says so in one error."""

from __future__ import annotations

from datetime import timedelta

import pytest

from redis_rl import AsyncRateLimiter, ModuleNotLoadedError, RateLimiter
from servers import Server


def test_missing_module_is_one_clear_error():
    with Server(module=False) as s:
        rl = RateLimiter(s.client())
        with pytest.raises(ModuleNotLoadedError, match="--loadmodule"):
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
