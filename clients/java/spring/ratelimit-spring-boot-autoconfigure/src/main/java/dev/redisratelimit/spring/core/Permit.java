package dev.redisratelimit.spring.core;

import java.util.List;
import java.util.Map;

/**
 * What an admitted call holds until it ends: its leases and its estimates.
 * {@link #close(Map)} — on return, on exception, on a client that went away —
 * releases every lease and settles every estimate to the usage reported (by
 * clause index; none reported: 0, a full refund), in one pipelined burst;
 * {@link #closeAsync(Map)} does the same without waiting for the replies.
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
    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

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

    /** Releases and settles, waiting for the replies at most the decision budget; idempotent. */
    public void close(Map<Integer, Long> usedByClause) {
        closeAsync(usedByClause).toCompletableFuture().join();
    }

    /**
     * Releases and settles without waiting: the stage completes (never
     * exceptionally) when the replies are in or the decision budget has
     * passed. Idempotent: only the first close sends anything.
     */
    public java.util.concurrent.CompletionStage<Void> closeAsync(Map<Integer, Long> usedByClause) {
        if (!closed.compareAndSet(false, true)) {
            return java.util.concurrent.CompletableFuture.completedFuture(null);
        }
        return limiter.finish(this, usedByClause == null ? Map.of() : usedByClause);
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
