package dev.redisratelimit.client;

import java.util.Objects;
import java.util.Optional;

/** RL.LEASE's reply: the six fields and the lease's token (empty when refused). */
public final class LeaseDecision extends Decision {

    private final String token;

    LeaseDecision(boolean limited, int rule, long limit, long remaining, long retryAfterMillis, long resetAfterMillis, String token) {
        super(limited, rule, limit, remaining, retryAfterMillis, resetAfterMillis);
        this.token = token;
    }

    /** The lease's name, to release or renew it; empty when refused. */
    public Optional<String> token() {
        return Optional.ofNullable(token);
    }

    @Override
    public boolean equals(Object o) {
        return super.equals(o) && Objects.equals(token, ((LeaseDecision) o).token);
    }

    @Override
    public int hashCode() {
        return 31 * super.hashCode() + Objects.hashCode(token);
    }

    @Override
    String extra() {
        return ", token=" + token;
    }
}
