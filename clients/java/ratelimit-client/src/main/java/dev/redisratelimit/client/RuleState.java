package dev.redisratelimit.client;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/**
 * One rule's state: the six integers of RL.CHECK's reply
 * {@code [limited, rule, limit, remaining, retry_after, reset_after]}.
 * Immutable. {@link #retryAfter()} is empty when the reply says -1: always
 * for an admission (RESERVE aside), and for a refusal that no wait can help
 * ({@link #waitingCannotHelp()}: a quota cost above its limit).
 */
public class RuleState {

    private final boolean limited;
    private final int rule;
    private final long limit;
    private final long remaining;
    private final long retryAfterMillis;
    private final long resetAfterMillis;

    RuleState(boolean limited, int rule, long limit, long remaining, long retryAfterMillis, long resetAfterMillis) {
        this.limited = limited;
        this.rule = rule;
        this.limit = limit;
        this.remaining = remaining;
        this.retryAfterMillis = retryAfterMillis;
        this.resetAfterMillis = resetAfterMillis;
    }

    /** True when refused (or, for a debit, refund or COST 0 peek: over the limit now). */
    public boolean limited() {
        return limited;
    }

    public boolean admitted() {
        return !limited;
    }

    /** The 1-based index of the binding rule. */
    public int rule() {
        return rule;
    }

    public long limit() {
        return limit;
    }

    public long remaining() {
        return remaining;
    }

    /** How long to wait before retrying; empty when the reply says -1. */
    public Optional<Duration> retryAfter() {
        return retryAfterMillis < 0 ? Optional.empty() : Optional.of(Duration.ofMillis(retryAfterMillis));
    }

    /** The raw field: ms, or -1. */
    public long retryAfterMillis() {
        return retryAfterMillis;
    }

    /** Refused, and no wait makes this request fit (retry_after -1). */
    public boolean waitingCannotHelp() {
        return limited && retryAfterMillis < 0;
    }

    public Duration resetAfter() {
        return Duration.ofMillis(resetAfterMillis);
    }

    public long resetAfterMillis() {
        return resetAfterMillis;
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (o == null || o.getClass() != getClass()) {
            return false;
        }
        RuleState that = (RuleState) o;
        return limited == that.limited && rule == that.rule && limit == that.limit && remaining == that.remaining
                && retryAfterMillis == that.retryAfterMillis && resetAfterMillis == that.resetAfterMillis;
    }

    @Override
    public int hashCode() {
        return Objects.hash(limited, rule, limit, remaining, retryAfterMillis, resetAfterMillis);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "[limited=" + limited + ", rule=" + rule + ", limit=" + limit + ", remaining="
                + remaining + ", retryAfterMillis=" + retryAfterMillis + ", resetAfterMillis=" + resetAfterMillis + extra() + "]";
    }

    String extra() {
        return "";
    }
}
