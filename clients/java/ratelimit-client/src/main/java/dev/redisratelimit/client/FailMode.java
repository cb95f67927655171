package dev.redisratelimit.client;

/** What a policy's decision does while Redis cannot decide (no answer within the decision budget, circuit open). */
public enum FailMode {
    /** The call proceeds, without a decision (no rate-limit headers). */
    OPEN,
    /** The call is refused: {@link RateLimitUnavailableException} (HTTP 503). */
    CLOSED,
    /** An in-memory limiter per instance with the same limits (each instance alone: a floor, not the shared limit). */
    LOCAL
}
