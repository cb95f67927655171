package dev.redisratelimit.spring.core;

import dev.redisratelimit.client.AllDecision;
import dev.redisratelimit.client.Clause;
import dev.redisratelimit.client.LockoutDecision;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.QuotaLimit;
import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.client.RateLimitException;
import dev.redisratelimit.client.RuleState;
import dev.redisratelimit.client.SlidingWindow;
import dev.redisratelimit.client.TokenBucket;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import java.time.Duration;
import java.time.ZoneId;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Decides a call against its policy with one Redis round trip, through the
 * Java client's typed calls: one RL.ALL
 * (with DETAILS, so every named limit's state comes back in the same reply)
 * or, for a lockout, one RL.LOCKCOUNT. A refusal writes nothing anywhere.
 * Waits at most the decision budget; past it, or while the circuit is open,
 * the policy's Redis-down behaviour answers.
 *
 * <p>Keys: {@code <prefix><policy>:{<key>}:<limits>} — the caller's key as the
 * Cluster hash tag, so a policy's keys share a slot; a policy with a fixed tag
 * writes {@code <prefix><policy>:{<tag>}:<key>:<limits>}.
 */
public final class RateLimiter {

    private static final Logger log = LoggerFactory.getLogger(RateLimiter.class);

    private final RateLimitAsyncClient client;
    private final RuntimeLimits runtime;
    private final RedisAvailability availability;
    private final LocalLimiter local;
    private final String prefix;
    private final long budgetMs;
    private final OnRedisDown defaultDown;
    // Cleared if the loaded module predates RL.ALL's DETAILS option: headers then show the binding limit only.
    private volatile boolean details = true;
    // Told of every decision (Micrometer meters when the app has Micrometer); no-op otherwise.
    private volatile DecisionObserver observer = DecisionObserver.NONE;
    // Every registered policy by name (the Actuator endpoint lists and peeks them).
    private final Map<String, CompiledPolicy> policies = new java.util.concurrent.ConcurrentHashMap<>();

    public RateLimiter(RateLimitAsyncClient client, RuntimeLimits runtime, RedisAvailability availability, LocalLimiter local,
            String prefix, Duration budget, OnRedisDown defaultDown) {
        this.client = client;
        this.runtime = runtime;
        this.availability = availability;
        this.local = local;
        this.prefix = prefix == null ? "" : prefix;
        this.budgetMs = Math.max(1, budget.toMillis());
        this.defaultDown = defaultDown == OnRedisDown.DEFAULT ? OnRedisDown.FAIL_CLOSED : defaultDown;
    }

    public RuntimeLimits runtimeLimits() {
        return runtime;
    }

    /** Registers a policy (its limits can then be changed at run time by name). */
    public void register(CompiledPolicy policy) {
        runtime.register(policy.spec());
        policies.putIfAbsent(policy.name(), policy);
    }

    /** The policies registered so far (YAML ones at start, annotated ones as their beans are proxied), by name. */
    public Map<String, CompiledPolicy> policies() {
        return java.util.Collections.unmodifiableMap(policies);
    }

    /** Tells {@code observer} of every decision from now on (replacing the previous one). */
    public void setObserver(DecisionObserver observer) {
        this.observer = observer == null ? DecisionObserver.NONE : observer;
    }

    /**
     * Decides; returns the permit to close when the call ends. Waits for
     * {@link #acquireAsync}, which completes within the decision budget.
     *
     * @throws RateLimitRefusedException when a limit refuses
     * @throws RateLimitUnavailableException when Redis is down and the policy fails closed
     */
    public Permit acquire(CompiledPolicy policy, CallInput in) {
        CompletableFuture<Permit> f = acquireAsync(policy, in).toCompletableFuture();
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            f.thenAccept(p -> p.closeAsync(Map.of())); // nobody will close what is decided after all
            throw new RateLimitUnavailableException(policy.name(), e);
        } catch (ExecutionException e) {
            Throwable cause = unwrap(e);
            if (cause instanceof RuntimeException re) {
                throw re;
            }
            throw new IllegalStateException(cause);
        }
    }

    /**
     * Decides without blocking the calling thread: the stage completes on the
     * transport's thread when Redis answers, or — past the decision budget, a
     * timeout rather than a wait — with the policy's Redis-down behaviour. It
     * fails with {@link RateLimitRefusedException}, {@link RateLimitUnavailableException}
     * or {@link RateLimitConfigurationException} where {@link #acquire} throws them.
     */
    public CompletionStage<Permit> acquireAsync(CompiledPolicy policy, CallInput in) {
        long started = System.nanoTime();
        DecisionObserver o = observer;
        CompletableFuture<Permit> f;
        try {
            if (availability.isDown()) {
                f = CompletableFuture.completedFuture(whenDown(policy, in, null));
            } else {
                f = policy.isLockout() ? lockout(policy, in) : all(policy, in, true);
            }
        } catch (RuntimeException e) {
            f = CompletableFuture.failedFuture(e);
        }
        return f.whenComplete((p, failure) -> observe(o, policy, unwrap(failure), System.nanoTime() - started));
    }

    private static void observe(DecisionObserver o, CompiledPolicy policy, Throwable e, long nanos) {
        if (e == null) {
            o.decided(policy.name(), DecisionObserver.Outcome.ADMITTED, null, nanos);
        } else if (e instanceof RateLimitRefusedException r) {
            o.decided(policy.name(), DecisionObserver.Outcome.REFUSED, r.getDecision().kind(), nanos);
        } else if (e instanceof RateLimitUnavailableException) {
            o.decided(policy.name(), DecisionObserver.Outcome.UNAVAILABLE, null, nanos);
        } else {
            o.error(policy.name(), e instanceof RateLimitConfigurationException ? DecisionObserver.ErrorKind.CONFIGURATION
                    : DecisionObserver.ErrorKind.OTHER);
            o.decided(policy.name(), DecisionObserver.Outcome.ERROR, null, nanos);
        }
    }

    private static Throwable unwrap(Throwable e) {
        while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    // Runs a step whose exceptions become the stage's failure.
    private static <T> CompletableFuture<T> stage(java.util.function.Supplier<CompletableFuture<T>> step) {
        try {
            return step.get();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * What the policy would decide now for {@code key}, charging nothing: one
     * RL.ALLPEEK with every clause at COST 0 (and DETAILS when the module has
     * it). A lockout policy has no peek here (RL.LOCKCOUNT writes): null.
     *
     * @throws RateLimitUnavailableException when Redis does not answer within the budget
     */
    public Decision peek(CompiledPolicy policy, String key) {
        if (policy.isLockout()) {
            return null;
        }
        CallInput in = new CallInput(key, null, null, "");
        List<Clause> clauses = new ArrayList<>();
        for (dev.redisratelimit.spring.core.Clause c : policy.clauses()) {
            String k = key(policy, c, in);
            if (c.type() == LimitType.CONCURRENCY) {
                LimitSpec l = policy.limitOf(c.items().get(0));
                clauses.add(new Clause.Lease(k, runtime.count(policy.name(), l), l.ttl(), "peek", 0));
            } else {
                clauses.add(clause(policy, c, in, k).withCost(0));
            }
        }
        try {
            return decision(policy, (AllDecision) within(client.allPeek(clauses, details ? Options.none().withDetails() : Options.none())).join());
        } catch (CompletionException e) {
            Throwable cause = unwrap(e);
            if (cause instanceof Unavailable u) {
                throw new RateLimitUnavailableException(policy.name(), u.getCause());
            }
            throw cause instanceof RuntimeException re ? re : e;
        }
    }

    private CompletableFuture<Permit> all(CompiledPolicy policy, CallInput in, boolean firstTry) {
        List<dev.redisratelimit.spring.core.Clause> specs = policy.clauses();
        List<Clause> clauses = new ArrayList<>(specs.size());
        List<Permit.Lease> leases = new ArrayList<>();
        List<Permit.Estimate> estimates = new ArrayList<>();
        for (int ci = 0; ci < specs.size(); ci++) {
            dev.redisratelimit.spring.core.Clause c = specs.get(ci);
            long cost = in.costs() != null && ci < in.costs().length ? in.costs()[ci] : 1;
            String key = key(policy, c, in);
            Clause clause;
            if (c.type() == LimitType.CONCURRENCY) {
                LimitSpec l = policy.limitOf(c.items().get(0));
                String token = UUID.randomUUID().toString();
                clause = new Clause.Lease(key, runtime.count(policy.name(), l), l.ttl(), token, 1);
                leases.add(new Permit.Lease(key, token));
            } else {
                clause = clause(policy, c, in, key).withCost(cost);
                if (c.settle() != null) {
                    estimates.add(new Permit.Estimate(ci, clause, cost));
                }
            }
            clauses.add(clause);
        }
        boolean withDetails = details;
        CompletionStage<AllDecision> sent;
        try {
            sent = client.all(clauses, withDetails ? Options.none().withDetails() : Options.none());
        } catch (IllegalArgumentException e) {
            throw new RateLimitConfigurationException("rate limit '" + policy.name() + "': " + e.getMessage(), e);
        }
        return within(sent).handle((reply, failure) -> stage(() -> {
            Throwable e = unwrap(failure);
            if (e instanceof Unavailable) {
                return CompletableFuture.completedFuture(whenDown(policy, in, e.getCause()));
            }
            if (e instanceof RateLimitException) {
                if (withDetails && firstTry && String.valueOf(e.getMessage()).contains("DETAILS")) {
                    log.warn("the loaded ratelimit module has no RL.ALL DETAILS: RateLimit headers will show the binding limit only");
                    details = false;
                    return all(policy, in, false);
                }
                throw new RateLimitConfigurationException("Redis refused rate limit '" + policy.name() + "': " + e.getMessage(), e);
            }
            if (e != null) {
                return CompletableFuture.failedFuture(e);
            }
            Decision d = decision(policy, (AllDecision) reply);
            if (!d.admitted()) {
                throw new RateLimitRefusedException(d);
            }
            return CompletableFuture.completedFuture(new Permit(this, d, leases, estimates, List.of()));
        })).thenCompose(f -> f);
    }

    // A CHECK, THROTTLE or QUOTA clause with the counts in force now (cost 1; the caller sets it).
    private Clause clause(CompiledPolicy policy, dev.redisratelimit.spring.core.Clause c, CallInput in, String key) {
        if (c.duplicate()) {
            return new Clause.Check(key, List.of(new SlidingWindow(1, policy.spec().duplicateWindow())), 1);
        }
        switch (c.type()) {
            case SLIDING_WINDOW: {
                List<SlidingWindow> rules = new ArrayList<>();
                for (int item : c.items()) {
                    LimitSpec l = policy.limitOf(item);
                    rules.add(new SlidingWindow(runtime.count(policy.name(), l), l.window()));
                }
                return new Clause.Check(key, rules, 1);
            }
            case TOKEN_BUCKET: {
                List<TokenBucket> rules = new ArrayList<>();
                for (int item : c.items()) {
                    LimitSpec l = policy.limitOf(item);
                    rules.add(new TokenBucket(l.burst(), runtime.count(policy.name(), l), l.window()));
                }
                return new Clause.Throttle(key, rules, 1);
            }
            case QUOTA: {
                List<QuotaLimit> limits = new ArrayList<>();
                for (int item : c.items()) {
                    LimitSpec l = policy.limitOf(item);
                    limits.add(new QuotaLimit(l.period(), runtime.count(policy.name(), l)));
                }
                return new Clause.Quota(key, ZoneId.of(in.zone() != null ? in.zone() : c.zone()), limits, 1);
            }
            default:
                throw new IllegalStateException(c.type().name());
        }
    }

    private Decision decision(CompiledPolicy policy, AllDecision r) {
        boolean limited = r.limited();
        List<dev.redisratelimit.spring.core.Clause> clauses = policy.clauses();
        int bindingItem = clauses.get(r.clause() - 1).items().get(r.rule() - 1);
        int n = policy.itemNames().size();
        ItemState[] states = new ItemState[n];
        boolean duplicateRefused = false;
        if (r.hasDetails()) {
            List<List<RuleState>> details = r.details();
            for (int ci = 0; ci < clauses.size() && ci < details.size(); ci++) {
                dev.redisratelimit.spring.core.Clause c = clauses.get(ci);
                List<RuleState> perRule = details.get(ci);
                for (int j = 0; j < perRule.size() && j < c.items().size(); j++) {
                    RuleState s = perRule.get(j);
                    int item = c.items().get(j);
                    states[item] = state(policy, item, s.limited(), s.remaining(), s.retryAfterMillis(), s.resetAfterMillis());
                    duplicateRefused |= c.duplicate() && s.limited();
                }
            }
        } else {
            states[bindingItem] = state(policy, bindingItem, limited, r.remaining(), r.retryAfterMillis(), r.resetAfterMillis());
            duplicateRefused = limited && clauses.get(r.clause() - 1).duplicate();
        }
        List<ItemState> items = new ArrayList<>(n);
        int binding = -1;
        for (int i = 0; i < n; i++) {
            if (states[i] != null) {
                if (i == bindingItem) {
                    binding = items.size();
                }
                items.add(states[i]);
            }
        }
        LimitSpec bl = policy.limitOf(bindingItem);
        Decision.Kind kind = !limited ? Decision.Kind.ADMITTED
                : duplicateRefused ? Decision.Kind.DUPLICATE : Decision.Kind.RATE_LIMITED;
        return new Decision(policy.name(), !limited, List.copyOf(items), binding, limited ? r.retryAfterMillis() : -1,
                bl == null ? LimitType.SLIDING_WINDOW : bl.type(), kind, policy.spec().legacyHeaders());
    }

    /** Redis did not answer within the budget, or the connection failed: the circuit is open now. */
    private static final class Unavailable extends RuntimeException {
        Unavailable(Throwable cause) {
            super(null, cause, false, false);
        }
    }

    // The reply within the budget, never a wait: past it (a timeout) or on a connection failure the
    // circuit opens and the stage fails with Unavailable; an error reply fails it with the server's
    // RateLimitException.
    private <T> CompletableFuture<T> within(CompletionStage<T> stage) {
        CompletableFuture<T> sent = stage.toCompletableFuture();
        CompletableFuture<T> reply = new CompletableFuture<>();
        sent.whenComplete((v, e) -> {
            if (e == null) {
                reply.complete(v);
            } else {
                reply.completeExceptionally(e);
            }
        });
        return reply.orTimeout(budgetMs, TimeUnit.MILLISECONDS).handle((v, failure) -> {
            if (failure == null) {
                return v;
            }
            Throwable cause = unwrap(failure);
            if (cause instanceof RateLimitException rle) {
                throw rle;
            }
            if (cause instanceof TimeoutException) {
                sent.cancel(true);
            }
            availability.markDown(cause);
            throw new Unavailable(cause);
        });
    }

    private ItemState state(CompiledPolicy policy, int item, boolean limited, long remaining, long retry, long reset) {
        LimitSpec l = policy.limitOf(item);
        long q = l == null ? 1 : runtime.count(policy.name(), l);
        long w = l == null ? LimitSpec.ceilSeconds(policy.spec().duplicateWindow().toMillis()) : l.windowSeconds();
        return new ItemState(policy.itemNames().get(item), q, w, Math.max(0, remaining), LimitSpec.ceilSeconds(reset), limited,
                limited ? retry : -1);
    }

    private CompletableFuture<Permit> lockout(CompiledPolicy policy, CallInput in) {
        LimitSpec l = policy.spec().limits().get(0);
        String base = prefix + policy.name() + ":{" + in.key() + "}:" + l.name();
        long max = runtime.count(policy.name(), l);
        CompletionStage<LockoutDecision> sent;
        try {
            sent = client.lockcount(base + ":lock", base + ":count", l.window(), max, l.lockTime());
        } catch (IllegalArgumentException e) {
            throw new RateLimitConfigurationException("rate limit '" + policy.name() + "': " + e.getMessage(), e);
        }
        return within(sent).handle((r, failure) -> {
            Throwable e = unwrap(failure);
            if (e instanceof Unavailable) {
                return whenDown(policy, in, e.getCause());
            }
            if (e instanceof RateLimitException) {
                throw new RateLimitConfigurationException("Redis refused rate limit '" + policy.name() + "': " + e.getMessage(), e);
            }
            if (e != null) {
                throw e instanceof RuntimeException re ? re : new CompletionException(e);
            }
            boolean limited = r.limited();
            long ttl = r.ttlMillis();
            ItemState s = new ItemState(l.name(), max, l.windowSeconds(), limited ? 0 : Math.max(0, max - r.count()),
                    LimitSpec.ceilSeconds(ttl), limited, limited ? ttl : -1);
            Decision d = new Decision(policy.name(), !limited, List.of(s), 0, limited ? ttl : -1, LimitType.LOCKOUT,
                    limited ? Decision.Kind.LOCKED : Decision.Kind.ADMITTED, policy.spec().legacyHeaders());
            if (limited) {
                throw new RateLimitRefusedException(d);
            }
            return new Permit(this, d, List.of(), List.of(), List.of());
        });
    }

    private Permit whenDown(CompiledPolicy policy, CallInput in, Throwable why) {
        OnRedisDown mode = policy.spec().onRedisDown() == OnRedisDown.DEFAULT ? defaultDown : policy.spec().onRedisDown();
        DecisionObserver o = observer;
        o.error(policy.name(), why == null ? DecisionObserver.ErrorKind.CIRCUIT_OPEN
                : why instanceof TimeoutException ? DecisionObserver.ErrorKind.TIMEOUT : DecisionObserver.ErrorKind.CONNECTION);
        o.fallback(policy.name(), mode);
        switch (mode) {
            case FAIL_OPEN:
                return new Permit(this, null, List.of(), List.of(), List.of());
            case LOCAL: {
                List<String> leases = local.tryAcquire(policy, in.key(), runtime);
                if (leases == null) {
                    // No Redis state to show: a refusal without per-limit items, waiting may help.
                    throw new RateLimitRefusedException(new Decision(policy.name(), false, List.of(), -1, 1000,
                            LimitType.SLIDING_WINDOW, Decision.Kind.RATE_LIMITED, false));
                }
                return new Permit(this, null, List.of(), List.of(), leases);
            }
            default:
                throw new RateLimitUnavailableException(policy.name(), why);
        }
    }

    /**
     * Releases leases and settles estimates (sent back to back: pipelined);
     * the stage completes, never exceptionally, once every reply is in or
     * the budget has passed — a timeout, not a wait.
     */
    CompletableFuture<Void> finish(Permit permit, Map<Integer, Long> used) {
        if (!permit.localLeases().isEmpty()) {
            local.release(permit.localLeases());
        }
        List<CompletionStage<?>> sent = new ArrayList<>();
        try {
            for (Permit.Lease l : permit.leases()) {
                sent.add(client.release(l.key(), l.token()));
            }
            for (Permit.Estimate e : permit.estimates()) {
                long u = Math.max(0, used.getOrDefault(e.clause(), 0L));
                long diff = u - e.charged();
                if (diff == 0) {
                    continue;
                }
                long n = Math.abs(diff);
                Options o = Options.none().withCost(e.command() instanceof Clause.Check ? Math.min(n, 10_000) : n);
                o = diff < 0 ? o.withRefund() : o.withDebit();
                sent.add(settle(e.command(), o));
            }
        } catch (IllegalArgumentException e) {
            log.warn("rate limit settlement not sent: {}", e.getMessage());
        }
        if (sent.isEmpty()) {
            return CompletableFuture.completedFuture(null);
        }
        CompletableFuture<?>[] confirmed = new CompletableFuture<?>[sent.size()];
        for (int i = 0; i < confirmed.length; i++) {
            confirmed[i] = sent.get(i).toCompletableFuture().thenApply(v -> v).orTimeout(budgetMs, TimeUnit.MILLISECONDS)
                    .exceptionally(e -> {
                        // A lease not released expires with its TTL; an estimate not settled stays charged.
                        log.warn("rate limit release/settlement not confirmed: {}", unwrap(e).toString());
                        return null;
                    });
        }
        return CompletableFuture.allOf(confirmed);
    }

    // The clause's own command with REFUND or DEBIT (RL.CHECK, RL.THROTTLE or RL.QUOTA on its key).
    private CompletionStage<?> settle(Clause clause, Options o) {
        if (clause instanceof Clause.Check c) {
            return client.check(c.key(), c.rules(), o);
        }
        if (clause instanceof Clause.Throttle t) {
            return client.throttle(t.key(), t.rules(), o);
        }
        Clause.Quota q = (Clause.Quota) clause;
        return client.quota(q.key(), q.zone(), q.limits(), o);
    }

    private String key(CompiledPolicy policy, dev.redisratelimit.spring.core.Clause c, CallInput in) {
        String tag = policy.spec().hashTag();
        StringBuilder sb = new StringBuilder(prefix).append(policy.name()).append(":{");
        if (tag != null) {
            sb.append(tag).append("}:");
            if (!c.global()) {
                sb.append(in.key()).append(':');
            }
        } else {
            sb.append(c.global() ? policy.name() : in.key()).append("}:");
        }
        sb.append(c.keyName());
        if (c.duplicate()) {
            sb.append(':').append(in.bodyDigest());
        }
        return sb.toString();
    }
}
