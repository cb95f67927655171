from datetime import timedelta

from redis_rl import Clause


def sms_clauses(phone, ip):
    return [
        Clause.check(f"sms:phone:{phone}", [(1, timedelta(minutes=1)), (5, timedelta(days=1))]),
        Clause.check(f"sms:ip:{ip}", [(20, timedelta(hours=1))]),
        Clause.quota("sms:global", "UTC", {"day": 10_000}),
    ]


def send_code(limiter, phone, ip, deliver):     # limiter = redis_rl.RateLimiter(redis.Redis())
    d = limiter.all(sms_clauses(phone, ip))
    if d.limited:
        return 429, d.clause                    # which limit: 1 phone, 2 IP, 3 global
    if not deliver(phone):
        limiter.all(sms_clauses(phone, ip), refund=True)
        return 502, 0
    return 200, 0
