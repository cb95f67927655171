def login(r, user, password_ok, n=5):          # 5 failures in 15 min lock for 30 min: the 6th attempt is refused
    lock, count = f"login:{{{user}}}:lock", f"login:{{{user}}}:fails"
    limited, _, _ = r.execute_command(          # 1. count the attempt before trying (atomic: exact under
        "RL.LOCKCOUNT", lock, count, 900_000, n, 1_800_000)  # concurrency); locked, or the n+1-th: refused
    if limited:
        return "locked"
    if password_ok:
        r.delete(count)                         # 2. success: forget the failures
        return "ok"
    return "bad password"                       # 3. failure: it stays counted
