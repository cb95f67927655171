package dev.redisratelimit.client;

import java.util.List;
import java.util.Objects;

/**
 * RL.ALL / RL.ALLPEEK's reply: the binding clause ({@link #clause()},
 * 1-based) and its binding rule's state, and, when asked with
 * {@code DETAILS}, every clause's every rule state ({@link #details()}: one
 * list per clause in clause order, one {@link RuleState} per rule in the
 * clause's order).
 */
public final class AllDecision extends Decision {

    private final int clause;
    private final List<List<RuleState>> details;

    AllDecision(boolean limited, int clause, int rule, long limit, long remaining, long retryAfterMillis, long resetAfterMillis,
            List<List<RuleState>> details) {
        super(limited, rule, limit, remaining, retryAfterMillis, resetAfterMillis);
        this.clause = clause;
        this.details = details;
    }

    public int clause() {
        return clause;
    }

    /** True when the reply carried DETAILS. */
    public boolean hasDetails() {
        return details != null;
    }

    /** Per clause, per rule; an empty list when DETAILS was not asked. */
    public List<List<RuleState>> details() {
        return details == null ? List.of() : details;
    }

    @Override
    public boolean equals(Object o) {
        return super.equals(o) && clause == ((AllDecision) o).clause && Objects.equals(details, ((AllDecision) o).details);
    }

    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), clause, details);
    }

    @Override
    String extra() {
        return ", clause=" + clause + (details == null ? "" : ", details=" + details);
    }
}
