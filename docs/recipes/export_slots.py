def start_export(r, user, job_id):
    rate, slots = f"exp:{{{user}}}:rate", f"exp:{{{user}}}:running"
    reply = r.execute_command(
        "RL.ALL", 2, rate, slots, "*",
        "THROTTLE", 1, 60, 60, 60_000,          # 60 a minute, all at once if need be
        "LEASE", 2, 2, 300_000, "TOKEN", job_id)  # 2 in flight; a retry finds its own lease
    if reply[0] == 1:
        return 429, reply[5]                    # retry_after in ms; reply[1]: 1 the rate, 2 the slots
    return 200, 0                               # RL.RELEASE slots when the export ends
