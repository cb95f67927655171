"""IETF RateLimit-Policy / RateLimit headers (draft-ietf-httpapi-ratelimit-headers)
for every limit of one RL.ALL call, from its DETAILS reply, and Retry-After."""

import math

INFLIGHT_RETRY_AFTER_S = 1


def rate_limit_headers(reply, limits):
    """`reply`: RL.ALL ... DETAILS. `limits`: (name, q, w in seconds or None
    for an in-flight limit) per rule, in the order DETAILS lists them (clause
    by clause, each clause's rules in the order it gives them)."""
    clauses = reply[7:]                         # after the seven integers: one array per clause
    rules = [rule for clause in clauses for rule in clause]
    policy = ", ".join(f'"{name}";q={q}' + (f";w={w}" if w else "") for name, q, w in limits)
    state = ", ".join(f'"{name}";r={rule[3]};t={math.ceil(rule[5] / 1000)}'
                      for (name, _, _), rule in zip(limits, rules))
    headers = {"RateLimit-Policy": policy, "RateLimit": state}
    if reply[0] == 1:                           # 429: Retry-After from the binding rule
        clause, rule = reply[1], reply[2]
        binding = sum(len(c) for c in clauses[:clause - 1]) + rule - 1
        if limits[binding][2] is None:          # an in-flight limit: a slot frees when a request ends
            headers["Retry-After"] = str(INFLIGHT_RETRY_AFTER_S)
        elif reply[5] != -1:                    # -1: waiting cannot help, no Retry-After
            headers["Retry-After"] = str(math.ceil(reply[5] / 1000))
    return headers


def token_bucket_headers(reply, name, count, window_ms):
    """One RL.THROTTLE rule of `count` per `window_ms` (any burst): q and w
    are the rate, r what can pass at once now (up to the burst), t the
    seconds until the bucket is full again."""
    headers = {"RateLimit-Policy": f'"{name}";q={count};w={window_ms // 1000}',
               "RateLimit": f'"{name}";r={reply[3]};t={math.ceil(reply[5] / 1000)}'}
    if reply[0] == 1:
        headers["Retry-After"] = str(math.ceil(reply[4] / 1000))
    return headers
