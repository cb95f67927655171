from datetime import timedelta


def login(limiter, r, user, password_ok, n=5):  # limiter = redis_rl.RateLimiter(r)
    lock, count = f"login:{{{user}}}:lock", f"login:{{{user}}}:fails"
    d = limiter.lockcount(lock, count, timedelta(minutes=15), n, timedelta(minutes=30))
    if d.limited:                               # 1. counted before trying; locked, or the n+1-th
        return "locked"
    if password_ok:
        r.delete(count)                         # 2. success: forget the failures
        return "ok"
    return "bad password"                       # 3. failure: it stays counted
