package dev.redisratelimit.spring.annotation;

import dev.redisratelimit.client.FailMode;

/** What a policy does while Redis is slow or down (no answer within the decision budget): the core's {@link FailMode}. */
public enum OnRedisDown {
    /** Use ratelimit.on-redis-down. */
    DEFAULT(null),
    /** The call proceeds, with no rate-limit headers. */
    FAIL_OPEN(FailMode.OPEN),
    /** 503 Service Unavailable (problem+json). */
    FAIL_CLOSED(FailMode.CLOSED),
    /** An in-memory limiter per instance with the same limits (each instance alone). */
    LOCAL(FailMode.LOCAL);

    private final FailMode mode;

    OnRedisDown(FailMode mode) {
        this.mode = mode;
    }

    /** The core's mode; null for {@link #DEFAULT} (the limiter's). */
    public FailMode mode() {
        return mode;
    }

    /** The constant naming {@code mode} (null: {@link #DEFAULT}). */
    public static OnRedisDown of(FailMode mode) {
        for (OnRedisDown d : values()) {
            if (d.mode == mode) {
                return d;
            }
        }
        return DEFAULT;
    }
}
