def call_vendor(r, send, cancel, max_wait_ms=5_000):    # cancel: a threading.Event
    key, rule = "vendor:{acme}", (1, 10, 1000)           # 10 a second, no burst
    limited, _, _, _, delay_ms, _ = r.execute_command(
        "RL.THROTTLE", key, "*", *rule, "RESERVE", max_wait_ms)
    if limited:
        return "busy"                           # the wait would exceed max_wait_ms
    if cancel.wait(delay_ms / 1000):            # sleep the delay, unless the caller gives up
        r.execute_command("RL.THROTTLE", key, "*", *rule, "REFUND")  # free the slot
        return "cancelled"
    return send()
