package dev.redisratelimit.client;

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
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The decision core and the registry of named policies: decides a call
 * against its policies with one Redis round trip through the Java client's
 * typed calls — one RL.ALL (with DETAILS, so every named limit's state comes
 * back in the same reply) or, for a lockout, one RL.LOCKCOUNT. A refusal
 * writes nothing anywhere. Waits at most the decision budget; past it, or
 * while the circuit is open ({@link RedisAvailability}), the policy's
 * {@link FailMode} answers. A reply that lands after the budget is given back
 * ({@code RL.ALL ... REFUND}). Limits changed at run time
 * ({@link RuntimeLimits}) apply to the next decision.
 *
 * <pre>{@code
 * RateLimiter limiter = RateLimiter.builder(transport)          // e.g. LettuceTransport.create(redis)
 *     .policy(Policy.builder("sms")
 *         .slidingWindow("short", 2, Duration.ofSeconds(10))
 *         .slidingWindow("long", 5, Duration.ofHours(1)).build())
 *     .build();
 * try (Permit p = limiter.acquire("sms", "user:42")) {          // RateLimitRefusedException when refused
 *     p.decision().limits();                                    // every limit's q, w, r, t
 * }
 * }</pre>
 *
 * <p>Keys: {@code <prefix><policy>:{<key>}:<limits>} — the caller's key as the
 * Cluster hash tag, so a policy's keys share a slot; a policy with a fixed tag
 * writes {@code <prefix><policy>:{<tag>}:<key>:<limits>}.
 */
public final class RateLimiter implements AutoCloseable {

    private static final System.Logger log = System.getLogger(RateLimiter.class.getName());

    private final RateLimitAsyncClient client;
    private final RuntimeLimits runtime;
    private final RedisAvailability availability;
    // The LOCAL Redis-down mode: this limiter's own decision path on an in-process backend (null in that limiter).
    private final RateLimiter local;
    private final String prefix;
    private final long budgetMs;
    private final FailMode defaultDown;
    // Cleared if the loaded module predates RL.ALL's DETAILS option: headers then show the binding limit only.
    private volatile boolean details = true;
    // Set under Cluster: clauses whose keys hash to different slots are decided slot by slot.
    private volatile boolean clustered;
    // Told of every decision (Micrometer meters when the app has Micrometer); no-op otherwise.
    private volatile DecisionObserver observer = DecisionObserver.NONE;
    // Every registered policy by name (the Actuator endpoint lists and peeks them).
    private final Map<String, Policy> policies = new java.util.concurrent.ConcurrentHashMap<>();
    // What close() stops: the probe and refresher a builder started (none when constructed directly).
    private final List<AutoCloseable> owned = new java.util.concurrent.CopyOnWriteArrayList<>();
    // Leases whose reply was lost: released by token once Redis answers again (CLIENTS.md §3).
    private final LostLeases lost;

    /**
     * @param local the backend the {@link FailMode#LOCAL} Redis-down mode decides on (null: a new
     *        {@link LocalRateLimitTransport} on the system clock with its default bounds); never the transport to Redis
     */
    public RateLimiter(RateLimitAsyncClient client, RuntimeLimits runtime, RedisAvailability availability, LocalRateLimitTransport local,
            String prefix, Duration budget, FailMode defaultDown) {
        this(client, runtime, availability, prefix, budget, defaultDown,
                local(local == null ? new LocalRateLimitTransport() : local, runtime, prefix, budget));
    }

    // LOCAL: the same decision path (the same commands, costs, estimates, leases, refunds) on the local backend,
    // so a decision there is the one Redis would have made with this instance's calls alone.
    private static RateLimiter local(LocalRateLimitTransport backend, RuntimeLimits runtime, String prefix, Duration budget) {
        return new RateLimiter(new RateLimitAsyncClient(backend), runtime, new RedisAvailability(backend, Duration.ofSeconds(1), budget),
                prefix, budget, FailMode.CLOSED, null);
    }

    private RateLimiter(RateLimitAsyncClient client, RuntimeLimits runtime, RedisAvailability availability, String prefix,
            Duration budget, FailMode defaultDown, RateLimiter local) {
        this.client = client;
        this.runtime = runtime;
        this.availability = availability;
        this.local = local;
        this.prefix = prefix == null ? "" : prefix;
        Limit.require(!this.prefix.contains("{") && !this.prefix.contains("}"), "prefix",
                "prefix '" + prefix + "': without braces (they would move the hash tag)");
        this.budgetMs = Math.max(1, budget.toMillis());
        this.defaultDown = defaultDown == null ? FailMode.CLOSED : defaultDown;
        this.lost = new LostLeases(client, availability, this.budgetMs);
    }

    /** How many releases of leases whose reply was lost wait for Redis to answer again. */
    public int lostLeasesWaiting() {
        return lost.size();
    }

    /** A limiter over {@code transport}, with the defaults of {@link Builder}. */
    public static Builder builder(RateLimitTransport transport) {
        return new Builder(transport);
    }

    public RuntimeLimits runtimeLimits() {
        return runtime;
    }

    /** Registers a policy (its limits can then be changed at run time by name). */
    public void register(Policy policy) {
        runtime.register(policy);
        policies.putIfAbsent(policy.name(), policy);
    }

    /**
     * The registered policy named {@code name}.
     *
     * @throws IllegalArgumentException when none is
     */
    public Policy policy(String name) {
        Policy p = policies.get(name);
        if (p == null) {
            throw new IllegalArgumentException("unknown rate-limit policy '" + name + "' (registered: " + policies.keySet() + ")");
        }
        return p;
    }

    /**
     * Decides {@code key} under the registered policy {@code policy} (cost 1);
     * the permit holds its leases and estimates until closed.
     *
     * @throws RateLimitRefusedException when a limit refuses
     * @throws RateLimitUnavailableException when Redis cannot decide and the policy fails closed
     */
    public Permit acquire(String policy, String key) {
        return acquire(PolicyCall.of(policy(policy), key));
    }

