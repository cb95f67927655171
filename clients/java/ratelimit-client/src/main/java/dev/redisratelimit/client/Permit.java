package dev.redisratelimit.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What an admitted {@link Policy#acquire} holds: its concurrency lease and
 * the estimate charged to its token-bucket and quota limits. Closing it —
 * try-with-resources, on return or exception — releases the lease and
 * settles the estimate to the usage reported with {@link #used(long)} (0 when
 * nothing was reported): a {@code DEBIT} of what was used beyond the
 * estimate, a {@code REFUND} of what was not, all in one pipelined round trip
 * (the policy's keys share a slot). A refused permit holds nothing; closing
 * it does nothing. {@link #close()} acts once.
 */
public final class Permit implements AutoCloseable {

    private final RateLimitClient client;
    private final Policy.Plan plan;
    private final PolicyDecision decision;
    private final AtomicLong used = new AtomicLong(0);
    private final AtomicBoolean closed = new AtomicBoolean();

    Permit(RateLimitClient client, Policy.Plan plan, PolicyDecision decision) {
        this.client = client;
        this.plan = plan;
        this.decision = decision;
    }

    public PolicyDecision decision() {
        return decision;
    }

    public boolean admitted() {
        return decision.admitted();
    }

    /** The usage to settle the estimate to (e.g. an LLM answer's tokens); may be called again to correct it. */
    public Permit used(long units) {
        Limits.nonNegative("used", units);
        used.set(units);
        return this;
    }

    public long estimate() {
        return plan.estimate();
    }

    /** The calls {@link #close()} sends (empty when nothing is held). */
    List<Call<?>> settlement() {
        List<Call<?>> calls = new ArrayList<>();
        if (!decision.admitted()) {
            return calls;
        }
        long delta = used.get() - plan.estimate();
        for (Clause clause : plan.clauses()) {
            if (clause instanceof Clause.Lease lease) {
                calls.add(Calls.release(lease.key(), List.of(plan.token()), Options.none()));
            } else if (delta != 0 && clause instanceof Clause.Throttle t) {
                Options o = delta > 0 ? Options.none().withCost(delta).withDebit() : Options.none().withCost(-delta).withRefund();
                calls.add(Calls.throttle(t.key(), t.rules(), o));
            } else if (delta != 0 && clause instanceof Clause.Quota q) {
                Options o = delta > 0 ? Options.none().withCost(delta).withDebit() : Options.none().withCost(-delta).withRefund();
                calls.add(Calls.quota(q.key(), q.zone(), q.limits(), o));
            }
        }
        return calls;
    }

    /** Releases and settles, once. A Redis error here is thrown (suppressed under a body's own exception). */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        List<Call<?>> calls = settlement();
        if (!calls.isEmpty()) {
            client.pipeline(calls);
        }
    }
}
