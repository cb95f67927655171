def login(r, user, password_ok, n=5):          # lock on the 5th failure in 15 min, for 30 min
    lock, count = f"login:{{{user}}}:lock", f"login:{{{user}}}:fails"
    if r.exists(lock):                          # 1. check the lock before trying
        return "locked"
    if password_ok:
        r.delete(count)                         # 2. success: forget the failures
        return "ok"
    limited, _, _ = r.execute_command(          # 3. failure: count it; the n-th locks
        "RL.LOCKCOUNT", lock, count, 900_000, n - 1, 1_800_000)
    return "locked" if limited else "bad password"
