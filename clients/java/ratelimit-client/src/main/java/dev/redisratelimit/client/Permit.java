package dev.redisratelimit.client;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * What an admitted call holds until it ends: its leases and its estimates.
 * Closing it — try-with-resources, on return, on exception, on a client that
 * went away — releases every lease and settles every estimate to the usage
 * reported ({@link #used(long)}, or per clause with {@link #close(Map)}; none
 * reported: 0, a full refund), in one pipelined burst that waits at most the
 * decision budget. Only the first close sends anything; usage reported after
 * it is an error.
 */
public final class Permit implements AutoCloseable {

    /** A lease to release: its key and token. */
    record Lease(String key, String token) {
    }

    /** An estimate charged up front: the clause (its index in its policy, its command) to settle. */
    record Estimate(int clause, Clause command, long charged) {
    }

    private final RateLimiter limiter;
    private final PolicyDecision decision;
    private final List<Lease> leases;
    private final List<Estimate> estimates;
    private final LocalLimiter.Held local;
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile Long used;
    /** The outcome (null: a success unless the work failed); the clauses to give back when it does not count. */
    private volatile Boolean succeeded;
    private List<Clause> taken = List.of();
    private String counts;

    Permit(RateLimiter limiter, PolicyDecision decision, List<Lease> leases, List<Estimate> estimates, LocalLimiter.Held local) {
        this.limiter = limiter;
        this.decision = decision;
        this.leases = leases;
        this.estimates = estimates;
        this.local = local;
    }

    /** The decision, or null when Redis was down and the policy let the call through. */
    public PolicyDecision decision() {
        return decision;
    }

    /** True when some clause's estimate is settled from the call's result. */
    public boolean hasEstimates() {
        return !estimates.isEmpty() || (local != null && !local.estimateClauses().isEmpty());
    }

    /** The clause indexes (in their policy) charged an estimate. */
    public List<Integer> estimateClauses() {
        // charged in Redis, or by the LOCAL Redis-down mode (settled there)
        return local != null ? local.estimateClauses() : estimates.stream().map(Estimate::clause).toList();
    }

    /**
     * The units really used (e.g. an LLM answer's tokens), to which
     * {@link #close()} settles every estimate; may be called again to correct
     * it before close.
     *
     * @throws IllegalArgumentException below 0 or above 2^53-1
     * @throws IllegalStateException once the permit is closed
     */
    public Permit used(long units) {
        Limit.require(units >= 0 && units <= Limit.MAX, "used " + units + " must be an integer from 0 to 2^53-1");
        if (closed.get()) {
            throw new IllegalStateException("usage reported after the permit closed");
        }
        used = units;
        return this;
    }

    /** The call succeeded: under a policy that counts failures only, it is given back when the permit closes. */
    public Permit succeeded() {
        succeeded = true;
        return this;
    }

    /** The call failed: under a policy that counts successes only, it is given back when the permit closes. */
    public Permit failed() {
        succeeded = false;
        return this;
    }

    /** Whether {@link #succeeded()} or {@link #failed()} was said. */
    public boolean outcomeKnown() {
        return succeeded != null;
    }

    Permit counting(String counts, List<Clause> taken) {
        this.counts = counts;
        this.taken = taken;
        return this;
    }

    /** The clauses to give back whole at close (the outcome does not count), or an empty list. */
    List<Clause> uncounted() {
        if (counts == null) {
            return List.of();
        }
        boolean success = !Boolean.FALSE.equals(succeeded);
        return success == counts.equals("failures") ? taken : List.of();
    }

    /** Releases and settles to the usage reported with {@link #used(long)}; waits at most the decision budget. */
    @Override
    public void close() {
        Long u = used;
        Map<Integer, Long> byClause = new HashMap<>();
        if (u != null) {
            for (int clause : estimateClauses()) {
                byClause.put(clause, u);
            }
        }
        close(byClause);
    }

    /** Releases and settles to the usage by clause index, waiting for the replies at most the decision budget; idempotent. */
    public void close(Map<Integer, Long> usedByClause) {
        closeAsync(usedByClause).toCompletableFuture().join();
    }

    /**
     * Releases and settles without waiting: the stage completes (never
     * exceptionally) when the replies are in or the decision budget has
     * passed. Idempotent: only the first close sends anything.
     */
    public CompletionStage<Void> closeAsync(Map<Integer, Long> usedByClause) {
        if (!closed.compareAndSet(false, true)) {
            return CompletableFuture.completedFuture(null);
        }
        return limiter.finish(this, usedByClause == null ? Map.of() : usedByClause);
    }

    List<Lease> leases() {
        return leases;
    }

    List<Estimate> estimates() {
        return estimates;
    }

    /** What the LOCAL Redis-down mode charged (null: decided by Redis, or no LOCAL policy). */
    LocalLimiter.Held local() {
        return local;
    }
}
