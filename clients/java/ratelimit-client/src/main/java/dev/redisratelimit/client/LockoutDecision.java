package dev.redisratelimit.client;

import java.time.Duration;
import java.util.Optional;

/**
 * RL.LOCKCOUNT's reply {@code [limited, count, ttl]}: admitted, the count
 * after this call and the ms until the count expires; refused (locked), the
 * count and the ms until the lock lifts (-1 for a lock without expiry).
 */
public record LockoutDecision(boolean limited, long count, long ttlMillis) {

    public boolean admitted() {
        return !limited;
    }

    /** The ms in the reply as a duration; empty for -1 (a lock key without expiry). */
    public Optional<Duration> ttl() {
        return ttlMillis < 0 ? Optional.empty() : Optional.of(Duration.ofMillis(ttlMillis));
    }

    /** Locked: how long until the lock lifts (empty when it never does or when admitted). */
    public Optional<Duration> retryAfter() {
        return limited ? ttl() : Optional.empty();
    }
}
