from datetime import timedelta

from redis_rl import Policy, RateLimitExceeded, concurrency, token_bucket

EXPORT = Policy("exp", [
    token_bucket("rate", 60, timedelta(minutes=1)),           # 60 a minute, all at once if need be
    concurrency("running", 2, timedelta(minutes=5)),          # 2 in flight
])


def run_export(limiter, user, export):
    try:
        with limiter.acquire(EXPORT, user):                   # the slot is given back when the block ends
            return 200, export()
    except RateLimitExceeded as refused:                      # "running" binds: retry_after is 1 s
        return 429, refused.decision.retry_after
