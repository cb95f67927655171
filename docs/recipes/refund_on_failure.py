def call_ocr(r, user, call_downstream):
    key, rules = f"rl:{{{user}}}:ocr", (10, 60_000, 100, 3_600_000)   # 10 a minute, 100 an hour
    if r.execute_command("RL.CHECK", key, "*", *rules)[0] == 1:
        return 429
    if not call_downstream():                   # could not serve: give the unit back
        r.execute_command("RL.CHECK", key, "*", *rules, "REFUND")
        return 502
    return 200
