def run_ocr_job(r, user, job_id, work, ttl=30_000):
    slots, day = f"ocr:{{{user}}}:running", f"ocr:{{{user}}}:day"
    if r.execute_command("RL.LEASE", slots, "*", 3, ttl, "TOKEN", job_id)[0] == 1:
        return 429                              # 3 running: answer Retry-After: 1 (a slot frees when a job ends)
    try:
        if r.execute_command("RL.QUOTA", day, "*", "Asia/Shanghai", "DAY", 100)[0] == 1:
            return 429                          # 100 today
        def heartbeat():                        # every ttl/3 while working
            return r.execute_command("RL.RENEW", slots, "*", ttl, job_id)[0] > 0
        return 200 if work(heartbeat) else 500  # heartbeat() False: the lease is lost, stop
    finally:
        r.execute_command("RL.RELEASE", slots, "*", job_id)