    /** As {@link #acquire(String, String)}, without blocking: the stage completes within the decision budget. */
    public CompletionStage<Permit> acquireAsync(String policy, String key) {
        try {
            return acquireAsync(PolicyCall.of(policy(policy), key));
        } catch (IllegalArgumentException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** What the registered policy {@code policy} would decide now for {@code key}, charging nothing (see {@link #peek(Policy, String)}). */
    public PolicyDecision peek(String policy, String key) {
        return peek(policy(policy), key);
    }

    /** Stops what the builder started (the Redis probe, the runtime-limit refresher); the transport stays open. */
    @Override
    public void close() {
        for (AutoCloseable c : owned) {
            try {
                c.close();
            } catch (Exception e) {
                log.log(System.Logger.Level.DEBUG, "closing the rate limiter: {0}", e.toString());
            }
        }
    }

    /** The policies registered so far (YAML ones at start, annotated ones as their beans are proxied), by name. */
    public Map<String, Policy> policies() {
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
     * Decides; returns the permit to close when the call ends. Waits for
     * {@link #acquireAsync}, which completes within the decision budget.
     *
     * @throws RateLimitRefusedException when a limit refuses
     * @throws RateLimitUnavailableException when Redis is down and the policy fails closed
     */
    public Permit acquire(PolicyCall call) {
        return acquire(List.of(call));
    }

    /**
     * Decides several policies for one request together — the routes it
     * matches and its handler's {@code @RateLimited} — waiting for
     * {@link #acquireAsync(List)}.
     *
     * @throws RateLimitRefusedException when a limit refuses
     * @throws RateLimitUnavailableException when Redis is down and a policy fails closed
     */
    public Permit acquire(List<PolicyCall> calls) {
        CompletableFuture<Permit> f = acquireAsync(calls).toCompletableFuture();
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            f.thenAccept(p -> p.closeAsync(Map.of())); // nobody will close what is decided after all
            throw new RateLimitUnavailableException(calls.get(0).policy().name(), e);
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
    public CompletionStage<Permit> acquireAsync(PolicyCall call) {
        return acquireAsync(List.of(call));
    }

    /**
     * Decides several policies for one request together (its routes and its
     * handler's {@code @RateLimited}) with one RL.ALL of all their clauses:
     * admitted only if every clause admits, nothing written otherwise; the
     * binding limit and the headers come from the combined reply (every
     * policy's items, in call order). Under Cluster, clauses whose keys hash
     * to different slots are decided slot by slot (one RL.ALL per slot, sent
     * together) and the slots that admitted are refunded if another refused.
     * A lockout policy (RL.LOCKCOUNT) is decided alone. The one decision path:
     * a single policy is a list of one.
     */
    public CompletionStage<Permit> acquireAsync(List<PolicyCall> requested) {
        if (requested.isEmpty()) {
            return CompletableFuture.failedFuture(new IllegalArgumentException("nothing to decide"));
        }
        List<PolicyCall> calls = distinct(requested);
        long started = System.nanoTime();
        DecisionObserver o = observer;
        CompletableFuture<Permit> f;
        try {
            if (calls.size() == 1 && calls.get(0).policy().isLockout()) {
                f = lockout(calls.get(0));
            } else {
                f = all(calls, true, requested.size() > 1);
            }
        } catch (RuntimeException e) {
            f = CompletableFuture.failedFuture(e);
        }
        return f.whenComplete((p, failure) -> observe(o, calls, unwrap(failure), System.nanoTime() - started));
    }

    // Every policy of a combined decision sees its outcome (the request was refused, so each policy refused it).
    private static void observe(DecisionObserver o, List<PolicyCall> calls, Throwable e, long nanos) {
        for (int i = 0; i < calls.size(); i++) {
            String policy = calls.get(i).policy().name();
            if (e == null) {
                o.decided(policy, DecisionObserver.Outcome.ADMITTED, null, nanos);
            } else if (e instanceof RateLimitRefusedException r) {
                o.decided(policy, DecisionObserver.Outcome.REFUSED, r.getDecision().kind(), nanos);
            } else if (e instanceof RateLimitUnavailableException) {
                o.decided(policy, DecisionObserver.Outcome.UNAVAILABLE, null, nanos);
            } else {
                o.error(policy, e instanceof RateLimitConfigurationException ? DecisionObserver.ErrorKind.CONFIGURATION
                        : DecisionObserver.ErrorKind.OTHER);
                o.decided(policy, DecisionObserver.Outcome.ERROR, null, nanos);
            }
        }
    }

    static Throwable unwrapped(Throwable e) {
        return unwrap(e);
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
    public PolicyDecision peek(Policy policy, String key) {
        if (policy.isLockout()) {
            return null;
        }
        PolicyCall in = new PolicyCall(policy, key, null, null, "");
        List<Clause> clauses = new ArrayList<>();
        for (PolicyClause c : policy.clauses()) {
            String k = key(policy, c, in);
            if (c.kind() == Limit.Kind.CONCURRENCY) {
                Limit l = policy.limitOf(c.items().get(0));
                clauses.add(new Clause.Lease(k, runtime.count(policy.name(), l), l.ttl(), "peek", 0));
            } else {
                clauses.add(clause(policy, c, in, k).withCost(0));
            }
        }
        try {
            List<String> nodes = nodes(clauses);
            if (availability.anyDown(nodes)) {
                throw new RateLimitUnavailableException(policy.name(), null);
            }
            AllDecision r = within(client.allPeek(clauses, details ? Options.none().withDetails() : Options.none()), null, nodes).join();
            return decision(new Batch(List.of(in), clauses.size()).identity(), Outcome.of(r, null));
        } catch (CompletionException e) {
            Throwable cause = unwrap(e);
            if (cause instanceof Unavailable u) {
                throw new RateLimitUnavailableException(policy.name(), u.getCause());
            }
            throw cause instanceof RuntimeException re ? re : e;
        }
    }

    // --- Key administration: the same commands as the Python and Node clients (README "Key administration") ---

    /**
     * Every limit's state for {@code key} now, writing nothing: {@link #peek(Policy, String)} (RL.ALLPEEK, COST 0,
     * DETAILS); a lockout: PTTL/GET of its {@code :lock} and {@code :count} keys.
     */
    public PolicyDecision state(Policy policy, String key) {
        if (!policy.isLockout()) {
            return peek(policy, key);
        }
        Limit l = policy.limits().get(0);
        String base = prefix + policy.name() + ":{" + in(policy, key).key() + "}:" + l.name();
        List<CompletionStage<Object>> r = client.transport().pipeline(List.of(
                new RedisCall("PTTL", List.of(base + ":lock"), 0), new RedisCall("GET", List.of(base + ":count"), 0),
                new RedisCall("PTTL", List.of(base + ":count"), 0)));
        long lockMs = number(admin(r.get(0)));
        long count = number(admin(r.get(1)));
        long countMs = Math.max(0, number(admin(r.get(2))));
        boolean locked = lockMs == -1 || lockMs > 0; // -1: a lock without expiry
        long max = runtime.count(policy.name(), l);
        long reset = locked ? Math.max(0, lockMs) : countMs;
        LimitState st = new LimitState(l.name(), max, l.windowSeconds(), locked ? 0 : Math.max(0, max - count),
                Limit.ceilSeconds(reset), locked, locked ? lockMs : -1);
        return new PolicyDecision(policy.name(), !locked, List.of(st), 0, locked ? lockMs : -1, Limit.Kind.LOCKOUT,
                locked ? PolicyDecision.Kind.LOCKED : PolicyDecision.Kind.ADMITTED, policy.legacyHeaders());
    }

    /**
     * Deletes {@code key}'s own counters and leases under {@code policy} (an operator unlocking a caller): one DEL
     * of exactly the keys the wire format names; shared limits are left alone. Returns the number of keys deleted.
     */
    public long reset(Policy policy, String key) {
        PolicyCall in = in(policy, key);
        List<String> keys = new ArrayList<>();
        if (policy.isLockout()) {
            String base = prefix + policy.name() + ":{" + key + "}:" + policy.limits().get(0).name();
            keys.add(base + ":lock");
            keys.add(base + ":count");
        } else {
            for (PolicyClause c : policy.clauses()) {
                if (!c.shared() && !c.duplicate()) {
                    keys.add(key(policy, c, in));
                }
            }
        }
        if (keys.isEmpty()) {
            throw new RateLimitArgumentException("limits", "policy '" + policy.name() + "' has only shared limits");
        }
        return number(admin(client.transport().execute(new RedisCall("DEL", keys, 0))));
    }

    /** Charges {@code n} units to {@code key}'s windows, buckets and quotas whether or not they fit (DEBIT); the state after. */
    public PolicyDecision penalty(Policy policy, String key, long n) {
        return adjust(policy, key, n, Options.none().withCost(n).withDebit());
    }

    /** Gives {@code n} units back to {@code key}'s windows, buckets and quotas (REFUND, never below empty); the state after. */
    public PolicyDecision reward(Policy policy, String key, long n) {
        return adjust(policy, key, n, Options.none().withCost(n).withRefund());
    }

    private PolicyDecision adjust(Policy policy, String key, long n, Options o) {
        if (policy.isLockout()) {
            throw new RateLimitArgumentException("limits", "a lockout has no penalty or reward (RL.LOCKCOUNT has no DEBIT or "
                    + "REFUND): reset the key to unlock it");
        }
        PolicyCall in = in(policy, key);
        List<CompletionStage<?>> sent = new ArrayList<>();
        for (PolicyClause c : policy.clauses()) {
            if (c.kind() == Limit.Kind.CONCURRENCY || c.shared() || c.duplicate()) {
                continue;
            }
            long cap = c.kind() == Limit.Kind.SLIDING_WINDOW ? Limits.COST_CAP : Limits.MAX;
            if (n < 1 || n > cap) {
                throw new RateLimitArgumentException("cost", "invalid cost '" + n + "': expected an integer from 1 to " + cap);
            }
            sent.add(settle(clause(policy, c, in, key(policy, c, in)), o));
        }
        if (sent.isEmpty()) {
            throw new RateLimitArgumentException("limits", "policy '" + policy.name() + "' has no window, bucket or quota of the key's own");
        }
        sent.forEach(RateLimiter::admin);
        return state(policy, key);
    }

    private static PolicyCall in(Policy policy, String key) {
        return new PolicyCall(policy, key, null, null, "");
    }

    // An administration command's reply within no budget of its own (an operator's call, not a request's).
    private static Object admin(CompletionStage<?> stage) {
        try {
            return stage.toCompletableFuture().join();
        } catch (CompletionException e) {
            Throwable cause = unwrap(e);
            throw cause instanceof RuntimeException re ? re : e;
        }
    }

    private static long number(Object reply) {
        // A transport may hand a plain command's one value as a one-element array (Lettuce's generic output).
        if (reply instanceof List<?> l && l.size() <= 1) {
            reply = l.isEmpty() ? null : l.get(0);
        }
        if (reply == null) {
            return 0;
        }
        return reply instanceof Long l ? l : Long.parseLong(reply.toString());
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
                throw new RateLimitArgumentException("limits", "policy '" + c.policy().name()
                        + "' is a lockout (RL.LOCKCOUNT): it is decided alone, not with other policies");
            }
            size += c.policy().clauses().size();
        }
        calls.forEach(RateLimiter::validate);
        Batch b = new Batch(calls, size);
        int flat = 0;
        String token = null;
        for (int k = 0; k < calls.size(); k++) {
            Policy policy = calls.get(k).policy();
            PolicyCall in = calls.get(k);
            List<PolicyClause> specs = policy.clauses();
            for (int ci = 0; ci < specs.size(); ci++, flat++) {
                PolicyClause c = specs.get(ci);
                long cost = in.costs() != null && ci < in.costs().length ? in.costs()[ci] : 1;
                String key = key(policy, c, in);
                Clause clause;
                if (c.kind() == Limit.Kind.CONCURRENCY) {
                    Limit l = policy.limitOf(c.items().get(0));
                    // Unique, not secret (Redis access is the trust boundary): ThreadLocalRandom, as
                    // UUID.randomUUID's SecureRandom reads /dev/urandom, a blocking call on an event loop.
                    // One token per decision (every lease of one request), as in every client.
                    if (token == null) {
                        ThreadLocalRandom rnd = ThreadLocalRandom.current();
                        token = new UUID(rnd.nextLong(), rnd.nextLong()).toString();
                    }
                    clause = new Clause.Lease(key, runtime.count(policy.name(), l), l.ttl(), token, cost);
                    b.leases.add(new Permit.Lease(key, token, l.ttl(), in));
                } else {
                    clause = clause(policy, c, in, key).withCost(cost);
                    if (c.settle() != null) {
                        b.estimates.add(new Permit.Estimate(in, ci, clause, cost));
                    }
                }
                b.clauses.add(clause);
                b.callOf[flat] = k;
                b.clauseOf[flat] = ci;
            }
        }
        return b;
    }

    // The same binding (policy and key) named twice counts once, as in every client: the first call stays.
    private static List<PolicyCall> distinct(List<PolicyCall> calls) {
        if (calls.size() < 2) {
            return calls;
        }
        List<PolicyCall> out = new ArrayList<>(calls.size());
        java.util.Set<List<String>> seen = new java.util.HashSet<>();
        for (PolicyCall c : calls) {
            if (seen.add(java.util.Arrays.asList(c.policy().name(), c.key()))) {
                out.add(c);
            }
        }
        return out.size() == calls.size() ? calls : List.copyOf(out);
    }

    /**
     * A call's inputs checked before anything is sent, as the Python and Node
     * clients check them (CLIENTS.md §2; the message starts with the field):
     * the key, the duplicate subkey, the zone given per call, each clause's cost
     * against what its clause takes (a window's count and 10,000, a bucket's
     * burst, a concurrency limit).
     */
    static void validate(PolicyCall in) {
        Policy policy = in.policy();
        String key = in.key();
        // Each message is built only when its check fails: this runs on every decision.
        if (key == null || key.isEmpty() || key.startsWith("}")) {
            throw new RateLimitArgumentException("key", "policy '" + policy.name() + "': the key must be non-empty and not start with '}'");
        }
        if (in.zone() != null && !(ZONE_TEXT.matcher(in.zone()).matches() || ZoneId.getAvailableZoneIds().contains(in.zone()))) {
            throw new RateLimitArgumentException("zone", "invalid zone '" + in.zone() + "': expected an IANA time-zone name or a fixed offset +HH:MM");
        }
        List<PolicyClause> specs = policy.clauses();
        for (int ci = 0; ci < specs.size(); ci++) {
            PolicyClause c = specs.get(ci);
            if (c.duplicate() && (in.subkey() == null || in.subkey().isEmpty())) {
                throw new RateLimitArgumentException("subkeys", "policy '" + policy.name() + "' prevents duplicates: the call needs a non-empty subkey");
            }
            long cost = in.costs() != null && ci < in.costs().length ? in.costs()[ci] : 1;
            long cap = capacity(policy, c);
            if (cost < 1 || cost > cap) {
                String field = c.settle() != null ? "estimate" : "cost";
                throw new RateLimitArgumentException(field, "invalid " + field + " '" + cost + "' for policy '" + policy.name()
                        + "': its " + c.keyName() + " clause takes from 1 to " + cap);
            }
            if (c.kind() == Limit.Kind.QUOTA && c.zone() == null && in.zone() == null) {
                throw new RateLimitArgumentException("zone", "policy '" + policy.name() + "': quota '" + c.keyName()
                        + "' has no zone: the call names it (PolicyCall.withZone)");
            }
        }
    }

    private static final java.util.regex.Pattern ZONE_TEXT = java.util.regex.Pattern.compile("[+-][0-9]{2}:[0-9]{2}");

    // The most one call may charge a clause, from the definition (runtime overrides aside).
    private static long capacity(Policy policy, PolicyClause c) {
        if (c.duplicate()) {
            return 1;
        }
        long cap = c.kind() == Limit.Kind.QUOTA ? Limits.MAX : Limits.COST_CAP;
        for (int item : c.items()) {
            Limit l = policy.limitOf(item);
            cap = Math.min(cap, switch (l.kind()) {
                case SLIDING_WINDOW, CONCURRENCY -> l.count();
                case TOKEN_BUCKET -> l.burst();
                default -> Limits.MAX;
            });
        }
        return cap;
    }

    // several: the request named more than one binding (one RL.ALL even when they were the same one).
    private CompletableFuture<Permit> all(List<PolicyCall> calls, boolean firstTry, boolean several) {
        Batch b = batch(calls);
        boolean withDetails = details;
        boolean slotted = clustered;
        List<String> nodes = nodes(b.clauses);
        if (availability.anyDown(nodes)) {
            // The circuit of a node these keys live on is open: the Redis-down mode, at once.
            return CompletableFuture.completedFuture(whenDown(calls, null));
        }
        CompletableFuture<Outcome> sent;
        try {
            List<int[]> groups = slotted ? slotGroups(b.clauses) : null;
            sent = !several && single(b.clauses) ? single(b.clauses.get(0), nodes)
                    : groups == null
                    ? within(client.all(b.clauses, withDetails ? Options.none().withDetails() : Options.none()), late(b.clauses), b.clauses, nodes)
                            .thenApply(r -> Outcome.of(r, null))
                    : bySlot(b, groups, withDetails);
        } catch (IllegalArgumentException e) {
            throw new RateLimitConfigurationException("rate limit " + b.names() + ": " + e.getMessage(), e);
        }
        return sent.handle((out, failure) -> stage(() -> {
            Throwable e = unwrap(failure);
            if (e instanceof Unavailable) {
                return CompletableFuture.completedFuture(whenDown(calls, e.getCause()));
            }
            if (e instanceof LocalBackendFullException full) {
                throw new RateLimitRefusedException(full(calls.get(0).policy(), full));
            }
            if (e instanceof RateLimitException) {
                String m = String.valueOf(e.getMessage());
                if (withDetails && firstTry && m.contains("DETAILS")) {
                    log.log(System.Logger.Level.WARNING, "the loaded ratelimit module has no RL.ALL DETAILS: RateLimit headers will show the binding limit only");
                    details = false;
                    return all(calls, false, several);
                }
                if (!slotted && m.startsWith("CROSSSLOT")) {
                    // A Cluster the auto-configuration did not recognise: decide slot by slot from now on.
                    log.log(System.Logger.Level.INFO, "Redis answered CROSSSLOT: policies keyed differently are decided slot by slot from now on");
                    clustered = true;
                    return all(calls, firstTry, several);
                }
                throw new RateLimitConfigurationException("Redis refused rate limit " + b.names() + ": " + e.getMessage(), e);
            }
            if (e != null) {
                return CompletableFuture.failedFuture(e);
            }
            PolicyDecision d = decision(b, out);
            if (!d.admitted()) {
                throw new RateLimitRefusedException(d);
            }
            Permit permit = new Permit(this, d, b.leases, b.estimates);
            renew(permit);
            // A policy counting one outcome: what its call took goes back at close when the outcome does not count
            // (each such call of a request decided with others on its own: the others' charges stand).
            Map<PolicyCall, List<Clause>> counting = null;
            for (int k = 0; k < calls.size(); k++) {
                if (calls.get(k).policy().counts() != null) {
                    List<Clause> taken = new ArrayList<>();
                    for (int i = 0; i < b.clauses.size(); i++) {
                        if (b.callOf[i] == k) {
                            taken.add(b.clauses.get(i));
                        }
                    }
                    if (counting == null) {
                        counting = new java.util.IdentityHashMap<>();
                    }
                    counting.put(calls.get(k), List.copyOf(taken));
                }
            }
            return CompletableFuture.completedFuture(counting == null ? permit : permit.counting(counting));
        })).thenCompose(f -> f);
    }

    // One clause of one rule is sent as its own command (RL.CHECK, RL.THROTTLE, RL.QUOTA, RL.LEASE: the argv the
    // Python and Node clients send for it, CLIENTS.md §2); several, as one RL.ALL.
    private static boolean single(List<Clause> clauses) {
        if (clauses.size() != 1) {
            return false;
        }
        Clause c = clauses.get(0);
        return c instanceof Clause.Lease || (c instanceof Clause.Check k ? k.rules().size() == 1
                : c instanceof Clause.Throttle t ? t.rules().size() == 1 : ((Clause.Quota) c).limits().size() == 1);
    }

    private CompletableFuture<Outcome> single(Clause c, List<String> nodes) {
        Options o = c.cost() == 1 ? Options.none() : Options.none().withCost(c.cost());
        CompletionStage<? extends Decision> sent;
        if (c instanceof Clause.Check k) {
            sent = client.check(k.key(), k.rules(), o);
        } else if (c instanceof Clause.Throttle t) {
            sent = client.throttle(t.key(), t.rules(), o);
        } else if (c instanceof Clause.Quota q) {
            sent = client.quota(q.key(), q.zone(), q.limits(), o);
        } else {
            Clause.Lease l = (Clause.Lease) c;
            sent = client.lease(l.key(), l.limit(), l.ttl(), o.withToken(l.token()));
        }
        java.util.function.Consumer<AllDecision> giveBack = late(List.of(c));
        return within(sent.thenApply(d -> (Decision) d), d -> {
            if (!d.limited()) {
                giveBack.accept(null);
            }
        }, List.of(c), nodes).thenApply(d -> new Outcome(d.limited(), 0, 1, d.remaining(), d.retryAfterMillis(), d.resetAfterMillis(),
                List.of(List.<RuleState>of(d))));
    }

    // The batch's clauses grouped by Cluster slot (in order of first appearance), or null when they share one.
    private static List<int[]> slotGroups(List<Clause> clauses) {
        if (clauses.size() < 2) {
            return null;
        }
        Map<Integer, List<Integer>> bySlot = new java.util.LinkedHashMap<>();
        for (int i = 0; i < clauses.size(); i++) {
            bySlot.computeIfAbsent(Slots.of(clauses.get(i).key()), k -> new ArrayList<>()).add(i);
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
    private CompletableFuture<Outcome> bySlot(Batch b, List<int[]> groups, boolean withDetails) {
        Options options = withDetails ? Options.none().withDetails() : Options.none();
        List<List<Clause>> parts = new ArrayList<>(groups.size());
        List<CompletableFuture<AllDecision>> sent = new ArrayList<>(groups.size());
        for (int[] g : groups) {
            List<Clause> part = new ArrayList<>(g.length);
            for (int i : g) {
                part.add(b.clauses.get(i));
            }
            parts.add(part);
            sent.add(within(client.all(part, options), late(part), part, nodes(part)));
        }
        return settled(sent).thenCompose(none -> {
            AllDecision[] replies = new AllDecision[groups.size()];
            Throwable failed = null;
            boolean refused = false;
            for (int j = 0; j < replies.length; j++) {
                if (sent.get(j).isCompletedExceptionally()) {
                    failed = failed != null ? failed : unwrap(sent.get(j).handle((v, e) -> e).join());
                } else {
                    replies[j] = sent.get(j).join();
                    refused |= replies[j].limited();
                }
            }
            if (failed == null && !refused) {
                return CompletableFuture.completedFuture(combine(b, groups, replies, false, withDetails));
            }
            // Give back what the admitting slots took. The items keep the admission's state (what it
            // would leave), as one server reports the same refusal (CLIENTS.md §5); DETAILS is still
            // sent so the argv is the other clients' (clients/conformance).
            Options refund = withDetails ? Options.none().withRefund().withDetails() : Options.none().withRefund();
            List<CompletableFuture<AllDecision>> refunds = new ArrayList<>(replies.length);
            for (int j = 0; j < replies.length; j++) {
                refunds.add(replies[j] != null && !replies[j].limited() ? within(client.all(parts.get(j), refund), null, parts.get(j), nodes(parts.get(j))) : null);
            }
            Throwable failure = failed;
            boolean anyRefused = refused;
            return settled(refunds).thenApply(x -> {
                for (CompletableFuture<AllDecision> r : refunds) {
                    if (r != null && r.isCompletedExceptionally()) {
                        log.log(System.Logger.Level.WARNING, "rate limit refund of an admitting Cluster slot not confirmed: {0}", unwrap(r.handle((v, e) -> e).join()).toString());
                    }
                }
                if (failure != null) {
                    throw failure instanceof RuntimeException re ? re : new CompletionException(failure);
                }
                return combine(b, groups, replies, anyRefused, withDetails);
            });
        });
    }

    // Completes when every stage (nulls skipped) has, whether it failed or not.
    private static CompletableFuture<Void> settled(List<? extends CompletableFuture<?>> stages) {
        List<CompletableFuture<?>> done = new ArrayList<>(stages.size());
        for (CompletableFuture<?> f : stages) {
            if (f != null) {
                done.add(f.handle((v, e) -> null));
            }
        }
        return CompletableFuture.allOf(done.toArray(CompletableFuture[]::new));
    }

    // The slots' replies as one RL.ALL reply: the binding clause chosen across slots, details in batch order.
    private static Outcome combine(Batch b, List<int[]> groups, AllDecision[] replies, boolean refused, boolean withDetails) {
        List<List<RuleState>> flatDetails = withDetails ? new ArrayList<>(java.util.Collections.nCopies(b.clauses.size(), null)) : null;
        int best = -1;
        for (int j = 0; j < replies.length; j++) {
            place(flatDetails, replies[j], groups.get(j));
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
    private Clause clause(Policy policy, PolicyClause c, PolicyCall in, String key) {
        if (c.duplicate()) {
            return new Clause.Check(key, List.of(new SlidingWindow(runtime.duplicateCount(policy.name(), 1), policy.duplicateWindow())), 1);
        }
        switch (c.kind()) {
            case SLIDING_WINDOW: {
                List<SlidingWindow> rules = new ArrayList<>();
                for (int item : c.items()) {
                    Limit l = policy.limitOf(item);
                    rules.add(new SlidingWindow(runtime.count(policy.name(), l), l.window()));
                }
                return new Clause.Check(key, rules, 1);
            }
            case TOKEN_BUCKET: {
                List<TokenBucket> rules = new ArrayList<>();
                for (int item : c.items()) {
                    Limit l = policy.limitOf(item);
                    rules.add(new TokenBucket(l.burst(), runtime.count(policy.name(), l), l.window()));
                }
                return new Clause.Throttle(key, rules, 1);
            }
            case QUOTA: {
                List<QuotaLimit> limits = new ArrayList<>();
                for (int item : c.items()) {
                    Limit l = policy.limitOf(item);
                    limits.add(new QuotaLimit(l.period(), runtime.count(policy.name(), l)));
                }
                return new Clause.Quota(key, in.zone() != null ? ZoneId.of(in.zone()) : c.zone(), limits, 1);
            }
            default:
                throw new IllegalStateException(c.kind().name());
        }
    }

    // The decision a request sees: every call's items in call order (a name a previous call used is
    // qualified by its policy: "policy.name"), the binding one from the reply.
    private PolicyDecision decision(Batch b, Outcome r) {
        boolean limited = r.limited();
        int bindingCall = b.callOf[r.clause()];
        Policy bindingPolicy = b.calls.get(bindingCall).policy();
        PolicyClause bindingClause = bindingPolicy.clauses().get(b.clauseOf[r.clause()]);
        int bindingItem = bindingClause.items().get(r.rule() - 1);
        int[] offset = new int[b.calls.size() + 1];
        for (int k = 0; k < b.calls.size(); k++) {
            offset[k + 1] = offset[k] + b.calls.get(k).policy().itemNames().size();
        }
        LimitState[] states = new LimitState[offset[b.calls.size()]];
        boolean duplicateRefused = false;
        if (r.details() != null) {
            List<List<RuleState>> details = r.details();
            for (int fi = 0; fi < b.callOf.length && fi < details.size(); fi++) {
                List<RuleState> perRule = details.get(fi);
                if (perRule == null) {
                    continue;
                }
                Policy policy = b.calls.get(b.callOf[fi]).policy();
                PolicyClause c = policy.clauses().get(b.clauseOf[fi]);
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
        List<LimitState> items = new ArrayList<>(states.length);
        java.util.Set<String> names = b.calls.size() > 1 ? new java.util.HashSet<>() : null;
        int binding = -1;
        boolean legacy = false;
        for (int k = 0; k < b.calls.size(); k++) {
            Policy policy = b.calls.get(k).policy();
            legacy |= policy.legacyHeaders();
            for (int i = offset[k]; i < offset[k + 1]; i++) {
                LimitState s = states[i];
                if (s == null) {
                    continue;
                }
                if (names != null && !names.add(s.name())) {
                    s = new LimitState(policy.name() + "." + s.name(), s.q(), s.w(), s.r(), s.t(), s.limited(), s.retryAfterMs());
                    names.add(s.name());
                }
                if (i == bindingIndex) {
                    binding = items.size();
                }
                items.add(s);
            }
        }
        Limit bl = bindingPolicy.limitOf(bindingItem);
        PolicyDecision.Kind kind = !limited ? PolicyDecision.Kind.ADMITTED
                : duplicateRefused ? PolicyDecision.Kind.DUPLICATE : PolicyDecision.Kind.RATE_LIMITED;
        // A lease ends when its holder finishes, not when the module's reset says: a refusal by a concurrency
        // limit asks for a retry after the policy's inflightRetryAfter (1 s unless set), as in Python and Node.
        long retry = !limited ? -1 : bl != null && bl.kind() == Limit.Kind.CONCURRENCY && r.retryAfter() >= 0
                ? bindingPolicy.inflightRetryAfter().toMillis() : r.retryAfter();
        return new PolicyDecision(bindingPolicy.name(), !limited, List.copyOf(items), binding, retry,
                bl == null ? Limit.Kind.SLIDING_WINDOW : bl.kind(), kind, legacy);
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
    // The circuits (nodes, RedisAvailability) the keys of these clauses live on; one for one server.
    private List<String> nodes(List<Clause> clauses) {
        String first = availability.nodeOf(clauses.get(0).key());
        List<String> out = null;
        for (int i = 1; i < clauses.size(); i++) {
            String n = availability.nodeOf(clauses.get(i).key());
            if (!n.equals(first) && (out == null || !out.contains(n))) {
                if (out == null) {
                    out = new ArrayList<>(List.of(first));
                }
                out.add(n);
            }
        }
        return out == null ? List.of(first) : out;
    }

    // As above; a reply that comes after the budget (Redis ran the call late: a stall, or Lettuce
    // re-sent it after a reconnect) goes to `late`, which gives back what it took. Such a call is
    // not cancelled: a cancelled command may still run, and its reply would then be lost.
    // `nodes`: the circuits of the keys it touches. A failure of those nodes (a broken connection,
    // CLUSTERDOWN, TRYAGAIN, MASTERDOWN, LOADING) opens their circuits; an overrun counts towards it.
    private <T> CompletableFuture<T> within(CompletionStage<T> stage, java.util.function.Consumer<T> late, List<String> nodes) {
        return within(stage, late, List.of(), nodes);
    }

    // `leases`: the clauses sent; when the call fails without a reply from Redis (a broken connection, the
    // driver's command timeout, a cancellation), in time or late, it may still have run: their leases are
    // released by token once Redis answers again (LostLeases). An error reply ran nothing.
    private <T> CompletableFuture<T> within(CompletionStage<T> stage, java.util.function.Consumer<T> late, List<Clause> leases,
            List<String> nodes) {
        CompletableFuture<T> sent = stage.toCompletableFuture();
        CompletableFuture<T> reply = new CompletableFuture<>();
        sent.whenComplete((v, e) -> {
            boolean inTime = e == null ? reply.complete(v) : reply.completeExceptionally(e);
            if (!inTime && e == null && late != null) {
                late.accept(v);
            }
            if (e != null && !(unwrap(e) instanceof RateLimitException)) {
                lost.add(leases);
            }
        });
        return Timeouts.within(reply, budgetMs).handle((v, failure) -> {
            if (failure == null) {
                availability.answered(nodes);
                if (engineMissingLogged) {
                    engineMissingLogged = false;
                }
                return v;
            }
            Throwable cause = unwrap(failure);
            if (cause instanceof RateLimitException rle && !unavailableReply(rle)) {
                availability.answered(nodes);
                if (engineMissing(rle)) {
                    throw new Unavailable(rle);
                }
                throw rle;
            }
            if (cause instanceof TimeoutException) {
                if (late == null) {
                    sent.cancel(true);
                }
                availability.overran(nodes, cause);
            } else {
                availability.failed(nodes, cause);
            }
            throw new Unavailable(cause);
        });
    }

    // CLIENTS.md §3 "Module missing at run time" (a failover to a server without it), and the Functions
    // library gone with a user that may not load it again (LibraryNotLoadedException): no engine to decide
    // with, so the Redis-down mode decides, as in Python and Node (not a configuration error: an adapter's
    // 500); logged at error level once until a decision succeeds again. The circuit stays closed: each
    // request asks Redis, so decisions use it again as soon as the engine is back.
    private volatile boolean engineMissingLogged;

    private boolean engineMissing(RateLimitException e) {
        if (!(e instanceof ModuleNotLoadedException) && !FunctionsLibrary.moduleMissing(e.getMessage())) {
            return false;
        }
        if (!engineMissingLogged) {
            engineMissingLogged = true;
            log.log(System.Logger.Level.ERROR, "rate limit: {0}; deciding by each policy''s Redis-down mode", e.getMessage());
        }
        return true;
    }

    // Replies that say the node cannot decide now (CLIENTS.md §3): unavailable, not a misconfiguration.
    static boolean unavailableReply(RateLimitException e) {
        String m = e.getMessage();
        return m != null && (m.startsWith("CLUSTERDOWN") || m.startsWith("TRYAGAIN") || m.startsWith("MASTERDOWN")
                || m.startsWith("LOADING"));
    }

    // What an RL.ALL answered after its budget is given back when it admitted: the request was already
    // answered by the Redis-down behaviour, so its charges, leases and estimates must not stay taken
    // (RL.ALL ... REFUND: every clause refunded as its command's REFUND, a lease released by its token).
    private java.util.function.Consumer<AllDecision> late(List<Clause> clauses) {
        return r -> { // r null: a single command's admission (its caller checked)
            if (r != null && r.limited()) {
                return;
            }
            try {
                client.all(clauses, Options.none().withRefund()).whenComplete((v, e) -> {
                    if (e != null) {
                        log.log(System.Logger.Level.WARNING, "rate limit: a decision that came after the budget was not given back: {0}", unwrap(e).toString());
                        if (!(unwrap(e) instanceof RateLimitException)) {
                            lost.add(clauses); // its leases at least, by token once Redis answers again
                        }
                    }
                });
            } catch (RuntimeException e) {
                log.log(System.Logger.Level.WARNING, "rate limit: a decision that came after the budget was not given back: {0}", e.toString());
            }
        };
    }

    private LimitState state(Policy policy, int item, boolean limited, long remaining, long retry, long reset) {
        Limit l = policy.limitOf(item);
        long q = l == null ? 1 : runtime.count(policy.name(), l);
        long w = l == null ? Limit.ceilSeconds(policy.duplicateWindow().toMillis()) : l.windowSeconds();
        return new LimitState(policy.itemNames().get(item), q, w, Math.max(0, remaining), Limit.ceilSeconds(reset), limited,
                limited ? retry : -1);
    }

    private CompletableFuture<Permit> lockout(PolicyCall in) {
        Policy policy = in.policy();
        Limit l = policy.limits().get(0);
        String base = prefix + policy.name() + ":{" + in.key() + "}:" + l.name();
        long max = runtime.count(policy.name(), l);
        List<String> nodes = List.of(availability.nodeOf(base));
        if (availability.anyDown(nodes)) {
            return CompletableFuture.completedFuture(whenDown(List.of(in), null));
        }
        CompletionStage<LockoutDecision> sent;
        try {
            sent = client.lockcount(base + ":lock", base + ":count", l.window(), max, l.lockTime());
        } catch (IllegalArgumentException e) {
            throw new RateLimitConfigurationException("rate limit '" + policy.name() + "': " + e.getMessage(), e);
        }
        return within(sent, null, nodes).handle((r, failure) -> {
            Throwable e = unwrap(failure);
            if (e instanceof Unavailable) {
                return whenDown(List.of(in), e.getCause());
            }
            if (e instanceof LocalBackendFullException full) {
                throw new RateLimitRefusedException(full(policy, full));
            }
            if (e instanceof RateLimitException) {
                throw new RateLimitConfigurationException("Redis refused rate limit '" + policy.name() + "': " + e.getMessage(), e);
            }
            if (e != null) {
                throw e instanceof RuntimeException re ? re : new CompletionException(e);
            }
            boolean limited = r.limited();
            long ttl = r.ttlMillis();
            LimitState s = new LimitState(l.name(), max, l.windowSeconds(), limited ? 0 : Math.max(0, max - r.count()),
                    Limit.ceilSeconds(ttl), limited, limited ? ttl : -1);
            PolicyDecision d = new PolicyDecision(policy.name(), !limited, List.of(s), 0, limited ? ttl : -1, Limit.Kind.LOCKOUT,
                    limited ? PolicyDecision.Kind.LOCKED : PolicyDecision.Kind.ADMITTED, policy.legacyHeaders());
            if (limited) {
                throw new RateLimitRefusedException(d);
            }
            return new Permit(this, d, List.of(), List.of());
        });
    }

    // Each policy's Redis-down behaviour; one that fails closed answers 503 for the request.
    private Permit whenDown(List<PolicyCall> calls, Throwable why) {
        DecisionObserver o = observer;
        FailMode[] modes = new FailMode[calls.size()];
        PolicyCall closed = null;
        for (int k = 0; k < calls.size(); k++) {
            Policy policy = calls.get(k).policy();
            modes[k] = policy.onRedisDown() == null ? defaultDown : policy.onRedisDown();
            o.error(policy.name(), why == null ? DecisionObserver.ErrorKind.CIRCUIT_OPEN
                    : why instanceof TimeoutException ? DecisionObserver.ErrorKind.TIMEOUT : DecisionObserver.ErrorKind.CONNECTION);
            o.fallback(policy.name(), modes[k]);
            if (closed == null && (modes[k] == FailMode.CLOSED || (modes[k] == FailMode.LOCAL && local == null))) {
                closed = calls.get(k);
            }
        }
        if (closed != null) {
            throw new RateLimitUnavailableException(closed.policy().name(), why);
        }
        List<PolicyCall> locally = new ArrayList<>();
        for (int k = 0; k < calls.size(); k++) {
            if (modes[k] == FailMode.LOCAL) {
                locally.add(calls.get(k));
            }
        }
        if (locally.isEmpty()) {
            return new Permit(this, null, List.of(), List.of()); // OPEN: through, no decision (no headers)
        }
        // LOCAL: decided by this instance's local backend (the OPEN policies of the call let it through); its permit
        // settles there. A refusal carries the local retry-after (RateLimitRefusedException). The backend answers
        // at once, so the wait below is none.
        return local.acquire(locally);
    }

    // The local backend is full (LOCAL mode): refused until its earliest key expires. The policy's first limit is
    // named (as in Python and Node) with nothing left and that wait, so the 429 has its headers and Retry-After.
    private PolicyDecision full(Policy policy, LocalBackendFullException full) {
        long wait = Math.max(1, full.retryAfterMillis());
        List<LimitState> items = new ArrayList<>();
        if (!policy.limits().isEmpty()) {
            Limit l = policy.limits().get(0);
            items.add(new LimitState(l.name(), runtime.count(policy.name(), l), l.windowSeconds(), 0, Limit.ceilSeconds(wait), true, wait));
        }
        return new PolicyDecision(policy.name(), false, items, items.isEmpty() ? -1 : 0, wait,
                policy.limits().isEmpty() ? Limit.Kind.SLIDING_WINDOW : policy.limits().get(0).kind(), PolicyDecision.Kind.RATE_LIMITED,
                policy.legacyHeaders());
    }

    /**
     * Releases leases and settles estimates (sent back to back: pipelined);
     * the stage completes, never exceptionally, once every reply is in or
     * the budget has passed — a timeout, not a wait.
     */
    CompletableFuture<Void> finish(Permit permit, Permit.Usage used) {
        Map<PolicyCall, List<Clause>> uncounted = permit.uncounted();
        if (uncounted.isEmpty() && permit.leases().isEmpty() && permit.estimates().isEmpty()) {
            return CompletableFuture.completedFuture(null); // the usual permit (windows, buckets, quotas): nothing to send
        }
        List<CompletionStage<?>> sent = new ArrayList<>();
        for (List<Clause> back : uncounted.values()) {
            // One RL.ALL ... REFUND per call given back (one policy's keys share a Cluster slot): windows, buckets,
            // quotas, the estimate and the lease (by its token) given back.
            sent.add(client.all(back, Options.none().withRefund()));
        }
        try {
            for (Permit.Lease l : permit.leases()) {
                if (!uncounted.containsKey(l.call())) {
                    sent.add(client.release(l.key(), l.token()));
                }
            }
            for (Permit.Estimate e : permit.estimates()) {
                if (uncounted.containsKey(e.call())) {
                    continue;
                }
                // A usage above the clause's q in force (as sent) counts as that q, as in every client.
                Long reported = used.of(e.call(), e.clause());
                long u = Math.min(Math.max(0, reported == null ? 0L : reported), smallestQ(e.command()));
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
            log.log(System.Logger.Level.WARNING, "rate limit settlement not sent: {0}", e.getMessage());
        }
        if (sent.isEmpty()) {
            return CompletableFuture.completedFuture(null);
        }
        CompletableFuture<?>[] confirmed = new CompletableFuture<?>[sent.size()];
        java.util.concurrent.atomic.AtomicBoolean queued = new java.util.concurrent.atomic.AtomicBoolean();
        for (int i = 0; i < confirmed.length; i++) {
            CompletableFuture<?> f = sent.get(i).toCompletableFuture();
            f.whenComplete((v, e) -> {
                // The release (or the refund that carries it) lost without a reply: by token once Redis answers
                // again, so a lease is not held until its TTL; an estimate not settled stays charged.
                if (e != null && !(unwrap(e) instanceof RateLimitException) && queued.compareAndSet(false, true)) {
                    lost.addLeases(permit.leases());
                }
            });
            confirmed[i] = Timeouts.within(f.thenApply(v -> v), budgetMs)
                    .exceptionally(e -> {
                        log.log(System.Logger.Level.WARNING, "rate limit release/settlement not confirmed: {0}", unwrap(e).toString());
                        return null;
                    });
        }
        return CompletableFuture.allOf(confirmed);
    }

    /**
     * Whether an admitted call's leases are renewed (RL.RENEW to their TTL)
     * every third of their TTL while its permit is open (default true), so a
     * job that runs longer than the TTL keeps its slot (CLIENTS.md §4); false
     * lets a lease expire by its TTL whatever the work does.
     */
    public void setRenewLeases(boolean renew) {
        this.renewLeases = renew;
    }

    private volatile boolean renewLeases = true;

    // One daemon thread for every permit's renewal (a timer tick, then an asynchronous RL.RENEW).
    private static final class Renewals {
        static final java.util.concurrent.ScheduledExecutorService TIMER = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "ratelimit-lease-renewal");
            t.setDaemon(true);
            return t;
        });
    }

    private void renew(Permit permit) {
        if (!renewLeases || permit.leases().isEmpty()) {
            return;
        }
        long ttl = Long.MAX_VALUE;
        for (Permit.Lease l : permit.leases()) {
            ttl = Math.min(ttl, l.ttl().toMillis());
        }
        long every = Math.max(10, ttl / 3);
        permit.renewing(Renewals.TIMER.scheduleAtFixedRate(() -> {
            for (Permit.Lease l : permit.leases()) {
                if (permit.isClosed()) {
                    return;
                }
                try {
                    Timeouts.within(client.renew(l.key(), l.ttl(), l.token()).toCompletableFuture(), budgetMs).whenComplete((v, e) -> {
                        if (e != null) {
                            log.log(System.Logger.Level.WARNING, "rate limit lease {0} not renewed: {1}", l.key(), unwrap(e).toString());
                        }
                    });
                } catch (RuntimeException e) {
                    log.log(System.Logger.Level.WARNING, "rate limit lease {0} not renewed: {1}", l.key(), e.toString());
                }
            }
        }, every, every, TimeUnit.MILLISECONDS));
    }

    // The smallest q of a clause as it was sent: a window's count, a bucket's rate, a quota's limit.
    private static long smallestQ(Clause clause) {
        if (clause instanceof Clause.Check c) {
            return c.rules().stream().mapToLong(SlidingWindow::count).min().orElse(Limits.MAX);
        }
        if (clause instanceof Clause.Throttle t) {
            return t.rules().stream().mapToLong(TokenBucket::count).min().orElse(Limits.MAX);
        }
        if (clause instanceof Clause.Quota q) {
            return q.limits().stream().mapToLong(QuotaLimit::limit).min().orElse(Limits.MAX);
        }
        return Limits.MAX;
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

    private String key(Policy policy, PolicyClause c, PolicyCall in) {
        String tag = policy.tag();
        StringBuilder sb = new StringBuilder(prefix).append(policy.name()).append(":{");
        if (tag != null) {
            sb.append(tag).append("}:");
            if (!c.shared()) {
                sb.append(in.key()).append(':');
            }
        } else {
            sb.append(c.shared() ? policy.name() : in.key()).append("}:");
        }
        sb.append(c.keyName());
        if (c.duplicate()) {
            sb.append(':').append(in.subkey());
        }
        return sb.toString();
    }

    /**
     * Builds a {@link RateLimiter}: prefix {@code ""}, decision budget 500 ms,
     * Redis-down mode {@link FailMode#CLOSED}, probe every 1 s while Redis is
     * down, runtime limits read at build and every 250 ms.
     */
    public static final class Builder {
        private final RateLimitTransport transport;
        private final List<Policy> policies = new ArrayList<>();
        private String prefix = "";
        private Duration budget = Duration.ofMillis(500);
        private Duration probeInterval = Duration.ofSeconds(1);
        private Duration refreshInterval = Duration.ofMillis(250);
        private FailMode onRedisDown = FailMode.CLOSED;
        private LocalRateLimitTransport local;

        private Builder(RateLimitTransport transport) {
            this.transport = java.util.Objects.requireNonNull(transport, "transport");
        }

        /** Prepended to every key, and to the runtime limits' hash ({@code <prefix>ratelimit:limits}); no braces. */
        public Builder prefix(String prefix) {
            Limit.require(prefix != null && !prefix.contains("{") && !prefix.contains("}"), "prefix",
                    "prefix '" + prefix + "': without braces (they would move the hash tag)");
            this.prefix = prefix;
            return this;
        }

        /** How long a decision may wait for Redis before the Redis-down mode answers (above 0). */
        public Builder budget(Duration budget) {
            Limit.require(budget != null && budget.toMillis() >= 1, "budget " + budget + ": at least 1 ms");
            this.budget = budget;
            return this;
        }

        /** What a policy without its own mode does while Redis cannot decide. */
        public Builder onRedisDown(FailMode mode) {
            this.onRedisDown = java.util.Objects.requireNonNull(mode, "mode");
            return this;
        }

        /**
         * The backend {@link FailMode#LOCAL} decides on while Redis is down (default: a new
         * {@link LocalRateLimitTransport} on the system clock, 100,000 keys and 1,000,000 entries at most).
         */
        public Builder localBackend(LocalRateLimitTransport backend) {
            this.local = java.util.Objects.requireNonNull(backend, "backend");
            return this;
        }

        /** How often a Redis found down is PINGed (decisions use Redis again within about one interval of it answering). */
        public Builder probeInterval(Duration every) {
            Limit.require(every != null && every.toMillis() >= 10, "probe interval " + every + ": at least 10 ms");
            this.probeInterval = every;
            return this;
        }

        /** How often the runtime limits are read ({@code <prefix>ratelimit:limits}). */
        public Builder refreshInterval(Duration every) {
            Limit.require(every != null && every.toMillis() >= 10, "refresh interval " + every + ": at least 10 ms");
            this.refreshInterval = every;
            return this;
        }

        /** Registers a policy (decided by name: {@code acquire("sms", key)}). */
        public Builder policy(Policy policy) {
            policies.add(java.util.Objects.requireNonNull(policy, "policy"));
            return this;
        }

        /** The limiter, its runtime limits read once (a failure keeps the configured counts) and refreshed in the background. */
        public RateLimiter build() {
            RedisAvailability availability = new RedisAvailability(transport, probeInterval, budget);
            RuntimeLimits runtime = new RuntimeLimits(transport, prefix, budget.toMillis());
            RateLimiter limiter = new RateLimiter(new RateLimitAsyncClient(transport), runtime, availability, local, prefix,
                    budget, onRedisDown);
            for (Policy p : policies) {
                limiter.register(p);
            }
            runtime.refresh();
            limiter.owned.add(availability);
            limiter.owned.add(runtime.refreshEvery(refreshInterval));
            return limiter;
        }
    }
}
