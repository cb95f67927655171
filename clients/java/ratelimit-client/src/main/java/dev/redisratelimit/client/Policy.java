package dev.redisratelimit.client;

import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.regex.Pattern;

/**
 * A named set of named limits decided in <b>one</b> call: one RL.ALL with
 * {@code DETAILS} (every limit's state in the reply), or the one command of a
 * policy that has a single limit. Sliding windows share one CHECK clause,
 * token buckets one THROTTLE clause, quotas of one zone one QUOTA clause; a
 * concurrency limit is a LEASE clause; a lockout (RL.LOCKCOUNT) stands alone.
 *
 * <p>Keys: {@code <prefix><policy>:{<key>}:<limit>} — the caller's key in a
 * hash tag, so one policy's keys share a Cluster slot — or, with a fixed
 * {@link Builder#tag(String) tag}, {@code <prefix><policy>:{<tag>}:<key>:<limit>}.
 * {@code <limit>} is the name of the clause's first limit.
 *
 * <pre>{@code
 * Policy api = Policy.builder("api")
 *     .slidingWindow("short", 2, Duration.ofSeconds(10))
 *     .slidingWindow("long", 5, Duration.ofHours(1))
 *     .build();
 * PolicyDecision d = api.decide(rl, "user:42");
 * try (Permit p = llm.acquire(rl, "user:42", 500)) {  // estimate 500 tokens
 *     if (p.admitted()) { p.used(callTheModel()); }
 * }                                                   // settled (DEBIT/REFUND) and released here
 * }</pre>
 */
