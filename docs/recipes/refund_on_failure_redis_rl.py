from datetime import timedelta

OCR_RULES = [(10, timedelta(minutes=1)), (100, timedelta(hours=1))]


def call_ocr(limiter, user, call_downstream):   # limiter = redis_rl.RateLimiter(redis.Redis())
    key = f"rl:{{{user}}}:ocr"
    if limiter.check(key, OCR_RULES).limited:
        return 429
    if not call_downstream():                   # could not serve: give the unit back
        limiter.check(key, OCR_RULES, mode="refund")
        return 502
    return 200
