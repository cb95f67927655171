"""The wheel from dist/, in a fresh venv: one limit of one call a minute,
decided twice against the server named by REDIS_URL (admitted, then refused)."""
import importlib.metadata
import json
import os
import sys
from datetime import timedelta

import redis
import redis_rl
from redis_rl import RateLimiter

rl = RateLimiter(redis.from_url(os.environ["REDIS_URL"]))
rl.ensure_module()
decisions = [rl.check("consumer:py", [(1, timedelta(minutes=1))]) for _ in range(2)]
json.dump({
    "version": importlib.metadata.version("redis-ratelimit-client"),
    "file": redis_rl.__file__,
    "allowed": [d.allowed for d in decisions],
}, sys.stdout)
