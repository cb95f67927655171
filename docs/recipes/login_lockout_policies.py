from datetime import timedelta

from redis_rl import Policy, RateLimitExceeded, lockout

# n = 5 in both, as RL.LOCKCOUNT's max: 5 failures, then the 6th attempt is refused.
every_attempt = Policy("login-lock", [lockout("login", 5, timedelta(minutes=15), timedelta(minutes=30))])
failures_only = Policy("login-fails", "5 per 15 minutes", counts="failures")


def login(limiter, policy, user, password_ok):  # limiter = redis_rl.RateLimiter(r)
    try:
        with limiter.acquire(policy, user) as permit:
            if not password_ok:
                permit.failed()                 # failures_only: it stays counted (a success is refunded)
                return "bad password"
            return "ok"
    except RateLimitExceeded:
        return "locked"
