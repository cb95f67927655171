package dev.redisratelimit.client;

import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Builds every RL command from typed arguments, refusing what the module
 * would refuse (with the module's meaning) before anything is sent:
 * {@code IllegalArgumentException}. One factory per command; the clients'
 * methods of the same names send them.
 */
public final class Calls {

    private Calls() {
    }

    // ---- RL.CHECK / RL.PEEK -------------------------------------------------

    public static Call<Decision> check(String key, List<SlidingWindow> rules, Options options) {
        return new Call<>(slidingWindow("RL.CHECK", key, rules, options, false), Replies::decision);
    }

    public static Call<Decision> peek(String key, List<SlidingWindow> rules, Options options) {
        return new Call<>(slidingWindow("RL.PEEK", key, rules, options, true), Replies::decision);
    }

    private static RedisCall slidingWindow(String command, String key, List<SlidingWindow> rules, Options options, boolean peek) {
        Args a = Args.start(key, options);
        ruleCount(rules.size());
        long smallest = Long.MAX_VALUE;
        for (SlidingWindow rule : rules) {
            a.add(rule.count()).add(rule.windowMillis());
            smallest = Math.min(smallest, rule.count());
        }
        noReserveOrToken(command, options);
        Long cost = options.cost();
        if (peek) {
            modeNotAllowed(command, options);
            if (cost != null) {
                range("cost", cost, 0, Math.min(smallest, Limits.COST_CAP));
            }
        } else if (cost != null) {
            long max = options.mode() == Options.Mode.ADMIT ? Math.min(smallest, Limits.COST_CAP) : Limits.COST_CAP;
            range("cost", cost, 1, max);
        }
        a.cost(cost).mode(options.mode());
        return a.call(command);
    }

    // ---- RL.THROTTLE / RL.THROTTLEPEEK --------------------------------------

    public static Call<Decision> throttle(String key, List<TokenBucket> rules, Options options) {
        return new Call<>(tokenBucket("RL.THROTTLE", key, rules, options, false), Replies::decision);
    }

    public static Call<Decision> throttlePeek(String key, List<TokenBucket> rules, Options options) {
        return new Call<>(tokenBucket("RL.THROTTLEPEEK", key, rules, options, true), Replies::decision);
    }

    private static RedisCall tokenBucket(String command, String key, List<TokenBucket> rules, Options options, boolean peek) {
        Args a = Args.start(key, options);
        ruleCount(rules.size());
        long smallest = Long.MAX_VALUE;
        Set<Long> windows = new HashSet<>();
        for (int i = 0; i < rules.size(); i++) {
            TokenBucket rule = rules.get(i);
            if (!windows.add(rule.windowMillis())) {
                throw new IllegalArgumentException("rule " + (i + 1) + " repeats window " + rule.windowMillis()
                        + " ms: RL.THROTTLE keeps one state per window");
            }
            a.add(rule.burst()).add(rule.count()).add(rule.windowMillis());
            smallest = Math.min(smallest, rule.burst());
        }
        if (options.token() != null) {
            throw new IllegalArgumentException(command + " takes no TOKEN");
        }
        Long cost = options.cost();
        if (peek) {
            modeNotAllowed(command, options);
            if (cost != null) {
                range("cost", cost, 0, smallest);
            }
        } else if (cost != null) {
            range("cost", cost, 1, options.mode() == Options.Mode.ADMIT ? smallest : Limits.MAX);
        }
        if (options.reserve() != null && options.mode() != Options.Mode.ADMIT) {
            throw new IllegalArgumentException("RESERVE excludes " + options.mode());
        }
        a.cost(cost).mode(options.mode());
        if (options.reserve() != null) {
            a.add("RESERVE").add(Limits.millisOrZero("RESERVE max_wait", options.reserve()));
        }
        return a.call(command);
    }

    // ---- RL.QUOTA / RL.QUOTAPEEK --------------------------------------------

    public static Call<Decision> quota(String key, ZoneId zone, List<QuotaLimit> limits, Options options) {
        return new Call<>(calendar("RL.QUOTA", key, zone, limits, options, false), Replies::decision);
    }

    public static Call<Decision> quotaPeek(String key, ZoneId zone, List<QuotaLimit> limits, Options options) {
        return new Call<>(calendar("RL.QUOTAPEEK", key, zone, limits, options, true), Replies::decision);
    }

    private static RedisCall calendar(String command, String key, ZoneId zone, List<QuotaLimit> limits, Options options, boolean peek) {
        if (options.now() != null && options.now().toEpochMilli() > Limits.QUOTA_NOW_MAX) {
            throw new IllegalArgumentException("invalid now '" + options.now() + "': RL.QUOTA takes times up to the end of year 9999 UTC");
        }
        Args a = Args.start(key, options);
        a.add(Zones.toArgument(zone));
        periods(limits);
        for (QuotaLimit limit : limits) {
            a.add(limit.period().name()).add(limit.limit());
        }
        noReserveOrToken(command, options);
        Long cost = options.cost();
        if (peek) {
            modeNotAllowed(command, options);
            if (cost != null) {
                range("cost", cost, 0, Limits.MAX);
            }
        } else if (cost != null) {
            range("cost", cost, 1, Limits.MAX);
        }
        a.cost(cost).mode(options.mode());
        return a.call(command);
    }

    private static void periods(List<QuotaLimit> limits) {
        if (limits.isEmpty()) {
            throw new IllegalArgumentException("at least one period is required");
        }
        EnumSet<QuotaPeriod> seen = EnumSet.noneOf(QuotaPeriod.class);
        for (QuotaLimit limit : limits) {
            if (!seen.add(limit.period())) {
                throw new IllegalArgumentException("period " + limit.period() + " given twice");
            }
        }
    }

    // ---- RL.DAYHOUR / RL.LOCKCOUNT ------------------------------------------

    public static Call<DayHourDecision> dayhour(String dayKey, String hourKey, long dayLimit, long hourLimit, Duration dayTtl,
            Duration hourTtl) {
        Limits.key("dayKey", dayKey);
        Limits.key("hourKey", hourKey);
        if (dayKey.equals(hourKey)) {
            throw new IllegalArgumentException("daykey and hourkey must differ");
        }
        Limits.nonNegative("daylimit", dayLimit);
        Limits.nonNegative("hourlimit", hourLimit);
        List<String> args = List.of(dayKey, hourKey, Long.toString(dayLimit), Long.toString(hourLimit),
                Long.toString(Limits.millis("dayttl", dayTtl)), Long.toString(Limits.millis("hourttl", hourTtl)));
        return new Call<>(new RedisCall("RL.DAYHOUR", args, 0), reply -> Replies.dayHour(reply, dayLimit, hourLimit));
    }

    public static Call<LockoutDecision> lockcount(String lockKey, String countKey, Duration window, long max, Duration lockTime) {
        Limits.key("lockKey", lockKey);
        Limits.key("countKey", countKey);
        if (lockKey.equals(countKey)) {
            throw new IllegalArgumentException("lockkey and countkey must differ");
        }
        List<String> args = List.of(lockKey, countKey, Long.toString(Limits.millis("window", window)),
                Long.toString(Limits.nonNegative("max", max)), Long.toString(Limits.millis("locktime", lockTime)));
        return new Call<>(new RedisCall("RL.LOCKCOUNT", args, 0), Replies::lockout);
    }

    // ---- leases -------------------------------------------------------------

    public static Call<LeaseDecision> lease(String key, long limit, Duration ttl, Options options) {
        Args a = Args.start(key, options);
        Limits.positive("limit", limit);
        a.add(limit).add(ttlWithin(ttl, options));
        modeNotAllowed("RL.LEASE", options);
        noReserve("RL.LEASE", options);
        if (options.cost() != null) {
            range("cost", options.cost(), 1, Math.min(limit, Limits.COST_CAP));
        }
        // TOKEN before COST, as RL.ALL's LEASE clause and the Python and Node clients send them (one argv in all three).
        if (options.token() != null) {
            a.add("TOKEN").add(options.token());
        }
        a.cost(options.cost());
        return new Call<>(a.call("RL.LEASE"), Replies::lease);
    }

    public static Call<Decision> leasePeek(String key, long limit, Options options) {
        Args a = Args.start(key, options);
        Limits.positive("limit", limit);
        a.add(limit);
        modeNotAllowed("RL.LEASEPEEK", options);
        noReserve("RL.LEASEPEEK", options);
        if (options.cost() != null) {
            range("cost", options.cost(), 0, Math.min(limit, Limits.COST_CAP));
        }
        a.cost(options.cost());
        if (options.token() != null) {
            a.add("TOKEN").add(options.token());
        }
        return new Call<>(a.call("RL.LEASEPEEK"), Replies::decision);
    }

    /** Per token in order: the live units released (0: the lease was already lost). */
    public static Call<List<Long>> release(String key, List<String> tokens, Options options) {
        Args a = Args.start(key, options);
        tokens(tokens, a);
        return new Call<>(a.call("RL.RELEASE"), Replies::counts);
    }

    /** Per token in order: the units renewed (0: the lease is lost). */
    public static Call<List<Long>> renew(String key, Duration ttl, List<String> tokens, Options options) {
        Args a = Args.start(key, options);
        a.add(ttlWithin(ttl, options));
        tokens(tokens, a);
        return new Call<>(a.call("RL.RENEW"), Replies::counts);
    }

    private static long ttlWithin(Duration ttl, Options options) {
        long ms = Limits.millis("ttl", ttl);
        if (options.now() != null && options.now().toEpochMilli() > Limits.MAX - ms) {
            throw new IllegalArgumentException("invalid ttl '" + ms + "': now + ttl must be at most " + Limits.MAX);
        }
        return ms;
    }

    private static void tokens(List<String> tokens, Args a) {
        if (tokens.isEmpty()) {
            throw new IllegalArgumentException("at least one token is required");
        }
        Set<String> seen = new HashSet<>();
        for (String token : tokens) {
            Limits.token(token);
            if (!seen.add(token)) {
                throw new IllegalArgumentException("token '" + token + "' given twice");
            }
            a.add(token);
        }
        if (tokens.size() > Limits.RULE_CAP) {
            throw new IllegalArgumentException("too many tokens: " + tokens.size() + " (at most 64 per call)");
        }
    }

    // ---- RL.ALL / RL.ALLPEEK ------------------------------------------------

    public static Call<AllDecision> all(List<? extends Clause> clauses, Options options) {
        return allCall("RL.ALL", clauses, options, false);
    }

    public static Call<AllDecision> allPeek(List<? extends Clause> clauses, Options options) {
        return allCall("RL.ALLPEEK", clauses, options, true);
    }

    private static Call<AllDecision> allCall(String command, List<? extends Clause> clauses, Options options, boolean peek) {
        if (clauses.isEmpty()) {
            throw new IllegalArgumentException("at least one clause is required");
        }
        if (clauses.size() > Limits.RULE_CAP) {
            throw new IllegalArgumentException("invalid numkeys '" + clauses.size() + "': expected an integer from 1 to 64");
        }
        List<String> args = new ArrayList<>(4 + 10 * clauses.size());
        args.add(Integer.toString(clauses.size()));
        // One clause cannot repeat a key: no set to build for the commonest call.
        Set<String> keys = clauses.size() > 1 ? new HashSet<>() : null;
        for (Clause clause : clauses) {
            if (keys != null && !keys.add(clause.key())) {
                throw new IllegalArgumentException("key '" + clause.key() + "' used by two clauses: each key takes exactly one clause");
            }
            args.add(clause.key());
        }
        args.add(Limits.now(options.now()));
        int rules = 0;
        for (int i = 0; i < clauses.size(); i++) {
            rules += clauses.get(i).ruleCount();
            clause(args, clauses.get(i), i + 1, peek, options);
        }
        if (rules > Limits.RULE_CAP) {
            throw new IllegalArgumentException("too many rules: " + rules + " in all clauses (at most 64 per call)");
        }
        noReserveOrToken(command, options);
        if (options.mode() == Options.Mode.DEBIT || (peek && options.mode() == Options.Mode.REFUND)) {
            throw new IllegalArgumentException(command + " takes no " + options.mode());
        }
        if (options.cost() != null) {
            throw new IllegalArgumentException(command + " takes its costs per clause (Clause.withCost)");
        }
        if (options.mode() == Options.Mode.REFUND) {
            args.add("REFUND");
        }
        boolean details = options.details();
        if (details) {
            args.add("DETAILS");
        }
        return new Call<>(new RedisCall(command, args, 1), reply -> Replies.all(reply, details));
    }

    private static void clause(List<String> args, Clause clause, int index, boolean peek, Options options) {
        long min = peek ? 0 : 1;
        // "clause <index>" is named in argument errors only: built when one is thrown, not on every call.
        if (clause instanceof Clause.Check c) {
            args.add("CHECK");
            args.add(Integer.toString(index));
            long smallest = Long.MAX_VALUE;
            for (SlidingWindow rule : c.rules()) {
                args.add(Long.toString(rule.count()));
                args.add(Long.toString(rule.windowMillis()));
                smallest = Math.min(smallest, rule.count());
            }
            boolean refund = options.mode() == Options.Mode.REFUND;
            clauseCost(index, c.cost(), min, refund ? Limits.COST_CAP : Math.min(smallest, Limits.COST_CAP));
            cost(args, c.cost());
        } else if (clause instanceof Clause.Throttle t) {
            args.add("THROTTLE");
            args.add(Integer.toString(index));
            long smallest = Long.MAX_VALUE;
            Set<Long> windows = new HashSet<>();
            for (TokenBucket rule : t.rules()) {
                if (!windows.add(rule.windowMillis())) {
                    throw new IllegalArgumentException("clause " + index + " repeats window " + rule.windowMillis() + " ms");
                }
                args.add(Long.toString(rule.burst()));
                args.add(Long.toString(rule.count()));
                args.add(Long.toString(rule.windowMillis()));
                smallest = Math.min(smallest, rule.burst());
            }
            boolean refund = options.mode() == Options.Mode.REFUND;
            clauseCost(index, t.cost(), min, refund ? Limits.MAX : smallest);
            cost(args, t.cost());
        } else if (clause instanceof Clause.Quota q) {
            args.add("QUOTA");
            args.add(Integer.toString(index));
            args.add(Zones.toArgument(q.zone()));
            periods(q.limits());
            for (QuotaLimit limit : q.limits()) {
                args.add(limit.period().name());
                args.add(Long.toString(limit.limit()));
            }
            clauseCost(index, q.cost(), min, Limits.MAX);
            cost(args, q.cost());
        } else if (clause instanceof Clause.Lease l) {
            args.add("LEASE");
            args.add(Integer.toString(index));
            Limits.positive("clause " + index + " limit", l.limit());
            args.add(Long.toString(l.limit()));
            args.add(Long.toString(ttlWithin(l.ttl(), options)));
            if (l.token() != null) {
                args.add("TOKEN");
                args.add(l.token());
            } else if (!peek) {
                throw new IllegalArgumentException("clause " + index + ": a LEASE clause of RL.ALL requires a TOKEN");
            }
            clauseCost(index, l.cost(), min, Math.min(l.limit(), Limits.COST_CAP));
            cost(args, l.cost());
        }
    }

    private static void cost(List<String> args, long cost) {
        if (cost != 1) {
            args.add("COST");
            args.add(Long.toString(cost));
        }
    }

    // ---- COMMAND INFO RL.ALL ------------------------------------------------

    /** The module check: {@code COMMAND INFO RL.ALL}, true when the server knows the command. */
    public static Call<Boolean> moduleLoaded() {
        return new Call<>(new RedisCall("COMMAND", List.of("INFO", "RL.ALL"), -1),
                reply -> reply instanceof List<?> list && !list.isEmpty() && list.get(0) != null);
    }

    // ---- shared checks ------------------------------------------------------

    private static void ruleCount(int rules) {
        if (rules < 1) {
            throw new IllegalArgumentException("at least one rule is required");
        }
        if (rules > Limits.RULE_CAP) {
            throw new IllegalArgumentException("too many rules: " + rules + " (at most 64 per call)");
        }
    }

    private static void clauseCost(int index, long cost, long min, long max) {
        if (cost < min || cost > max) {
            range("clause " + index + " cost", cost, min, max);
        }
    }

    private static void range(String what, long value, long min, long max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException("invalid " + what + " '" + value + "': expected an integer from " + min + " to " + max);
        }
    }

    private static void modeNotAllowed(String command, Options options) {
        if (options.mode() != Options.Mode.ADMIT) {
            throw new IllegalArgumentException(command + " takes no " + options.mode());
        }
    }

    private static void noReserve(String command, Options options) {
        if (options.reserve() != null) {
            throw new IllegalArgumentException(command + " takes no RESERVE");
        }
        if (options.details()) {
            throw new IllegalArgumentException(command + " takes no DETAILS");
        }
    }

    private static void noReserveOrToken(String command, Options options) {
        if (options.reserve() != null) {
            throw new IllegalArgumentException(command + " takes no RESERVE");
        }
        if (options.token() != null) {
            throw new IllegalArgumentException(command + " takes no TOKEN");
        }
        if (options.details() && !command.startsWith("RL.ALL")) {
            throw new IllegalArgumentException(command + " takes no DETAILS");
        }
    }

    /** Arguments after the command name: key, now, then what each command adds. */
    private static final class Args {
        private final List<String> args = new ArrayList<>();

        static Args start(String key, Options options) {
            Args a = new Args();
            a.args.add(Limits.key("key", key));
            a.args.add(Limits.now(options.now()));
            return a;
        }

        Args add(String value) {
            args.add(value);
            return this;
        }

        Args add(long value) {
            args.add(Long.toString(value));
            return this;
        }

        Args cost(Long cost) {
            if (cost != null) {
                add("COST").add(cost);
            }
            return this;
        }

        Args mode(Options.Mode mode) {
            if (mode != Options.Mode.ADMIT) {
                add(mode.name());
            }
            return this;
        }

        RedisCall call(String command) {
            return new RedisCall(command, args, 0);
        }
    }
}
