"""The two apps the HTTP benchmark compares: the same FastAPI endpoint guarded
by redis_rl (one RL.CHECK per request) and by slowapi with limits' Redis
storage (its moving window, the sliding-window log it offers). Both key on
the client IP and allow far more than the load sends, so every request is
admitted and both do their full work. BENCH_REDIS_PORT names the server."""

from __future__ import annotations

import os
from datetime import timedelta

import redis.asyncio
from fastapi import Depends, FastAPI, Request
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address

from redis_rl import AsyncRateLimiter, Policy, sliding_window
from redis_rl.adapters.starlette import RateLimits

PORT = int(os.environ.get("BENCH_REDIS_PORT", "6379"))
LIMIT = 10_000_000

# redis_rl
limits = RateLimits(AsyncRateLimiter(redis.asyncio.Redis(host="127.0.0.1", port=PORT, max_connections=64)))
policy = Policy("bench", [sliding_window("minute", LIMIT, timedelta(minutes=1))], prefix="rlbench:")
package_app = FastAPI()
limits.install(package_app)


@package_app.get("/ping", dependencies=[Depends(limits.depends(policy, key=limits.client_ip))])
async def package_ping() -> dict[str, bool]:
    return {"ok": True}


# slowapi + limits (Redis storage)
limiter = Limiter(key_func=get_remote_address, storage_uri=f"redis://127.0.0.1:{PORT}", strategy="moving-window",
                  key_prefix="slowbench")
slowapi_app = FastAPI()
slowapi_app.state.limiter = limiter
slowapi_app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)


@slowapi_app.get("/ping")
@limiter.limit(f"{LIMIT}/minute")
async def slowapi_ping(request: Request) -> dict[str, bool]:
    return {"ok": True}
