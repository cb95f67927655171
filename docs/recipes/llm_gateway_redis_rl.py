from datetime import timedelta

from redis_rl import Policy, RateLimitExceeded, concurrency, quota, sliding_window, token_bucket
from redis_rl.http import rate_limit_headers, refusal

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
    """Returns (HTTP status, headers, tokens used), as llm_gateway.complete does."""
    try:
        with limiter.acquire(LLM, api_key, estimate=max_tokens, zone=zone) as permit:
            used = model(max_tokens)        # raises: the scope settles to 0 and releases
            permit.used(used)
            return 200, dict(rate_limit_headers(permit.decision)), used
    except RateLimitExceeded as refused:    # Retry-After: 1 s when "inflight" binds, none when waiting cannot help
        status, headers, _problem_json = refusal(refused.decision)
        return status, dict(headers), 0