public final class Policy {

    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_.\\-]{1,64}");

    private final String name;
    private final String prefix;
    private final String tag;
    private final long cost;
    private final List<Limit> limits;
    private final List<Group> groups;

    /** Limits decided by one clause (or one command), in the policy's order. */
    record Group(Limit.Kind kind, List<Limit> limits) {
        String suffix() {
            return limits.get(0).name();
        }

        boolean estimated() {
            return kind == Limit.Kind.TOKEN_BUCKET || kind == Limit.Kind.QUOTA;
        }
    }

    private Policy(Builder b) {
        this.name = b.name;
        this.prefix = b.prefix;
        this.tag = b.tag;
        this.cost = b.cost;
        this.limits = List.copyOf(b.limits);
        if (limits.isEmpty()) {
            throw new IllegalArgumentException("policy '" + name + "' has no limit");
        }
        Set<String> names = new HashSet<>();
        for (Limit l : limits) {
            if (!names.add(l.name())) {
                throw new IllegalArgumentException("policy '" + name + "' names limit '" + l.name() + "' twice");
            }
        }
        this.groups = group(limits);
        boolean lockout = limits.stream().anyMatch(l -> l.kind() == Limit.Kind.LOCKOUT);
        if (lockout && limits.size() > 1) {
            throw new IllegalArgumentException("a lockout limit stands alone in its policy (RL.LOCKCOUNT is not an RL.ALL clause)");
        }
        if (limits.stream().filter(l -> l.kind() == Limit.Kind.CONCURRENCY).count() > 1) {
            throw new IllegalArgumentException("at most one concurrency limit per policy");
        }
        // Validate every call shape up front: a bad combination fails here, not per request.
        plan("probe", cost, cost, "probe");
    }

    public static Builder builder(String name) {
        return new Builder(name);
    }

    public String name() {
        return name;
    }

    public List<Limit> limits() {
        return limits;
    }

    public long cost() {
        return cost;
    }

    /** Decides {@code key} under this policy in one call (a lease taken here is not released: use {@link #acquire}). */
    public PolicyDecision decide(RateLimitClient client, String key) {
        return client.execute(plan(key, cost, cost, newToken()).call());
    }

    /** As {@link #decide}, asynchronously. */
    public java.util.concurrent.CompletionStage<PolicyDecision> decideAsync(RateLimitAsyncClient client, String key) {
        return client.execute(plan(key, cost, cost, newToken()).call());
    }

    /** Decides {@code key} and holds what it took until the permit is closed. */
    public Permit acquire(RateLimitClient client, String key) {
        return acquire(client, key, cost);
    }

    /**
     * Decides {@code key}, charging {@code estimate} to the token-bucket and quota
     * limits (the policy's cost to the others); closing the permit settles those
     * to the usage reported ({@link Permit#used}) by DEBIT or REFUND and releases
     * the concurrency lease, in one pipelined round trip.
     */
    public Permit acquire(RateLimitClient client, String key, long estimate) {
        Plan plan = plan(key, cost, estimate, newToken());
        PolicyDecision decision = client.execute(plan.call());
        return new Permit(client, plan, decision);
    }

    private static String newToken() {
        return UUID.randomUUID().toString();
    }

    /** The clause keys of {@code key}, one per group in order. */
    List<String> keys(String key) {
        if (key == null || key.isEmpty()) {
            throw new IllegalArgumentException("invalid key '" + key + "': a non-empty string");
        }
        List<String> keys = new ArrayList<>(groups.size());
        for (Group g : groups) {
            keys.add(tag == null ? prefix + name + ":{" + key + "}:" + g.suffix() : prefix + name + ":{" + tag + "}:" + key + ":" + g.suffix());
        }
        return keys;
    }

    /** Everything one decision and its settlement need (no I/O). */
    Plan plan(String key, long cost, long estimate, String token) {
        List<String> keys = keys(key);
        if (groups.size() == 1 && groups.get(0).limits().size() == 1) {
            return single(keys.get(0), groups.get(0), cost, estimate, token);
        }
        List<Clause> clauses = new ArrayList<>();
        for (int i = 0; i < groups.size(); i++) {
            clauses.add(clause(keys.get(i), groups.get(i), cost, estimate, token));
        }
        Call<AllDecision> all = Calls.all(clauses, Options.none().withDetails());
        return new Plan(this, keys, clauses, token, estimate, new Call<>(all.command(), reply -> PolicyDecision.of(this, all.read(reply))));
    }

    private Plan single(String key, Group g, long cost, long estimate, String token) {
        Limit l = g.limits().get(0);
        Clause clause = clause(key, g, cost, estimate, token);
        Call<PolicyDecision> call = switch (l.kind()) {
            case SLIDING_WINDOW -> map(Calls.check(key, List.of(l.slidingWindowRule()), Options.none().withCost(cost)), l);
            case TOKEN_BUCKET -> map(Calls.throttle(key, List.of(l.tokenBucketRule()), Options.none().withCost(estimate)), l);
            case QUOTA -> map(Calls.quota(key, l.zone(), List.of(l.quotaLimit()), Options.none().withCost(estimate)), l);
            case CONCURRENCY -> map(Calls.lease(key, l.quota(), l.ttl(), Options.none().withToken(token)), l);
            case LOCKOUT -> {
                Call<LockoutDecision> lock = Calls.lockcount(key, key + ":count", l.window().orElseThrow(), l.quota(), l.lockTime());
                yield new Call<>(lock.command(), reply -> PolicyDecision.ofLockout(this, l, lock.read(reply)));
            }
        };
        return new Plan(this, List.of(key), clause == null ? List.of() : List.of(clause), token, estimate, call);
    }

    private <D extends Decision> Call<PolicyDecision> map(Call<D> call, Limit l) {
        return new Call<>(call.command(), reply -> PolicyDecision.ofSingle(this, l, call.read(reply)));
    }

    private static Clause clause(String key, Group g, long cost, long estimate, String token) {
        List<Limit> ls = g.limits();
        switch (g.kind()) {
            case SLIDING_WINDOW:
                return Clause.check(key, ls.stream().map(Limit::slidingWindowRule).toArray(SlidingWindow[]::new)).withCost(cost);
            case TOKEN_BUCKET:
                return Clause.throttle(key, ls.stream().map(Limit::tokenBucketRule).toArray(TokenBucket[]::new)).withCost(estimate);
            case QUOTA:
                return Clause.quota(key, ls.get(0).zone(), ls.stream().map(Limit::quotaLimit).toArray(QuotaLimit[]::new)).withCost(estimate);
            case CONCURRENCY:
                return Clause.lease(key, ls.get(0).quota(), ls.get(0).ttl(), token);
            default:
                return null; // a lockout is no clause
        }
    }

    private static List<Group> group(List<Limit> limits) {
        // Same kind (and, for quotas, same zone) → one clause, placed where the kind first appears.
        Map<String, List<Limit>> byClause = new LinkedHashMap<>();
        for (Limit l : limits) {
            String id = l.kind() == Limit.Kind.QUOTA ? "QUOTA " + l.zone().getId()
                    : l.kind() == Limit.Kind.CONCURRENCY ? "LEASE " + l.name() : l.kind().name();
            byClause.computeIfAbsent(id, k -> new ArrayList<>()).add(l);
        }
        List<Group> groups = new ArrayList<>();
        for (List<Limit> ls : byClause.values()) {
            groups.add(new Group(ls.get(0).kind(), List.copyOf(ls)));
        }
        return List.copyOf(groups);
    }

    List<Group> groups() {
        return groups;
    }

    /** The one call, and what a permit settles afterwards. */
    record Plan(Policy policy, List<String> keys, List<Clause> clauses, String token, long estimate, Call<PolicyDecision> call) {
    }

    /** Builds a {@link Policy}. */
    public static final class Builder {
        private final String name;
        private String prefix = "rl:";
        private String tag;
        private long cost = 1;
        private final List<Limit> limits = new ArrayList<>();

        private Builder(String name) {
            if (name == null || !NAME.matcher(name).matches()) {
                throw new IllegalArgumentException("invalid policy name '" + name + "': 1 to 64 letters, digits, '_', '.', '-'");
            }
            this.name = name;
        }

        /** Key prefix (default {@code rl:}). */
        public Builder prefix(String prefix) {
            this.prefix = Objects.requireNonNull(prefix, "prefix");
            return this;
        }

        /** A fixed hash tag for every key of the policy (a global limit decided with per-key ones). */
        public Builder tag(String tag) {
            if (tag == null || tag.isEmpty() || tag.contains("{") || tag.contains("}")) {
                throw new IllegalArgumentException("invalid tag '" + tag + "': non-empty, without braces");
            }
            this.tag = tag;
            return this;
        }

        /** The units each call charges (default 1). */
        public Builder cost(long cost) {
            Limits.positive("cost", cost);
            this.cost = cost;
            return this;
        }

        public Builder slidingWindow(String name, long count, Duration window) {
            limits.add(Limit.slidingWindow(name, count, window));
            return this;
        }

        public Builder tokenBucket(String name, long rate, Duration per, long burst) {
            limits.add(Limit.tokenBucket(name, rate, per, burst));
            return this;
        }

        public Builder quota(String name, ZoneId zone, QuotaPeriod period, long limit) {
            limits.add(Limit.quota(name, zone, period, limit));
            return this;
        }

        public Builder concurrency(String name, long limit, Duration ttl) {
            limits.add(Limit.concurrency(name, limit, ttl));
            return this;
        }

        public Builder lockout(String name, long max, Duration window, Duration lockTime) {
            limits.add(Limit.lockout(name, max, window, lockTime));
            return this;
        }

        public Policy build() {
            return new Policy(this);
        }
    }
}
