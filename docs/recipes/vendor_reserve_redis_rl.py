from datetime import timedelta

VENDOR = [(1, 10, timedelta(seconds=1))]        # 10 a second, no burst


def call_vendor(limiter, send, cancel, max_wait=timedelta(seconds=5)):
    d = limiter.throttle("vendor:{acme}", VENDOR, reserve=max_wait)
    if d.limited:
        return "busy"                           # the wait would exceed max_wait
    if cancel.wait(d.retry_after.total_seconds()):  # with reserve, retry_after is the delay
        limiter.throttle("vendor:{acme}", VENDOR, mode="refund")  # free the slot
        return "cancelled"
    return send()
