from datetime import timedelta


def login(limiter, r, user, password_ok, n=5):  # limiter = redis_rl.RateLimiter(r)
    lock, count = f"login:{{{user}}}:lock", f"login:{{{user}}}:fails"
    if r.exists(lock):                          # 1. check the lock before trying
        return "locked"
    if password_ok:
        r.delete(count)                         # 2. success: forget the failures
        return "ok"
    d = limiter.lockcount(lock, count, timedelta(minutes=15), n - 1, timedelta(minutes=30))
    return "locked" if d.limited else "bad password"  # 3. failure counted; the n-th locks
