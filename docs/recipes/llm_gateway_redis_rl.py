from datetime import timedelta

from redis_rl import Policy, RateLimitExceeded, concurrency, quota, sliding_window, token_bucket

# The same four limits as llm_gateway.py, as a policy of the Python package.
# tag="llm": every key under {llm} (one slot, also under Cluster), the
# global limit shared by every API key (llm:{llm}:global).
LLM = Policy("llm", [
    token_bucket("rate", 60, timedelta(minutes=1), burst=10),
    quota("tokens", None, "day", 100_000, metered=True),  # zone per call; the estimate, settled to permit.used(n)
    concurrency("inflight", 2, timedelta(seconds=60)),
    sliding_window("global", 1_000, timedelta(minutes=1), shared=True),
], tag="llm")


def complete(limiter, api_key, zone, max_tokens, model):  # limiter = redis_rl.RateLimiter(redis.Redis())
    try:
        with limiter.acquire(LLM, api_key, estimate=max_tokens, zone=zone) as permit:
            used = model(max_tokens)        # raises: the scope settles to 0 and releases
            permit.used(used)
            return 200, None, used
    except RateLimitExceeded as refused:    # retry_after: 1 s when "inflight" binds, None when waiting cannot help
        return 429, refused.decision.retry_after, 0
