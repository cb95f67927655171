from datetime import timedelta


def run_ocr_job(limiter, user, job_id, work, ttl=timedelta(seconds=30)):  # limiter = redis_rl.RateLimiter(r)
    slots, day = f"ocr:{{{user}}}:running", f"ocr:{{{user}}}:day"
    if limiter.lease(slots, 3, ttl, token=job_id).limited:
        return 429                              # 3 running: answer Retry-After: 1 (a slot frees when a job ends)
    try:
        if limiter.quota(day, "Asia/Shanghai", {"day": 100}).limited:
            return 429                          # 100 today
        def heartbeat():                        # every ttl/3 while working; False: the lease is lost
            return limiter.renew(slots, ttl, job_id)[0] > 0
        return 200 if work(heartbeat) else 500
    finally:
        limiter.release(slots, job_id)
