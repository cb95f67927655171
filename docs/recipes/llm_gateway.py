"""LLM gateway. Per API key: 60 requests a minute with bursts of 10, at most 2
in flight, 100,000 tokens a day in the caller's time zone; across every key:
1,000 requests a minute. One RL.ALL decides the four limits (a refusal
charges none of them) and, with DETAILS, gives every limit's state for the
RateLimit headers; the model runs holding a lease; the `finally` gives the
lease back and settles the token estimate to what the model used — 0 when
it raised — whatever happened."""

import uuid

from rate_limit_headers import rate_limit_headers

# (name, q, w in seconds; None for the in-flight limit), in the call's rule order.
LIMITS = [("rate", 60, 60), ("tokens", 100_000, 86_400), ("inflight", 2, None), ("global", 1_000, 60)]


def llm_keys(api_key, cluster=False):
    # Under Cluster every key of one RL.ALL must be in one hash slot, and the
    # global budget is one key decided with every caller's limits: so every
    # key carries the same hash tag, {llm} (this endpoint's limits then live
    # on one node; the names are those of the Python package's policy).
    # Standalone, the names are free.
    tag = "{llm}:" if cluster else ""
    return (f"llm:{tag}{api_key}:rate", f"llm:{tag}{api_key}:tokens",
            f"llm:{tag}{api_key}:inflight", f"llm:{tag}global")


def complete(r, api_key, zone, max_tokens, model, cluster=False):
    """`model(max_tokens)` returns the tokens it used, or raises.
    Returns (HTTP status, headers, tokens used)."""
    rate, tokens, inflight, everyone = llm_keys(api_key, cluster)
    day = (zone, "DAY", 100_000)
    lease = uuid.uuid4().hex
    reply = r.execute_command(
        "RL.ALL", 4, rate, tokens, inflight, everyone, "*",
        "THROTTLE", 1, 10, 60, 60_000,          # 60 a minute, bursts of 10
        "QUOTA", 2, *day, "COST", max_tokens,   # the estimate: at most max_tokens
        "LEASE", 3, 2, 60_000, "TOKEN", lease,  # 2 in flight (a 60 s lease if we crash)
        "CHECK", 4, 1_000, 60_000,              # every key together: 1,000 a minute
        "DETAILS")                              # every limit's state, for the headers
    # RateLimit-Policy and RateLimit on every answer; on a 429, Retry-After:
    # 1 s when the in-flight limit binds (its retry_after is the lease's ttl,
    # a worst case), none when waiting cannot help (max_tokens above the
    # day's budget), else the binding limit's retry_after.
    headers = rate_limit_headers(reply, LIMITS)
    if reply[0] == 1:
        return 429, headers, 0
    used = 0
    try:
        used = model(max_tokens)                # raises: used stays 0
        return 200, headers, used
    finally:                                    # settle and release in one round trip
        settle = r.pipeline(transaction=False)
        if used < max_tokens:                   # give back what the estimate over-charged
            settle.execute_command("RL.QUOTA", tokens, "*", *day, "COST", max_tokens - used, "REFUND")
        elif used > max_tokens:                 # a debit is never refused
            settle.execute_command("RL.QUOTA", tokens, "*", *day, "COST", used - max_tokens, "DEBIT")
        settle.execute_command("RL.RELEASE", inflight, "*", lease)
        settle.execute()
