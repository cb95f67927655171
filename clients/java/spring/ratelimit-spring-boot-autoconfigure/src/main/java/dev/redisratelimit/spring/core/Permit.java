package dev.redisratelimit.spring.core;

import java.util.List;
import java.util.Map;

/**
 * What an admitted call holds until it ends: its leases and its estimates.
 * {@link #close(Map)} — on return, on exception, on a client that went away —
 * releases every lease and settles every estimate to the usage reported (by
 * clause index; none reported: 0, a full refund), in one pipelined burst.
 */
public final class Permit {

    /** A lease to release: its key and token. */
    record Lease(String key, String token) {
    }

    /** An estimate charged up front: the clause (its key and rules) to settle with its own command. */
    record Estimate(int clause, dev.redisratelimit.client.Clause command, long charged) {
    }

    private final RateLimiter limiter;
    private final Decision decision;
    private final List<Lease> leases;
    private final List<Estimate> estimates;
    private final List<String> localLeases;
    private boolean closed;

    Permit(RateLimiter limiter, Decision decision, List<Lease> leases, List<Estimate> estimates, List<String> localLeases) {
        this.limiter = limiter;
        this.decision = decision;
        this.leases = leases;
        this.estimates = estimates;
        this.localLeases = localLeases;
    }

    /** The decision, or null when Redis was down and the policy let the call through. */
    public Decision decision() {
        return decision;
    }

    /** True when some clause's estimate is settled from the call's result. */
    public boolean hasEstimates() {
        return !estimates.isEmpty();
    }

    public List<Integer> estimateClauses() {
        return estimates.stream().map(Estimate::clause).toList();
    }

    /** Releases and settles; idempotent. */
    public synchronized void close(Map<Integer, Long> usedByClause) {
        if (closed) {
            return;
        }
        closed = true;
        limiter.finish(this, usedByClause == null ? Map.of() : usedByClause);
    }

    List<Lease> leases() {
        return leases;
    }

    List<Estimate> estimates() {
        return estimates;
    }

    List<String> localLeases() {
        return localLeases;
    }
}
