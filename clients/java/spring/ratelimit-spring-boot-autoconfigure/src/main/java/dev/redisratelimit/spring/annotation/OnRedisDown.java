package dev.redisratelimit.spring.annotation;

/** What a policy does while Redis is slow or down (no answer within the decision budget). */
public enum OnRedisDown {
    /** Use ratelimit.on-redis-down. */
    DEFAULT,
    /** The call proceeds, with no rate-limit headers. */
    FAIL_OPEN,
    /** 503 Service Unavailable (problem+json). */
    FAIL_CLOSED,
    /** An in-memory limiter per instance with the same limits (each instance alone). */
    LOCAL
}
