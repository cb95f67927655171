package dev.redisratelimit.client;

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

    /** A lease to release (and renew while the work runs): its key, token and TTL; the policy call that took it. */
    record Lease(String key, String token, java.time.Duration ttl, PolicyCall call) {
    }

    /** An estimate charged up front: the clause (its index in its call's policy, its command) to settle. */
    record Estimate(PolicyCall call, int clause, Clause command, long charged) {
    }

    /** The usage reported for a clause (by index in its policy) of one of the permit's calls; null: none (0). */
    interface Usage {
        Long of(PolicyCall call, int clause);
    }

    private final RateLimiter limiter;
    private final PolicyDecision decision;
    private final List<Lease> leases;
    private final List<Estimate> estimates;
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile Long used;
    /** A usage report was refused: what was charged up front stays charged (CLIENTS.md §4). */
    private volatile boolean stands;
    /** The RL.RENEW of its leases every third of their TTL while open (null: none). */
    private volatile java.util.concurrent.ScheduledFuture<?> renewing;
    /** The outcome (null: a success unless the work failed); the clauses to give back when it does not count. */
    private volatile Boolean succeeded;
    /** Each call whose policy counts one outcome, with the clauses it took (given back whole when the outcome does not count). */
    private Map<PolicyCall, List<Clause>> taken = Map.of();

    Permit(RateLimiter limiter, PolicyDecision decision, List<Lease> leases, List<Estimate> estimates) {
        this.limiter = limiter;
        this.decision = decision;
        this.leases = leases;
        this.estimates = estimates;
    }

    /**
     * The decision, or null when Redis was down and the policy let the call through ({@link FailMode#OPEN}); under
     * {@link FailMode#LOCAL}, the local backend's decision.
     */
    public PolicyDecision decision() {
        return decision;
    }

    /** True when some clause's estimate is settled from the call's result. */
    public boolean hasEstimates() {
        return !estimates.isEmpty();
    }

    /** The clause indexes (in their policy) charged an estimate. */
    public List<Integer> estimateClauses() {
        return estimates.stream().map(Estimate::clause).distinct().toList();
    }

    /**
     * For a permit of several policy calls ({@link RateLimiter#acquire(List)}): the clause indexes of
     * {@code call}'s policy charged an estimate (empty for a call not decided: the same policy and key named
     * twice counts once), to settle with {@link #closeAsyncByCall(Map)}.
     */
    public List<Integer> estimateClauses(PolicyCall call) {
        return estimates.stream().filter(e -> e.call() == call).map(Estimate::clause).distinct().toList();
    }

    /**
     * The units really used (e.g. an LLM answer's tokens), to which
     * {@link #close()} settles every estimate; may be called again to correct
     * it before close. Above the {@code q} of the limit an estimate is charged
     * to, it counts as that {@code q}. Refused below 0 or above 2^53-1: the
     * estimate then stands as charged (nothing settled) and the permit still
     * closes normally, as in the Python and Node clients (CLIENTS.md §4).
     *
     * @throws RateLimitArgumentException (field {@code used}) below 0 or above 2^53-1
     * @throws IllegalStateException once the permit is closed: usage reported after close is never silently dropped
     */
    public Permit used(long units) {
        if (closed.get()) {
            throw new IllegalStateException("used(" + units + ") after the permit of '"
                    + (decision == null ? "?" : decision.policy()) + "' closed");
        }
        if (units < 0 || units > Limit.MAX) {
            stands = true;
            throw new RateLimitArgumentException("used", "invalid used '" + units + "': expected an integer from 0 to 2^53-1");
        }
        stands = false;
        used = units;
        return this;
    }

    /**
     * As {@link #used(long)} for a usage computed in wider arithmetic (a
     * {@link java.math.BigInteger} sum of tokens, a double): an integral value
     * from 0 to 2^53-1; anything else is refused and the estimate stands.
     */
    public Permit used(Number units) {
        if (units instanceof Long || units instanceof Integer || units instanceof Short || units instanceof Byte) {
            return used(units.longValue());
        }
        java.math.BigDecimal d;
        try {
            d = units == null ? null : new java.math.BigDecimal(units.toString());
        } catch (NumberFormatException e) {
            d = null; // NaN, Infinity
        }
        if (d == null || d.signum() < 0 || d.stripTrailingZeros().scale() > 0 || d.compareTo(java.math.BigDecimal.valueOf(Limit.MAX)) > 0) {
            if (closed.get()) {
                throw new IllegalStateException("used(" + units + ") after the permit closed");
            }
            stands = true;
            throw new RateLimitArgumentException("used", "invalid used '" + units + "': expected an integer from 0 to 2^53-1");
        }
        return used(d.longValueExact());
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

    Permit counting(Map<PolicyCall, List<Clause>> taken) {
        this.taken = taken;
        return this;
    }

    /**
     * The calls to give back whole at close, each with its clauses: those whose policy counts the other outcome
     * (a success under "failures", a failure under "successes"); empty when every call counts.
     */
    Map<PolicyCall, List<Clause>> uncounted() {
        if (taken.isEmpty()) {
            return Map.of();
        }
        boolean success = !Boolean.FALSE.equals(succeeded);
        Map<PolicyCall, List<Clause>> back = new java.util.IdentityHashMap<>();
        taken.forEach((call, clauses) -> {
            if (success == "failures".equals(call.policy().counts())) {
                back.put(call, clauses);
            }
        });
        return back;
    }

    /** Releases and settles to the usage reported with {@link #used(long)}; waits at most the decision budget. */
    @Override
    public void close() {
        Long u = used;
        boolean stand = stands;
        // Each estimate (of every call) settled to the one usage reported; a refused report leaves each as charged.
        close0((call, clause) -> stand ? charged(call, clause) : u).toCompletableFuture().join();
    }

    // What the estimate of a call's clause charged.
    private Long charged(PolicyCall call, int clause) {
        for (Estimate e : estimates) {
            if (e.call() == call && e.clause() == clause) {
                return e.charged();
            }
        }
        return null;
    }

    /** Releases and settles to the usage by clause index, waiting for the replies at most the decision budget; idempotent. */
    public void close(Map<Integer, Long> usedByClause) {
        closeAsync(usedByClause).toCompletableFuture().join();
    }

    /**
     * Releases and settles without waiting: the stage completes (never
     * exceptionally) when the replies are in or the decision budget has
     * passed. Idempotent: only the first close sends anything. The usage is by
     * clause index in the policy, the same for every call of a permit of several.
     */
    public CompletionStage<Void> closeAsync(Map<Integer, Long> usedByClause) {
        Map<Integer, Long> used = usedByClause == null ? Map.of() : usedByClause;
        return close0((call, clause) -> used.get(clause));
    }

    /**
     * As {@link #closeAsync(Map)} for a permit of several policy calls, each
     * settled to its own usage: by the {@link PolicyCall} given to
     * {@link RateLimiter#acquire(List)}, then by clause index in its policy (a
     * call or clause absent: 0, a full refund).
     */
    public CompletionStage<Void> closeAsyncByCall(Map<PolicyCall, Map<Integer, Long>> usedByCall) {
        Map<PolicyCall, Map<Integer, Long>> used = new java.util.IdentityHashMap<>();
        if (usedByCall != null) {
            used.putAll(usedByCall);
        }
        return close0((call, clause) -> {
            Map<Integer, Long> m = used.get(call);
            return m == null ? null : m.get(clause);
        });
    }

    private CompletionStage<Void> close0(Usage usage) {
        if (!closed.compareAndSet(false, true)) {
            return CompletableFuture.completedFuture(null);
        }
        java.util.concurrent.ScheduledFuture<?> r = renewing;
        if (r != null) {
            r.cancel(false);
        }
        return limiter.finish(this, usage);
    }

    /** Whether the permit has closed (its leases released or being released). */
    public boolean isClosed() {
        return closed.get();
    }

    void renewing(java.util.concurrent.ScheduledFuture<?> task) {
        renewing = task;
        if (closed.get()) {
            task.cancel(false);
        }
    }

    List<Lease> leases() {
        return leases;
    }

    List<Estimate> estimates() {
        return estimates;
    }
}
