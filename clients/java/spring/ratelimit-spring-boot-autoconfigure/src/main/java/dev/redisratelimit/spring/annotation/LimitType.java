package dev.redisratelimit.spring.annotation;

/** The limiter behind a named limit, and the RL command that decides it. */
public enum LimitType {
    /** Sliding-window log: RL.CHECK (a CHECK clause of RL.ALL). */
    SLIDING_WINDOW,
    /** GCRA token bucket: RL.THROTTLE (a THROTTLE clause). */
    TOKEN_BUCKET,
    /** Calendar quota in a zone: RL.QUOTA (a QUOTA clause). */
    QUOTA,
    /** In-flight limit with leases: RL.LEASE (a LEASE clause), released after the call. */
    CONCURRENCY,
    /** Count, then lock out: RL.LOCKCOUNT (alone in its policy). */
    LOCKOUT
}
