package dev.redisratelimit.spring.annotation;

import dev.redisratelimit.client.Limit;

/** The limiter behind a named limit, and the RL command that decides it (the core's {@link Limit.Kind}). */
public enum LimitType {
    /** Sliding-window log: RL.CHECK (a CHECK clause of RL.ALL). */
    SLIDING_WINDOW(Limit.Kind.SLIDING_WINDOW),
    /** GCRA token bucket: RL.THROTTLE (a THROTTLE clause). */
    TOKEN_BUCKET(Limit.Kind.TOKEN_BUCKET),
    /** Calendar quota in a zone: RL.QUOTA (a QUOTA clause). */
    QUOTA(Limit.Kind.QUOTA),
    /** In-flight limit with leases: RL.LEASE (a LEASE clause), released after the call. */
    CONCURRENCY(Limit.Kind.CONCURRENCY),
    /** Count, then lock out: RL.LOCKCOUNT (alone in its policy). */
    LOCKOUT(Limit.Kind.LOCKOUT);

    private final Limit.Kind kind;

    LimitType(Limit.Kind kind) {
        this.kind = kind;
    }

    /** The core's kind. */
    public Limit.Kind kind() {
        return kind;
    }
}
