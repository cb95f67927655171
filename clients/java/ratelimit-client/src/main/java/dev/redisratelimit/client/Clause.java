package dev.redisratelimit.client;

import java.time.Duration;
import java.time.ZoneId;
import java.util.List;

/**
 * One clause of RL.ALL / RL.ALLPEEK: a limiter on its own key, decided
 * all-or-nothing with the others. The key indexes and {@code numkeys} are
 * derived from the clauses' keys (every key used by exactly one clause).
 * Under Cluster, give the keys one hash tag ({@code {user:42}:rate}).
 */
public sealed interface Clause permits Clause.Check, Clause.Throttle, Clause.Quota, Clause.Lease {

    String key();

    /** This clause's cost (default 1; 0 only in RL.ALLPEEK). */
    long cost();

    /** How many rules this clause counts toward the 64-rule cap. */
    int ruleCount();

    /** The same clause with another cost. */
    Clause withCost(long cost);

    static Check check(String key, SlidingWindow... rules) {
        return new Check(key, List.of(rules), 1);
    }

    static Throttle throttle(String key, TokenBucket... rules) {
        return new Throttle(key, List.of(rules), 1);
    }

    static Quota quota(String key, ZoneId zone, QuotaLimit... limits) {
        return new Quota(key, zone, List.of(limits), 1);
    }

    /** A lease clause; {@code token} is required in RL.ALL, optional (null) in RL.ALLPEEK. */
    static Lease lease(String key, long limit, Duration ttl, String token) {
        return new Lease(key, limit, ttl, token, 1);
    }

    record Check(String key, List<SlidingWindow> rules, long cost) implements Clause {
        public Check {
            Limits.key("key", key);
            rules = List.copyOf(rules);
            if (rules.isEmpty()) {
                throw new IllegalArgumentException("a CHECK clause needs at least one rule");
            }
        }

        @Override
        public int ruleCount() {
            return rules.size();
        }

        @Override
        public Check withCost(long cost) {
            return new Check(key, rules, cost);
        }
    }

    record Throttle(String key, List<TokenBucket> rules, long cost) implements Clause {
        public Throttle {
            Limits.key("key", key);
            rules = List.copyOf(rules);
            if (rules.isEmpty()) {
                throw new IllegalArgumentException("a THROTTLE clause needs at least one rule");
            }
        }

        @Override
        public int ruleCount() {
            return rules.size();
        }

        @Override
        public Throttle withCost(long cost) {
            return new Throttle(key, rules, cost);
        }
    }

    record Quota(String key, ZoneId zone, List<QuotaLimit> limits, long cost) implements Clause {
        public Quota {
            Limits.key("key", key);
            limits = List.copyOf(limits);
            if (limits.isEmpty()) {
                throw new IllegalArgumentException("a QUOTA clause needs at least one period");
            }
        }

        @Override
        public int ruleCount() {
            return limits.size();
        }

        @Override
        public Quota withCost(long cost) {
            return new Quota(key, zone, limits, cost);
        }
    }

    record Lease(String key, long limit, Duration ttl, String token, long cost) implements Clause {
        public Lease {
            Limits.key("key", key);
            if (token != null) {
                Limits.token(token);
            }
        }

        @Override
        public int ruleCount() {
            return 1;
        }

        @Override
        public Lease withCost(long cost) {
            return new Lease(key, limit, ttl, token, cost);
        }
    }
}
