package dev.redisratelimit.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * A named set of named {@link Limit limits} decided in one Redis call, grouped
 * into RL.ALL clauses once, when built: limits of one kind on one key share a
 * clause (sliding windows one CHECK, token buckets one THROTTLE, quota periods
 * of one zone one QUOTA), unless their cost, their settlement or their key
 * (shared or per key) differ; a clause's key ends with its first limit's
 * name; each concurrency limit is a LEASE clause; the duplicate-prevention
 * check, when on, is the last item, keyed by the call's subkey. A lockout
 * stands alone (RL.LOCKCOUNT is not an RL.ALL clause).
 *
 * <p>Checked when built (the refusals of the Python and Node clients):
 * distinct limit names, a lockout alone, at most one per-key concurrency
 * limit, no two token buckets or quotas of one period in one clause, no
 * braces in the name or tag, a fixed hash {@linkplain Builder#tag(String) tag}
 * beside a shared limit (so one RL.ALL stays in one Cluster slot).
 *
 * <pre>{@code
 * Policy sms = Policy.builder("sms")
 *     .slidingWindow("short", 2, Duration.ofSeconds(10))
 *     .slidingWindow("long", 5, Duration.ofHours(1))
 *     .build();
 * }</pre>
 *
 * A {@link RateLimiter} decides it ({@code limiter.acquire("sms", key)}).
 */
public final class Policy {

    private final String name;
    private final List<Limit> limits;
    private final Duration duplicateWindow;
    private final String tag;
    private final FailMode onRedisDown;
    private final boolean legacyHeaders;
    private final List<PolicyClause> clauses;
    private final List<String> itemNames;
    /** "failures" / "successes": only that outcome counts (set by the builder before the policy is shared); null: every call. */
    private String counts;
    /** The Retry-After of a refusal by a concurrency limit (set by the builder before the policy is shared). */
    private Duration inflightRetryAfter = DEFAULT_INFLIGHT_RETRY_AFTER;

    /** A lease ends when its holder finishes, not at a reset the module knows: 1 s, as the Python and Node clients. */
    public static final Duration DEFAULT_INFLIGHT_RETRY_AFTER = Duration.ofSeconds(1);

    /**
     * A policy from its parts (the {@link #builder} is the usual way).
     *
     * @param duplicateWindow null, or the window in which a second call with the same subkey is refused
     * @param tag a fixed Cluster hash tag, or null
     * @param onRedisDown null: the limiter's default
     * @param legacyHeaders HTTP adapters also send {@code X-RateLimit-*} headers
     */
    public Policy(String name, List<Limit> limits, Duration duplicateWindow, String tag, FailMode onRedisDown, boolean legacyHeaders) {
        Limit.require(name != null && !name.isBlank(), "name", "a policy needs a name");
        Limit.require(!(name.contains("{") || name.contains("}")), "name", "policy '" + name + "': a name without braces");
        // Duplicate prevention alone is a policy too (one RL.CHECK of count 1 on the subkey), as in every client.
        Limit.require(limits != null && (!limits.isEmpty() || duplicateWindow != null), "limits", "policy '" + name + "' has no limits");
        limits = List.copyOf(limits);
        Set<String> names = new HashSet<>();
        boolean anyShared = false;
        for (Limit l : limits) {
            Limit.require(names.add(l.name()), "limit_name", "policy '" + name + "': two limits named '" + l.name() + "'");
            Limit.require(!"duplicate".equals(l.name()) || duplicateWindow == null, "limit_name",
                    "policy '" + name + "': 'duplicate' names its duplicate-prevention item");
            if (l.kind() == Limit.Kind.LOCKOUT) {
                Limit.require(limits.size() == 1 && duplicateWindow == null, "limits",
                        "policy '" + name + "': a LOCKOUT limit is alone in its policy (RL.LOCKCOUNT is not an RL.ALL clause)");
            }
            anyShared |= l.shared();
        }
        Limit.require(duplicateWindow == null || duplicateWindow.toMillis() >= 1, "window",
                "policy '" + name + "': preventDuplicate must be at least 1 ms");
        Limit.require(tag == null || !tag.isEmpty(), "tag", "policy '" + name + "': an empty tag (null: none)");
        // Under Cluster every key of one RL.ALL shares a slot: a shared limit's key holds the tag the per-key ones do.
        Limit.require(!anyShared || tag != null, "tag", "policy '" + name + "': a shared limit needs the policy's tag");
        Limit.require(tag == null || !(tag.contains("{") || tag.contains("}")), "tag", "policy '" + name + "': a hash tag without braces");
        this.name = name;
        this.limits = limits;
        this.duplicateWindow = duplicateWindow;
        this.tag = tag;
        this.onRedisDown = onRedisDown;
        this.legacyHeaders = legacyHeaders;
        List<PolicyClause> out = group(name, limits);
        List<String> items = new ArrayList<>();
        for (Limit l : limits) {
            items.add(l.name());
        }
        if (duplicateWindow != null) {
            out.add(new PolicyClause(Limit.Kind.SLIDING_WINDOW, List.of(limits.size()), false, null, null, null, true, "duplicate"));
            items.add("duplicate");
        }
        for (PolicyClause c : out) {
            Limit.require(c.items().size() <= 64, "limits", "policy '" + name + "': more than 64 rules in one clause");
        }
        Limit.require(out.size() <= 64, "limits", "policy '" + name + "': more than 64 clauses");
        this.clauses = List.copyOf(out);
        this.itemNames = List.copyOf(items);
    }

    public static Builder builder(String name) {
        return new Builder(name);
    }

    // Same kind, key (shared or not), zone, cost and settlement → one clause, placed where the first of them is and
    // keyed by its name (CLIENTS.md §2). What the module keeps one state for may appear once per clause: two token
    // buckets of one period or two quotas of one period are refused, as is a second per-key concurrency limit
    // (Python's refusals: the three clients accept the same definitions).
    private static List<PolicyClause> group(String policy, List<Limit> limits) {
        List<PolicyClause> out = new ArrayList<>();
        int leases = 0;
        for (int i = 0; i < limits.size(); i++) {
            Limit l = limits.get(i);
            PolicyClause joined = null;
            if (l.kind() == Limit.Kind.CONCURRENCY && !l.shared()) {
                Limit.require(++leases <= 1, "limits", "policy '" + policy + "': at most one per-key concurrency limit per policy");
            }
            if (l.kind() != Limit.Kind.CONCURRENCY && l.kind() != Limit.Kind.LOCKOUT) {
                for (int c = 0; c < out.size(); c++) {
                    PolicyClause k = out.get(c);
                    if (k.kind() == l.kind() && k.shared() == l.shared() && !k.duplicate()
                            && Objects.equals(k.zone(), l.kind() == Limit.Kind.QUOTA ? l.zone() : null)
                            && Objects.equals(k.cost(), l.cost()) && Objects.equals(k.settle(), l.settle())) {
                        refuseSamePeriod(policy, l, k, limits);
                        List<Integer> items = new ArrayList<>(k.items());
                        items.add(i);
                        joined = new PolicyClause(k.kind(), List.copyOf(items), k.shared(), k.zone(), k.cost(), k.settle(), false,
                                k.keyName());
                        out.set(c, joined);
                        break;
                    }
                }
            }
            if (joined == null) {
                out.add(new PolicyClause(l.kind(), List.of(i), l.shared(), l.kind() == Limit.Kind.QUOTA ? l.zone() : null,
                        l.cost(), l.settle(), false, l.name()));
            }
        }
        return out;
    }

    private static void refuseSamePeriod(String policy, Limit l, PolicyClause k, List<Limit> limits) {
        for (int idx : k.items()) {
            Limit o = limits.get(idx);
            Limit.require(!(l.kind() == Limit.Kind.QUOTA && o.period() == l.period()), "limits",
                    "policy '" + policy + "': quotas '" + o.name() + "' and '" + l.name() + "' have the same period");
            Limit.require(!(l.kind() == Limit.Kind.TOKEN_BUCKET && o.window().equals(l.window())), "limits",
                    "policy '" + policy + "': token buckets '" + o.name() + "' and '" + l.name() + "' have the same period");
        }
    }

    public String name() {
        return name;
    }

    /** The limits, in the order given. */
    public List<Limit> limits() {
        return limits;
    }

    /** The limit named {@code limitName}, or null. */
    public Limit limit(String limitName) {
        for (Limit l : limits) {
            if (l.name().equals(limitName)) {
                return l;
            }
        }
        return null;
    }

    /** The window of duplicate prevention (a call's subkey seen twice in it is refused), or null when off. */
    public Duration duplicateWindow() {
        return duplicateWindow;
    }

    /** The fixed Cluster hash tag, or null (the caller's key is the tag). */
    public String tag() {
        return tag;
    }

    /** What this policy does while Redis cannot decide; null: the limiter's default. */
    public FailMode onRedisDown() {
        return onRedisDown;
    }

    /** HTTP adapters also send the {@code X-RateLimit-*} headers of the binding limit. */
    public boolean legacyHeaders() {
        return legacyHeaders;
    }

    /** The RL.ALL clauses, in order (a call's costs are given per clause: {@link PolicyCall#costs()}). */
    public List<PolicyClause> clauses() {
        return clauses;
    }

    /** Every item a decision shows, in order: the limits' names, then "duplicate" when on. */
    public List<String> itemNames() {
        return itemNames;
    }

    /**
     * The outcome that counts: {@code "failures"}, {@code "successes"}, or null (every call). A call of the other
     * outcome is given back whole when its permit closes ({@link Permit#failed()}, {@link Permit#succeeded()}).
     */
    public String counts() {
        return counts;
    }

    /** This policy counting only {@code "failures"} or {@code "successes"} (null or empty: every call), as {@link Builder#counts}. */
    public Policy withCounts(String outcome) {
        if (outcome == null || outcome.isEmpty()) {
            return this;
        }
        Limit.require(outcome.equals("failures") || outcome.equals("successes"), "counts",
                "'" + outcome + "' is not \"failures\" or \"successes\"");
        Limit.require(!isLockout() && limits.stream().anyMatch(l -> l.kind() == Limit.Kind.SLIDING_WINDOW
                || l.kind() == Limit.Kind.TOKEN_BUCKET || l.kind() == Limit.Kind.QUOTA), "counts",
                "policy '" + name + "' needs a window, bucket or quota to count one outcome (a lockout cannot refund)");
        Policy p = new Policy(name, limits, duplicateWindow, tag, onRedisDown, legacyHeaders);
        p.counts = outcome;
        p.inflightRetryAfter = inflightRetryAfter;
        return p;
    }

    /**
     * The {@code Retry-After} of a refusal by one of this policy's concurrency limits (default 1 s): when a lease
     * comes back depends on its holder, not on a reset Redis knows. Python's and Node's {@code inflight_retry_after}.
     */
    public Duration inflightRetryAfter() {
        return inflightRetryAfter;
    }

    /** This policy with another in-flight {@code Retry-After} (0 or more, whole milliseconds), as {@link Builder#inflightRetryAfter}. */
    public Policy withInflightRetryAfter(Duration retryAfter) {
        Limit.require(retryAfter != null && !retryAfter.isNegative(), "inflight_retry_after",
                "policy '" + name + "': inflight_retry_after " + retryAfter + " must be 0 or more");
        Policy p = new Policy(name, limits, duplicateWindow, tag, onRedisDown, legacyHeaders);
        p.counts = counts;
        p.inflightRetryAfter = retryAfter;
        return p;
    }

    public boolean isLockout() {
        return !limits.isEmpty() && limits.get(0).kind() == Limit.Kind.LOCKOUT;
    }

    /** The limit behind item i, or null for the duplicate item. */
    public Limit limitOf(int item) {
        return item < limits.size() ? limits.get(item) : null;
    }

    @Override
    public String toString() {
        return "Policy[" + name + ", " + limits + "]";
    }

    /** Builds a {@link Policy}. */
    public static final class Builder {
        private final String name;
        private final List<Limit> limits = new ArrayList<>();
        private Duration duplicateWindow;
        private String tag;
        private FailMode onRedisDown;
        private boolean legacyHeaders;
        private String counts;
        private Duration inflightRetryAfter = DEFAULT_INFLIGHT_RETRY_AFTER;

        private Builder(String name) {
            this.name = name;
        }

        /** Any limit (e.g. {@code Limit.quota(...).estimated()}, {@code Limit.slidingWindow(...).asShared()}). */
        public Builder limit(Limit limit) {
            limits.add(Objects.requireNonNull(limit, "limit"));
            return this;
        }

        /** Limits as text, each a sliding window: {@code "5/minute;100/hour"} ({@link LimitText#parse}). */
        public Builder limits(String text) {
            LimitText.parse(text).forEach(this::limit);
            return this;
        }

        public Builder slidingWindow(String name, long count, Duration window) {
            return limit(Limit.slidingWindow(name, count, window));
        }

        public Builder tokenBucket(String name, long rate, Duration per, long burst) {
            return limit(Limit.tokenBucket(name, rate, per, burst));
        }

        public Builder quota(String name, java.time.ZoneId zone, QuotaPeriod period, long limit) {
            return limit(Limit.quota(name, zone, period, limit));
        }

        public Builder concurrency(String name, long limit, Duration ttl) {
            return limit(Limit.concurrency(name, limit, ttl));
        }

        public Builder lockout(String name, long max, Duration window, Duration lockTime) {
            return limit(Limit.lockout(name, max, window, lockTime));
        }

        /** A fixed hash tag for every key of the policy (needed beside a shared limit). */
        public Builder tag(String tag) {
            this.tag = tag;
            return this;
        }

        /** Refuses a second call with the same subkey (e.g. a body digest) within {@code window}. */
        public Builder preventDuplicates(Duration window) {
            this.duplicateWindow = window;
            return this;
        }

        /** What the policy does while Redis cannot decide (default: the limiter's). */
        public Builder onRedisDown(FailMode mode) {
            this.onRedisDown = mode;
            return this;
        }

        /** HTTP adapters also send {@code X-RateLimit-*} headers. */
        public Builder legacyHeaders(boolean on) {
            this.legacyHeaders = on;
            return this;
        }

        /**
         * Count only {@code "failures"} or only {@code "successes"} (express-rate-limit's skipSuccessfulRequests /
         * skipFailedRequests): every call is charged up front, and one RL.ALL ... REFUND gives it back when its
         * permit closes with the other outcome. Needs a window, bucket or quota (a lockout cannot refund).
         */
        public Builder counts(String outcome) {
            this.counts = outcome;
            return this;
        }

        /** The {@code Retry-After} of a refusal by a concurrency limit (default 1 s; {@link Policy#inflightRetryAfter()}). */
        public Builder inflightRetryAfter(Duration retryAfter) {
            this.inflightRetryAfter = retryAfter;
            return this;
        }

        public Policy build() {
            Policy p = new Policy(name, limits, duplicateWindow, tag, onRedisDown, legacyHeaders).withCounts(counts);
            return inflightRetryAfter == DEFAULT_INFLIGHT_RETRY_AFTER ? p : p.withInflightRetryAfter(inflightRetryAfter);
        }
    }
}
