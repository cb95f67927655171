def check_ocr(r, uid):                          # r = redis.Redis(port=6379)
    limited, rule, limit, remaining, retry_ms, reset_ms = r.execute_command(
        "RL.CHECK", f"rl:{{user:{uid}}}:ocr", "*", 10, 60_000, 100, 3_600_000)
    return limited, remaining, retry_ms
