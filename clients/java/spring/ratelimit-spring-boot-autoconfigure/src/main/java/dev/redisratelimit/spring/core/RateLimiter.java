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
import org.springframework.data.redis.connection.ClusterSlotHashUtil;
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
    // Set under Cluster: clauses whose keys hash to different slots are decided slot by slot.
    private volatile boolean clustered;
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

    /**
     * Says that Redis is a Cluster (the auto-configuration sets it from the
     * connection factory): a request whose policies' keys hash to different
     * slots is then decided slot by slot. Learnt from a CROSSSLOT reply too.
     */
    public void setClustered(boolean clustered) {
        this.clustered = clustered;
    }

    /** Tells {@code observer} of every decision from now on (replacing the previous one). */
    public void setObserver(DecisionObserver observer) {
        this.observer = observer == null ? DecisionObserver.NONE : observer;
    }

    /**
     * Decides; returns the permit to close when the call ends.
     *
     * @throws RateLimitRefusedException when a limit refuses
     * @throws RateLimitUnavailableException when Redis is down and the policy fails closed
     */
    public Permit acquire(CompiledPolicy policy, CallInput in) {
        return acquire(List.of(new PolicyCall(policy, in)));
    }

    /**
     * Decides several policies for one request together — the routes it
     * matches and its handler's {@code @RateLimited} — with one RL.ALL of all
     * their clauses: admitted only if every clause admits, nothing written
     * otherwise; the binding limit and the headers come from the combined
     * reply (every policy's items, in call order). Under Cluster, clauses
     * whose keys hash to different slots are decided slot by slot (one RL.ALL
     * per slot, sent together) and the slots that admitted are refunded if
     * another refused. A lockout policy is decided alone.
     *
     * @throws RateLimitRefusedException when a limit refuses
     * @throws RateLimitUnavailableException when Redis is down and a policy fails closed
     */
    public Permit acquire(List<PolicyCall> calls) {
        if (calls.isEmpty()) {
            throw new IllegalArgumentException("nothing to decide");
        }
        long started = System.nanoTime();
        DecisionObserver o = observer;
        try {
            Permit p;
            if (availability.isDown()) {
                p = whenDown(calls, null);
            } else if (calls.size() == 1 && calls.get(0).policy().isLockout()) {
                p = lockout(calls.get(0).policy(), calls.get(0).input());
            } else {
                p = all(calls, true);
            }
            observe(o, calls, DecisionObserver.Outcome.ADMITTED, null, System.nanoTime() - started);
            return p;
        } catch (RateLimitRefusedException e) {
            observe(o, calls, DecisionObserver.Outcome.REFUSED, e.getDecision().kind(), System.nanoTime() - started);
            throw e;
        } catch (RateLimitUnavailableException e) {
            observe(o, calls, DecisionObserver.Outcome.UNAVAILABLE, null, System.nanoTime() - started);
            throw e;
        } catch (RuntimeException e) {
            for (PolicyCall c : calls) {
                o.error(c.policy().name(), e instanceof RateLimitConfigurationException ? DecisionObserver.ErrorKind.CONFIGURATION
                        : DecisionObserver.ErrorKind.OTHER);
            }
            observe(o, calls, DecisionObserver.Outcome.ERROR, null, System.nanoTime() - started);
            throw e;
        }
    }

    // Every policy of a combined decision sees its outcome (one call was refused, so each policy refused it).
    private static void observe(DecisionObserver o, List<PolicyCall> calls, DecisionObserver.Outcome outcome, Decision.Kind kind,
            long nanos) {
        for (PolicyCall c : calls) {
            o.decided(c.policy().name(), outcome, kind, nanos);
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
            AllDecision r = (AllDecision) await(client.allPeek(clauses, details ? Options.none().withDetails() : Options.none()));
            return decision(new Batch(List.of(new PolicyCall(policy, in)), clauses.size()).identity(), Outcome.of(r, null));
        } catch (Unavailable e) {
            throw new RateLimitUnavailableException(policy.name(), e.getCause());
        }
    }

    /** One request's clauses, flattened across its policy calls, with where each came from. */
    private static final class Batch {
        final List<PolicyCall> calls;
        final List<Clause> clauses;
        final int[] callOf;
        final int[] clauseOf;
        final List<Permit.Lease> leases = new ArrayList<>();
        final List<Permit.Estimate> estimates = new ArrayList<>();

        Batch(List<PolicyCall> calls, int size) {
            this.calls = calls;
            this.clauses = new ArrayList<>(size);
            this.callOf = new int[size];
            this.clauseOf = new int[size];
        }

        // A one-policy batch whose clauses are that policy's, in order (peeks).
        Batch identity() {
            for (int i = 0; i < callOf.length; i++) {
                clauseOf[i] = i;
            }
            return this;
        }

        String names() {
            if (calls.size() == 1) {
                return "'" + calls.get(0).policy().name() + "'";
            }
            StringBuilder sb = new StringBuilder();
            for (PolicyCall c : calls) {
                sb.append(sb.length() == 0 ? "'" : ", '").append(c.policy().name()).append('\'');
            }
            return sb.toString();
        }
    }

    /**
     * RL.ALL's seven integers (clause 0-based in the batch) and, with DETAILS,
     * each batch clause's rule states (an entry may be null: not known).
     */
    private record Outcome(boolean limited, int clause, int rule, long remaining, long retryAfter, long resetAfter,
            List<List<RuleState>> details) {

        static Outcome of(AllDecision r, int[] flat) {
            int c = flat == null ? r.clause() - 1 : flat[r.clause() - 1];
            return new Outcome(r.limited(), c, r.rule(), r.remaining(), r.retryAfterMillis(), r.resetAfterMillis(),
                    r.hasDetails() && flat == null ? r.details() : null);
        }
    }

    private Batch batch(List<PolicyCall> calls) {
        int size = 0;
        for (PolicyCall c : calls) {
            if (c.policy().isLockout()) {
                throw new RateLimitConfigurationException("policy '" + c.policy().name()
                        + "' is a lockout (RL.LOCKCOUNT): it is decided alone, not with other policies");
            }
            size += c.policy().clauses().size();
        }
        Batch b = new Batch(calls, size);
        int flat = 0;
        for (int k = 0; k < calls.size(); k++) {
            CompiledPolicy policy = calls.get(k).policy();
            CallInput in = calls.get(k).input();
            List<dev.redisratelimit.spring.core.Clause> specs = policy.clauses();
            for (int ci = 0; ci < specs.size(); ci++, flat++) {
                dev.redisratelimit.spring.core.Clause c = specs.get(ci);
                long cost = in.costs() != null && ci < in.costs().length ? in.costs()[ci] : 1;
                String key = key(policy, c, in);
                Clause clause;
                if (c.type() == LimitType.CONCURRENCY) {
                    LimitSpec l = policy.limitOf(c.items().get(0));
                    String token = UUID.randomUUID().toString();
                    clause = new Clause.Lease(key, runtime.count(policy.name(), l), l.ttl(), token, 1);
                    b.leases.add(new Permit.Lease(key, token));
                } else {
                    clause = clause(policy, c, in, key).withCost(cost);
                    if (c.settle() != null) {
                        b.estimates.add(new Permit.Estimate(ci, clause, cost));
                    }
                }
                b.clauses.add(clause);
                b.callOf[flat] = k;
                b.clauseOf[flat] = ci;
            }
        }
        return b;
    }

    private Permit all(List<PolicyCall> calls, boolean firstTry) {
        Batch b = batch(calls);
        boolean withDetails = details;
        Options options = withDetails ? Options.none().withDetails() : Options.none();
        Outcome out;
        try {
            List<int[]> groups = clustered ? slotGroups(b.clauses) : null;
            if (groups == null || groups.size() == 1) {
                out = Outcome.of((AllDecision) await(client.all(b.clauses, options)), null);
            } else {
                out = bySlot(b, groups, withDetails);
            }
        } catch (IllegalArgumentException e) {
            throw new RateLimitConfigurationException("rate limit " + b.names() + ": " + e.getMessage(), e);
        } catch (Unavailable e) {
            return whenDown(calls, e.getCause());
        } catch (RateLimitException e) {
            String m = String.valueOf(e.getMessage());
            if (withDetails && firstTry && m.contains("DETAILS")) {
                log.warn("the loaded ratelimit module has no RL.ALL DETAILS: RateLimit headers will show the binding limit only");
                details = false;
                return all(calls, false);
            }
            if (!clustered && m.startsWith("CROSSSLOT")) {
                // A Cluster the auto-configuration did not recognise: decide slot by slot from now on.
                log.info("Redis answered CROSSSLOT: policies keyed differently are decided slot by slot from now on");
                clustered = true;
                return all(calls, firstTry);
            }
            throw new RateLimitConfigurationException("Redis refused rate limit " + b.names() + ": " + e.getMessage(), e);
        }
        Decision d = decision(b, out);
        if (!d.admitted()) {
            throw new RateLimitRefusedException(d);
        }
        return new Permit(this, d, b.leases, b.estimates, List.of());
    }

    // The batch's clauses grouped by Cluster slot (in order of first appearance), or null when they share one.
    private static List<int[]> slotGroups(List<Clause> clauses) {
        if (clauses.size() < 2) {
            return null;
        }
        Map<Integer, List<Integer>> bySlot = new java.util.LinkedHashMap<>();
        for (int i = 0; i < clauses.size(); i++) {
            bySlot.computeIfAbsent(ClusterSlotHashUtil.calculateSlot(clauses.get(i).key()), k -> new ArrayList<>()).add(i);
        }
        if (bySlot.size() == 1) {
            return null;
        }
        List<int[]> groups = new ArrayList<>(bySlot.size());
        for (List<Integer> g : bySlot.values()) {
            groups.add(g.stream().mapToInt(Integer::intValue).toArray());
        }
        return groups;
    }

    /**
     * Under Cluster, one RL.ALL per slot, sent together (each to its node);
     * when one refuses or fails, the slots that admitted are refunded
     * (RL.ALL ... REFUND: their charges given back, their leases released),
     * so a refusal still writes nothing in the end. Between the admission and
     * the refund another request may see those units taken: a refusal too
     * many in a race, never an admission too many.
     */
    private Outcome bySlot(Batch b, List<int[]> groups, boolean withDetails) {
        Options options = withDetails ? Options.none().withDetails() : Options.none();
        List<List<Clause>> parts = new ArrayList<>(groups.size());
        List<CompletionStage<AllDecision>> sent = new ArrayList<>(groups.size());
        for (int[] g : groups) {
            List<Clause> part = new ArrayList<>(g.length);
            for (int i : g) {
                part.add(b.clauses.get(i));
            }
            parts.add(part);
            sent.add(client.all(part, options));
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
        AllDecision[] replies = new AllDecision[groups.size()];
        RuntimeException failure = null;
        for (int j = 0; j < sent.size(); j++) {
            try {
                replies[j] = (AllDecision) await(sent.get(j), deadline);
            } catch (RuntimeException e) {
                failure = failure == null ? e : failure;
            }
        }
        boolean refused = false;
        for (AllDecision r : replies) {
            refused |= r != null && r.limited();
        }
        AllDecision[] after = new AllDecision[replies.length];
        if (failure != null || refused) {
            // Give back what the admitting slots took; their details become the state after the refund.
            Options refund = withDetails ? Options.none().withRefund().withDetails() : Options.none().withRefund();
            List<CompletionStage<AllDecision>> refunds = new ArrayList<>();
            for (int j = 0; j < replies.length; j++) {
                refunds.add(replies[j] != null && !replies[j].limited() ? client.all(parts.get(j), refund) : null);
            }
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
            for (int j = 0; j < refunds.size(); j++) {
                if (refunds.get(j) != null) {
                    try {
                        after[j] = (AllDecision) await(refunds.get(j), until);
                    } catch (RuntimeException e) {
                        log.warn("rate limit refund of an admitting Cluster slot not confirmed: {}", e.toString());
                    }
                }
            }
            if (failure != null) {
                throw failure;
            }
        }
        List<List<RuleState>> flatDetails = withDetails ? new ArrayList<>(java.util.Collections.nCopies(b.clauses.size(), null)) : null;
        int best = -1;
        for (int j = 0; j < replies.length; j++) {
            place(flatDetails, after[j] != null ? after[j] : replies[j], groups.get(j));
            if ((!refused || replies[j].limited())
                    && (best < 0 || binds(replies[j], groups.get(j), replies[best], groups.get(best), b.clauses))) {
                best = j;
            }
        }
        Outcome o = Outcome.of(replies[best], groups.get(best));
        return new Outcome(o.limited(), o.clause(), o.rule(), o.remaining(), o.retryAfter(), o.resetAfter(), flatDetails);
    }

    private static void place(List<List<RuleState>> flat, AllDecision r, int[] group) {
        if (flat == null || !r.hasDetails()) {
            return;
        }
        for (int k = 0; k < group.length && k < r.details().size(); k++) {
            flat.set(group[k], r.details().get(k));
        }
    }

    // RL.ALL's choice of the binding clause, across slots: a refusal that waiting cannot help, else the longest
    // retry-after; among admissions the fewest calls left, then the latest reset; ties to the earlier clause.
    private static boolean binds(AllDecision a, int[] ga, AllDecision b, int[] gb, List<Clause> clauses) {
        int ia = ga[a.clause() - 1];
        int ib = gb[b.clause() - 1];
        if (a.limited() != b.limited()) {
            return a.limited();
        }
        if (a.limited()) {
            if ((a.retryAfterMillis() < 0) != (b.retryAfterMillis() < 0)) {
                return a.retryAfterMillis() < 0;
            }
            if (a.retryAfterMillis() != b.retryAfterMillis() && a.retryAfterMillis() >= 0) {
                return a.retryAfterMillis() > b.retryAfterMillis();
            }
            return ia < ib;
        }
        long la = a.remaining() / Math.max(1, clauses.get(ia).cost());
        long lb = b.remaining() / Math.max(1, clauses.get(ib).cost());
        if (la != lb) {
            return la < lb;
        }
        if (a.resetAfterMillis() != b.resetAfterMillis()) {
            return a.resetAfterMillis() > b.resetAfterMillis();
        }
        return ia < ib;
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

    // The decision a request sees: every call's items in call order (a name a previous call used is
    // qualified by its policy: "policy.name"), the binding one from the reply.
    private Decision decision(Batch b, Outcome r) {
        boolean limited = r.limited();
        int bindingCall = b.callOf[r.clause()];
        CompiledPolicy bindingPolicy = b.calls.get(bindingCall).policy();
        dev.redisratelimit.spring.core.Clause bindingClause = bindingPolicy.clauses().get(b.clauseOf[r.clause()]);
        int bindingItem = bindingClause.items().get(r.rule() - 1);
        int[] offset = new int[b.calls.size() + 1];
        for (int k = 0; k < b.calls.size(); k++) {
            offset[k + 1] = offset[k] + b.calls.get(k).policy().itemNames().size();
        }
        ItemState[] states = new ItemState[offset[b.calls.size()]];
        boolean duplicateRefused = false;
        if (r.details() != null) {
            List<List<RuleState>> details = r.details();
            for (int fi = 0; fi < b.callOf.length && fi < details.size(); fi++) {
                List<RuleState> perRule = details.get(fi);
                if (perRule == null) {
                    continue;
                }
                CompiledPolicy policy = b.calls.get(b.callOf[fi]).policy();
                dev.redisratelimit.spring.core.Clause c = policy.clauses().get(b.clauseOf[fi]);
                for (int j = 0; j < perRule.size() && j < c.items().size(); j++) {
                    RuleState s = perRule.get(j);
                    int item = c.items().get(j);
                    states[offset[b.callOf[fi]] + item] = state(policy, item, s.limited(), s.remaining(), s.retryAfterMillis(),
                            s.resetAfterMillis());
                    duplicateRefused |= c.duplicate() && s.limited();
                }
            }
        }
        int bindingIndex = offset[bindingCall] + bindingItem;
        if (states[bindingIndex] == null) {
            states[bindingIndex] = state(bindingPolicy, bindingItem, limited, r.remaining(), r.retryAfter(), r.resetAfter());
            duplicateRefused |= limited && bindingClause.duplicate();
        }
        List<ItemState> items = new ArrayList<>(states.length);
        java.util.Set<String> names = b.calls.size() > 1 ? new java.util.HashSet<>() : null;
        int binding = -1;
        boolean legacy = false;
        for (int k = 0; k < b.calls.size(); k++) {
            CompiledPolicy policy = b.calls.get(k).policy();
            legacy |= policy.spec().legacyHeaders();
            for (int i = offset[k]; i < offset[k + 1]; i++) {
                ItemState s = states[i];
                if (s == null) {
                    continue;
                }
                if (names != null && !names.add(s.name())) {
                    s = new ItemState(policy.name() + "." + s.name(), s.q(), s.w(), s.r(), s.t(), s.limited(), s.retryAfterMs());
                    names.add(s.name());
                }
                if (i == bindingIndex) {
                    binding = items.size();
                }
                items.add(s);
            }
        }
        LimitSpec bl = bindingPolicy.limitOf(bindingItem);
        Decision.Kind kind = !limited ? Decision.Kind.ADMITTED
                : duplicateRefused ? Decision.Kind.DUPLICATE : Decision.Kind.RATE_LIMITED;
        return new Decision(bindingPolicy.name(), !limited, List.copyOf(items), binding, limited ? r.retryAfter() : -1,
                bl == null ? LimitType.SLIDING_WINDOW : bl.type(), kind, legacy);
    }

    /** Redis did not answer within the budget, or the connection failed: the circuit is open now. */
    private static final class Unavailable extends RuntimeException {
        Unavailable(Throwable cause) {
            super(null, cause, false, false);
        }
    }

    // Waits at most the budget; a timeout or a connection failure opens the circuit (Unavailable),
    // an error reply is the server's RateLimitException.
    private Object await(CompletionStage<?> stage) {
        return await(stage, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs));
    }

    private Object await(CompletionStage<?> stage, long deadlineNanos) {
        java.util.concurrent.CompletableFuture<?> f = stage.toCompletableFuture();
        try {
            return f.get(Math.max(1, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            availability.markDown(e);
            throw new Unavailable(e);
        } catch (InterruptedException e) {
            f.cancel(true);
            Thread.currentThread().interrupt();
            throw new Unavailable(e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            while (cause instanceof CompletionException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            if (cause instanceof RateLimitException rle) {
                throw rle;
            }
            availability.markDown(cause);
            throw new Unavailable(cause);
        }
    }

    private ItemState state(CompiledPolicy policy, int item, boolean limited, long remaining, long retry, long reset) {
        LimitSpec l = policy.limitOf(item);
        long q = l == null ? 1 : runtime.count(policy.name(), l);
        long w = l == null ? LimitSpec.ceilSeconds(policy.spec().duplicateWindow().toMillis()) : l.windowSeconds();
        return new ItemState(policy.itemNames().get(item), q, w, Math.max(0, remaining), LimitSpec.ceilSeconds(reset), limited,
                limited ? retry : -1);
    }

    private Permit lockout(CompiledPolicy policy, CallInput in) {
        LimitSpec l = policy.spec().limits().get(0);
        String base = prefix + policy.name() + ":{" + in.key() + "}:" + l.name();
        long max = runtime.count(policy.name(), l);
        LockoutDecision r;
        try {
            r = (LockoutDecision) await(client.lockcount(base + ":lock", base + ":count", l.window(), max, l.lockTime()));
        } catch (IllegalArgumentException e) {
            throw new RateLimitConfigurationException("rate limit '" + policy.name() + "': " + e.getMessage(), e);
        } catch (Unavailable e) {
            return whenDown(policy, in, e.getCause());
        } catch (RateLimitException e) {
            throw new RateLimitConfigurationException("Redis refused rate limit '" + policy.name() + "': " + e.getMessage(), e);
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
    }

    private Permit whenDown(CompiledPolicy policy, CallInput in, Throwable why) {
        return whenDown(List.of(new PolicyCall(policy, in)), why);
    }

    // Each policy's Redis-down behaviour; one that fails closed answers 503 for the request.
    private Permit whenDown(List<PolicyCall> calls, Throwable why) {
        DecisionObserver o = observer;
        OnRedisDown[] modes = new OnRedisDown[calls.size()];
        PolicyCall closed = null;
        for (int k = 0; k < calls.size(); k++) {
            CompiledPolicy policy = calls.get(k).policy();
            modes[k] = policy.spec().onRedisDown() == OnRedisDown.DEFAULT ? defaultDown : policy.spec().onRedisDown();
            o.error(policy.name(), why == null ? DecisionObserver.ErrorKind.CIRCUIT_OPEN
                    : why instanceof TimeoutException ? DecisionObserver.ErrorKind.TIMEOUT : DecisionObserver.ErrorKind.CONNECTION);
            o.fallback(policy.name(), modes[k]);
            if (closed == null && modes[k] != OnRedisDown.FAIL_OPEN && modes[k] != OnRedisDown.LOCAL) {
                closed = calls.get(k);
            }
        }
        if (closed != null) {
            throw new RateLimitUnavailableException(closed.policy().name(), why);
        }
        List<String> held = new ArrayList<>();
        for (int k = 0; k < calls.size(); k++) {
            if (modes[k] != OnRedisDown.LOCAL) {
                continue;
            }
            CompiledPolicy policy = calls.get(k).policy();
            List<String> leases = local.tryAcquire(policy, calls.get(k).input().key(), runtime);
            if (leases == null) {
                local.release(held);
                // No Redis state to show: a refusal without per-limit items, waiting may help.
                throw new RateLimitRefusedException(new Decision(policy.name(), false, List.of(), -1, 1000,
                        LimitType.SLIDING_WINDOW, Decision.Kind.RATE_LIMITED, false));
            }
            held.addAll(leases);
        }
        return new Permit(this, null, List.of(), List.of(), held.isEmpty() ? List.of() : held);
    }

    /** Releases leases and settles estimates (sent back to back: pipelined), waiting at most the budget. */
    void finish(Permit permit, Map<Integer, Long> used) {
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
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
        for (CompletionStage<?> s : sent) {
            try {
                s.toCompletableFuture().get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            } catch (Exception e) {
                // A lease not released expires with its TTL; an estimate not settled stays charged.
                log.warn("rate limit release/settlement not confirmed: {}", e.toString());
            }
        }
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
