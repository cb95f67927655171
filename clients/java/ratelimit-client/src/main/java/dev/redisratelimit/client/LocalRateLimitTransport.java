package dev.redisratelimit.client;

import java.math.BigInteger;
import java.time.Clock;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.temporal.TemporalAdjusters;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.IntPredicate;

/**
 * A local backend: the RL commands answered in process, for tests without
 * Redis. A {@link RateLimitTransport}, so {@code new RateLimitAsyncClient(new
 * LocalRateLimitTransport(clock))} (or, in Spring Boot, the test annotation
 * {@code @AutoConfigureLocalRateLimit}) decides every limit kind — windows
 * (RL.CHECK), buckets (RL.THROTTLE), quotas (RL.QUOTA, in their zones),
 * concurrency (RL.LEASE/RELEASE/RENEW), lockouts (RL.LOCKCOUNT), several at
 * once (RL.ALL ... DETAILS, REFUND, DEBIT) and every peek — with SPEC.md's
 * formulas, so a test sees the decisions, {@code RateLimit} headers and
 * {@code Retry-After} the module gives. The golden sequence cases
 * (clients/conformance/sequences/) run against it and against the real module,
 * as the Python ({@code redis_rl.local}) and Node ({@code redis-ratelimit/local})
 * local backends do.
 *
 * <p>The clock is injectable ({@link ManualClock} for tests): {@code now = *} is
 * its time, and keys expire by it. It trusts the argv the client builds (the
 * client validates before sending), keeps exact expiries (no decision depends
 * on SPEC's grid), and is one process's memory: for tests, not a shared limit.
 *
 * <p>It is also what the {@link FailMode#LOCAL} Redis-down mode decides on (the
 * same commands the limiter sends to Redis, so the same decisions, costs,
 * estimates, leases and {@code Retry-After}). For that its memory is bounded
 * ({@code maxKeys} keys, {@code maxEntries} entries: a sorted-set member per
 * unit of a window or lease, a hash field, a string): a key is dropped only
 * when it expires, as in Redis, never to make room; a command that would grow
 * past the bound is undone and fails with {@link LocalBackendFullException}, which the limiter
 * answers as a refusal whose retry-after is the wait until the earliest key
 * expires.
 */
public final class LocalRateLimitTransport implements RateLimitTransport {

    /** A clock a test moves by hand. */
    public static final class ManualClock extends Clock {
        private volatile long millis;

        /** At 2026-01-01T00:00:00Z. */
        public ManualClock() {
            this(1_767_225_600_000L);
        }

        public ManualClock(long epochMillis) {
            this.millis = epochMillis;
        }

        public synchronized void advance(Duration by) {
            millis += by.toMillis();
        }

        @Override
        public long millis() {
            return millis;
        }

        @Override
        public Instant instant() {
            return Instant.ofEpochMilli(millis);
        }

        @Override
        public ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(ZoneId zone) {
            throw new UnsupportedOperationException("a ManualClock is UTC");
        }
    }

    private static final BigInteger NS = BigInteger.valueOf(1_000_000);
    private static final Set<String> KINDS = Set.of("CHECK", "THROTTLE", "QUOTA", "LEASE");

    /** Default bound on the keys held at once. */
    public static final int DEFAULT_MAX_KEYS = 100_000;
    /** Default bound on the entries held at once (sorted-set members: one per unit of a window or lease; hash fields; strings). */
    public static final int DEFAULT_MAX_ENTRIES = 1_000_000;

    private final Clock clock;
    private final int maxKeys;
    private final int maxEntries;
    private final Map<String, Entry> keys = new HashMap<>();
    private long names;
    /** The entries held (kept up to date per command from the keys it touches). */
    private long entries;
    /** No scan for expired keys before this time (ms): the earliest expiry the last scan saw. */
    private long nextSweep;

    /** On the system clock. */
    public LocalRateLimitTransport() {
        this(Clock.systemUTC());
    }

    public LocalRateLimitTransport(Clock clock) {
        this(clock, DEFAULT_MAX_KEYS, DEFAULT_MAX_ENTRIES);
    }

    /** With bounds on its memory (each at least 1); past them a command that would grow fails with {@link LocalBackendFullException}. */
    public LocalRateLimitTransport(Clock clock, int maxKeys, int maxEntries) {
        Limit.require(maxKeys >= 1 && maxEntries >= 1, "local backend bounds must be at least 1");
        this.clock = java.util.Objects.requireNonNull(clock, "clock");
        this.maxKeys = maxKeys;
        this.maxEntries = maxEntries;
    }

    public Clock clock() {
        return clock;
    }

    /** Moves the clock, a {@link ManualClock} (else an {@code IllegalStateException}). */
    public void advance(Duration by) {
        if (!(clock instanceof ManualClock manual)) {
            throw new IllegalStateException("advance needs a ManualClock; this backend runs on " + clock);
        }
        manual.advance(by);
    }

    /** Forgets every key (the clock stays). */
    public synchronized void reset() {
        keys.clear();
        entries = 0;
        nextSweep = 0;
    }

    /** The keys held now (expired ones included until a command touches them or a sweep drops them). */
    public synchronized int size() {
        return keys.size();
    }

    /** The entries held now (see {@link #DEFAULT_MAX_ENTRIES}). */
    public synchronized long entries() {
        return entries;
    }

    @Override
    public CompletionStage<Object> execute(RedisCall call) {
        List<String> argv = new ArrayList<>();
        argv.add(call.command());
        argv.addAll(call.args());
        try {
            synchronized (this) {
                return CompletableFuture.completedFuture(bounded(argv));
            }
        } catch (RateLimitException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    // ------------------------------------------------------------------ bounded memory

    private static final Set<String> GROWING = Set.of("RL.CHECK", "RL.THROTTLE", "RL.QUOTA", "RL.LEASE", "RL.ALL", "RL.LOCKCOUNT");

    // Runs a command, keeping the count of entries; near the bound, the keys it touches are saved first and put
    // back when it grew past the bound (Full). Expired keys are the only ones ever dropped to make room.
    private Object bounded(List<String> a) {
        String name = a.get(0).toUpperCase(Locale.ROOT);
        Set<String> touched = touched(name, a);
        boolean grows = GROWING.contains(name) && !a.get(a.size() - 1).equalsIgnoreCase("REFUND")
                && !(name.equals("RL.ALL") && a.size() > 1 && a.get(a.size() - 2).equalsIgnoreCase("REFUND"));
        long t = clock.millis();
        long margin = margin(a);
        Map<String, Entry> saved = null;
        if (grows && (keys.size() + touched.size() > maxKeys || entries + margin > maxEntries)) {
            sweep(t);
            if (keys.size() + touched.size() > maxKeys || entries + margin > maxEntries) {
                saved = new HashMap<>();
                for (String k : touched) {
                    Entry e = keys.get(k);
                    saved.put(k, e == null ? null : new Entry(copy(e.value), e.expireAt));
                }
            }
        }
        long before = weight(touched);
        Object reply;
        try {
            reply = run(a);
        } finally {
            entries += weight(touched) - before;
        }
        long after = weight(touched);
        if (saved != null && (keys.size() > maxKeys || (after > before && entries > maxEntries))) {
            entries -= after - before;
            for (Map.Entry<String, Entry> e : saved.entrySet()) {
                if (e.getValue() == null) {
                    keys.remove(e.getKey());
                } else {
                    keys.put(e.getKey(), e.getValue());
                }
            }
            throw new LocalBackendFullException(nextSweep <= t ? 1000 : nextSweep - t, maxKeys, maxEntries);
        }
        return reply;
    }

    // The keys a command reads or writes.
    private static Set<String> touched(String name, List<String> a) {
        Set<String> out = new java.util.LinkedHashSet<>();
        switch (name) {
            case "RL.ALL", "RL.ALLPEEK" -> out.addAll(a.subList(2, 2 + Integer.parseInt(a.get(1))));
            case "RL.LOCKCOUNT" -> out.addAll(a.subList(1, 3));
            case "DEL" -> out.addAll(a.subList(1, a.size()));
            case "PING", "COMMAND" -> { }
            default -> {
                if (a.size() > 1) {
                    out.add(a.get(1));
                }
            }
        }
        return out;
    }

    // The most entries a command can add: a member per unit of COST, a field or string per argument.
    private static long margin(List<String> a) {
        long m = a.size();
        for (int i = 0; i + 1 < a.size(); i++) {
            if (a.get(i).equalsIgnoreCase("COST")) {
                try {
                    m += Long.parseLong(a.get(i + 1));
                } catch (NumberFormatException e) {
                    // not a cost (a key named COST): counted as an argument
                }
            }
        }
        return m;
    }

    private long weight(Set<String> touched) {
        long w = 0;
        for (String k : touched) {
            Entry e = keys.get(k);
            if (e != null) {
                w += e.value instanceof Map<?, ?> m ? m.size() : 1;
            }
        }
        return w;
    }

    private static Object copy(Object value) {
        return value instanceof Map<?, ?> m ? new HashMap<>(m) : value;
    }

    // Drops every expired key (at most one scan until the earliest expiry the last one saw).
    private void sweep(long t) {
        if (t < nextSweep) {
            return;
        }
        long earliest = Long.MAX_VALUE;
        for (java.util.Iterator<Entry> it = keys.values().iterator(); it.hasNext(); ) {
            Entry e = it.next();
            if (e.expireAt != null && e.expireAt <= t) {
                entries -= e.value instanceof Map<?, ?> m ? m.size() : 1;
                it.remove();
            } else if (e.expireAt != null) {
                earliest = Math.min(earliest, e.expireAt);
            }
        }
        nextSweep = earliest == Long.MAX_VALUE ? 0 : earliest; // nothing expires: scan again next time
    }

    // ------------------------------------------------------------------ keyspace

    private static final class Entry {
        Object value; // Map<String, Double> (sorted sets), Map<String, String> (hashes), Long (strings)
        Long expireAt;

        Entry(Object value, Long expireAt) {
            this.value = value;
            this.expireAt = expireAt;
        }
    }

    private Entry get(String key, long t) {
        Entry e = keys.get(key);
        if (e != null && e.expireAt != null && e.expireAt <= t) {
            keys.remove(key);
            return null;
        }
        return e;
    }

    @SuppressWarnings("unchecked")
    private Map<String, Double> zset(String key, long t) {
        Entry e = get(key, t);
        return e == null ? new HashMap<>() : (Map<String, Double>) e.value;
    }

    @SuppressWarnings("unchecked")
    private Map<String, String> hash(String key, long t) {
        Entry e = get(key, t);
        return e == null ? new HashMap<>() : (Map<String, String>) e.value;
    }

    private void put(String key, Map<String, ?> value, Long expireAt, boolean keepLonger) {
        if (value.isEmpty()) {
            keys.remove(key);
            return;
        }
        Entry old = keys.get(key);
        if (keepLonger && old != null && old.expireAt != null && expireAt != null) {
            expireAt = Math.max(old.expireAt, expireAt);
        }
        keys.put(key, new Entry(value, expireAt));
    }

    // ------------------------------------------------------------------ commands

    private Object run(List<String> a) {
        String name = a.get(0).toUpperCase(Locale.ROOT);
        long t = clock.millis();
        String kind = switch (name) {
            case "RL.CHECK", "RL.PEEK" -> "CHECK";
            case "RL.THROTTLE", "RL.THROTTLEPEEK" -> "THROTTLE";
            case "RL.QUOTA", "RL.QUOTAPEEK" -> "QUOTA";
            case "RL.LEASE", "RL.LEASEPEEK" -> "LEASE";
            default -> null;
        };
        if (kind != null) {
            boolean peek = name.endsWith("PEEK");
            long now = now(a.get(2), t);
            List<String> rest = new ArrayList<>(a.subList(3, a.size()));
            String mode = null;
            if (!rest.isEmpty()) {
                String last = rest.get(rest.size() - 1).toUpperCase(Locale.ROOT);
                if (last.equals("REFUND") || last.equals("DEBIT")) {
                    mode = last;
                    rest.remove(rest.size() - 1);
                }
            }
            Clause c = clause(kind, a.get(1), rest, now, t, peek || mode != null);
            if ("REFUND".equals(mode)) {
                refund(c, now, t);
            } else if ("DEBIT".equals(mode)) {
                debit(c, now, t);
            }
            if (mode != null) {
                c = clause(kind, a.get(1), withCost(rest, 0), now, t, true);
            } else if (c.admitted && !peek) {
                c.apply.run();
            }
            int b = binding(c.rows, c.admitted);
            List<Object> row = new ArrayList<>(asList(c.rows.get(b)));
            row.set(0, c.admitted ? 0L : 1L);
            row.set(1, (long) b + 1);
            if (name.equals("RL.LEASE")) {
                row.add(c.admitted ? c.token : null);
            }
            return row;
        }
        switch (name) {
            case "RL.ALL", "RL.ALLPEEK":
                return all(a, t, name.equals("RL.ALLPEEK"));
            case "RL.RELEASE":
                return release(a.get(1), now(a.get(2), t), t, a.subList(3, a.size()));
            case "RL.RENEW":
                return renew(a.get(1), now(a.get(2), t), t, Long.parseLong(a.get(3)), a.subList(4, a.size()));
            case "RL.LOCKCOUNT":
                return lockcount(t, a.get(1), a.get(2), Long.parseLong(a.get(3)), Long.parseLong(a.get(4)), Long.parseLong(a.get(5)));
            case "DEL": {
                long n = 0;
                for (String k : a.subList(1, a.size())) {
                    if (get(k, t) != null) {
                        n++;
                    }
                    keys.remove(k);
                }
                return n;
            }
            case "GET": {
                Entry e = get(a.get(1), t);
                return e == null ? null : String.valueOf(e.value);
            }
            case "PTTL": {
                Entry e = get(a.get(1), t);
                return e == null ? -2L : e.expireAt == null ? -1L : e.expireAt - t;
            }
            case "HGETALL": {
                List<Object> flat = new ArrayList<>();
                hash(a.get(1), t).forEach((f, v) -> {
                    flat.add(f);
                    flat.add(v);
                });
                return flat;
            }
            case "HSET": {
                Map<String, String> h = new HashMap<>(hash(a.get(1), t));
                long added = 0;
                for (int i = 2; i + 1 < a.size(); i += 2) {
                    if (h.put(a.get(i), a.get(i + 1)) == null) {
                        added++;
                    }
                }
                put(a.get(1), h, null, false);
                return added;
            }
            case "PING":
                return "PONG";
            case "COMMAND":
                return List.of(List.of("rl.all")); // COMMAND INFO: every RL command is answered here
            default:
                throw new RateLimitException("ERR unknown command '" + a.get(0) + "' (the local backend answers RL.* only)");
        }
    }

    private static long now(String arg, long t) {
        return arg.equals("*") ? t : Long.parseLong(arg);
    }

    private static List<String> withCost(List<String> rest, long cost) {
        List<String> out = new ArrayList<>(rest);
        for (int i = 0; i + 1 < out.size(); i++) {
            if (out.get(i).equalsIgnoreCase("COST")) {
                out.set(i + 1, Long.toString(cost));
                return out;
            }
        }
        out.add("COST");
        out.add(Long.toString(cost));
        return out;
    }

    private static List<Object> asList(long[] row) {
        List<Object> out = new ArrayList<>(row.length);
        for (long x : row) {
            out.add(x);
        }
        return out;
    }

    private static long ceil(double x) {
        return (long) Math.ceil(x);
    }

    private static BigInteger ceilDiv(BigInteger a, BigInteger b) {
        BigInteger[] qr = a.divideAndRemainder(b);
        return qr[1].signum() > 0 ? qr[0].add(BigInteger.ONE) : qr[0];
    }

    /** SPEC's binding rule (0-based): refused, -1 first, then the largest retry; admitted, the fewest left, then the longest reset. */
    private static int binding(List<long[]> rows, boolean admitted) {
        int best = -1;
        for (int i = 0; i < rows.size(); i++) {
            long[] r = rows.get(i);
            if (!admitted) {
                if (r[0] == 0) {
                    continue;
                }
                if (best < 0) {
                    best = i;
                    continue;
                }
                long[] b = rows.get(best);
                boolean never = r[4] == -1;
                boolean bestNever = b[4] == -1;
                if ((never && !bestNever) || (never == bestNever && !never && r[4] > b[4])) {
                    best = i;
                }
            } else if (best < 0 || r[3] < rows.get(best)[3] || (r[3] == rows.get(best)[3] && r[5] > rows.get(best)[5])) {
                best = i;
            }
        }
        return best;
    }

    // ------------------------------------------------------------------ clauses

    private static final class Clause {
        final String kind;
        final String key;
        final List<String> args = new ArrayList<>();
        long cost = 1;
        String token;
        final List<long[]> rows = new ArrayList<>(); // limited, rule, limit, remaining, retry_after, reset_after
        boolean admitted;
        Runnable apply = () -> { };
        long[][] rules;
        List<String> fields;

        Clause(String kind, String key) {
            this.kind = kind;
            this.key = key;
        }

        List<String> sent() {
            List<String> out = new ArrayList<>(args);
            out.add("COST");
            out.add(Long.toString(cost));
            if (token != null) {
                out.add("TOKEN");
                out.add(token);
            }
            return out;
        }
    }

    private Clause clause(String kind, String key, List<String> rest, long t, long server, boolean peek) {
        Clause c = new Clause(kind, key);
        for (int i = 0; i < rest.size(); i++) {
            String u = rest.get(i).toUpperCase(Locale.ROOT);
            if (u.equals("COST")) {
                c.cost = Long.parseLong(rest.get(++i));
            } else if (u.equals("TOKEN")) {
                c.token = rest.get(++i);
            } else {
                c.args.add(rest.get(i));
            }
        }
        switch (kind) {
            case "CHECK" -> check(c, t, server);
            case "THROTTLE" -> throttle(c, t, server);
            case "QUOTA" -> quota(c, t, server);
            default -> lease(c, t, server, peek);
        }
        c.admitted = c.rows.stream().allMatch(r -> r[0] == 0);
        return c;
    }

    private void check(Clause c, long t, long server) {
        List<long[]> rules = new ArrayList<>();
        for (int i = 0; i + 1 < c.args.size(); i += 2) {
            rules.add(new long[] {Long.parseLong(c.args.get(i)), Long.parseLong(c.args.get(i + 1))});
        }
        List<Double> scores = new ArrayList<>(zset(c.key, server).values());
        scores.sort(Comparator.naturalOrder());
        long longest = 0;
        for (long[] r : rules) {
            long count = r[0];
            long window = r[1];
            longest = Math.max(longest, window);
            List<Double> inside = scores.stream().filter(s -> s > t - window).toList();
            long used = inside.size();
            double newestIn = inside.isEmpty() ? t - window : inside.get(inside.size() - 1);
            if (used + c.cost <= count) {
                double newest = Math.max(newestIn, c.cost > 0 ? t : t - window);
                c.rows.add(new long[] {0, 0, count, count - used - c.cost, -1, Math.max(0, ceil(newest + window - t))});
            } else {
                int k = (int) (used + c.cost - count);
                long reset = inside.isEmpty() ? 0 : ceil(newestIn + window - t);
                c.rows.add(new long[] {1, 0, count, Math.max(0, count - used), ceil(inside.get(k - 1) + window - t), Math.max(0, reset)});
            }
        }
        long max = longest;
        c.apply = () -> {
            Map<String, Double> zs = new HashMap<>(zset(c.key, server));
            for (long i = 0; i < c.cost; i++) {
                zs.put("l:" + (++names), (double) t);
            }
            long x = ceil(Math.max(zs.values().stream().mapToDouble(Double::doubleValue).max().orElse(t), server) + max);
            Entry old = keys.get(c.key);
            if (old == null || old.expireAt == null || old.expireAt < x) {
                zs.values().removeIf(s -> s <= t - max);
                put(c.key, zs, x, false);
            } else {
                put(c.key, zs, old.expireAt, false);
            }
        };
    }

    private void throttle(Clause c, long t, long server) {
        int n = c.args.size() / 3;
        c.rules = new long[n][];
        for (int i = 0; i < n; i++) {
            c.rules[i] = new long[] {Long.parseLong(c.args.get(3 * i)), Long.parseLong(c.args.get(3 * i + 1)), Long.parseLong(c.args.get(3 * i + 2))};
        }
        Map<String, String> h = hash(c.key, server);
        BigInteger tNs = BigInteger.valueOf(t).multiply(NS);
        List<BigInteger> news = new ArrayList<>();
        for (long[] r : c.rules) {
            BigInteger em = BigInteger.valueOf(r[2]).multiply(NS).divide(BigInteger.valueOf(r[1]));
            BigInteger tau = em.multiply(BigInteger.valueOf(r[0]));
            String stored = h.get(Long.toString(r[2]));
            BigInteger tat = stored == null ? tNs : new BigInteger(stored);
            BigInteger base = tat.max(tNs);
            BigInteger nw = base.add(em.multiply(BigInteger.valueOf(c.cost)));
            news.add(nw);
            boolean ok = nw.subtract(tau).compareTo(tNs) <= 0;
            BigInteger ell = ok ? nw : base;
            BigInteger remaining = tau.subtract(ell.subtract(tNs));
            remaining = remaining.signum() < 0 ? BigInteger.ZERO : remaining.divide(em).min(BigInteger.valueOf(r[0]));
            long reset = Math.max(0, ceilDiv(ell.subtract(tNs), NS).longValue());
            long retry = ok ? -1 : ceilDiv(nw.subtract(tau).subtract(tNs), NS).longValue();
            c.rows.add(new long[] {ok ? 0 : 1, 0, r[0], remaining.longValue(), retry, reset});
        }
        c.apply = () -> {
            Map<String, String> hs = new HashMap<>(hash(c.key, server));
            BigInteger top = BigInteger.ZERO;
            for (int i = 0; i < c.rules.length; i++) {
                hs.put(Long.toString(c.rules[i][2]), news.get(i).toString());
                top = top.max(news.get(i));
            }
            put(c.key, hs, ceilDiv(top, NS).longValue() + Math.max(0, server - t), true);
        };
    }

    private void quota(Clause c, long t, long server) {
        ZoneId zone = ZoneId.of(c.args.get(0));
        Map<String, String> h = hash(c.key, server);
        c.fields = new ArrayList<>();
        long lastEnd = 0;
        for (int i = 1; i + 1 < c.args.size(); i += 2) {
            long limit = Long.parseLong(c.args.get(i + 1));
            long[] span = new long[2];
            String field = bucket(c.args.get(i).toLowerCase(Locale.ROOT), zone, t, span);
            c.fields.add(field);
            lastEnd = Math.max(lastEnd, span[1]);
            long used = Math.max(0, Long.parseLong(h.getOrDefault(field, "0")));
            long end = span[1] - t;
            if (used + c.cost <= limit) {
                c.rows.add(new long[] {0, 0, limit, Math.max(0, limit - used - c.cost), -1, end});
            } else {
                c.rows.add(new long[] {1, 0, limit, Math.max(0, limit - used), c.cost > limit ? -1 : end, end});
            }
        }
        long expire = lastEnd + Math.max(0, server - t);
        c.apply = () -> {
            Map<String, String> hs = new HashMap<>(hash(c.key, server));
            for (String f : c.fields) {
                hs.put(f, Long.toString(Math.max(0, Long.parseLong(hs.getOrDefault(f, "0"))) + c.cost));
            }
            put(c.key, hs, expire, true);
        };
    }

    private void lease(Clause c, long t, long server, boolean peek) {
        long limit = Long.parseLong(c.args.get(0));
        Long ttl = c.args.size() > 1 ? Long.parseLong(c.args.get(1)) : null;
        Map<String, Double> z = zset(c.key, server);
        Map<String, Double> live = new HashMap<>();
        z.forEach((m, s) -> {
            if (s > t) {
                live.put(m, s);
            }
        });
        Set<String> own = new HashSet<>(c.cost > 0 && c.token != null ? units(z, c.token) : List.of());
        long held = own.stream().filter(live::containsKey).count();
        List<Double> others = live.entrySet().stream().filter(e -> !own.contains(e.getKey())).map(Map.Entry::getValue).sorted().toList();
        double liveTop = live.values().stream().mapToDouble(Double::doubleValue).max().orElse(t);
        if (live.size() - held + c.cost <= limit) {
            long after = c.cost > 0 ? others.size() + c.cost : live.size();
            double top = ttl != null && c.cost > 0 ? Math.max(t + ttl, others.isEmpty() ? t : others.get(others.size() - 1)) : liveTop;
            c.rows.add(new long[] {0, 0, limit, Math.max(0, limit - after), -1, Math.max(0, ceil(top - t))});
        } else {
            int k = (int) (live.size() - held + c.cost - limit);
            c.rows.add(new long[] {1, 0, limit, Math.max(0, limit - live.size()), ceil(others.get(k - 1) - t), Math.max(0, ceil(liveTop - t))});
        }
        if (c.token == null && !peek) {
            c.token = String.format(Locale.ROOT, "l%07d", ++names);
        }
        c.apply = () -> {
            Map<String, Double> zs = new HashMap<>(zset(c.key, server));
            units(zs, c.token).forEach(zs::remove);
            for (long j = 0; j < c.cost; j++) {
                zs.put(j == 0 ? c.token : c.token + "#" + (j + 1), (double) (t + ttl));
            }
            zs.values().removeIf(s -> s <= Math.min(t, server));
            long top = (long) zs.values().stream().mapToDouble(Double::doubleValue).max().orElse(t);
            put(c.key, zs, top + Math.max(0, server - t), true);
        };
    }

    private static List<String> units(Map<String, Double> z, String token) {
        List<String> out = new ArrayList<>();
        if (token == null || !z.containsKey(token)) {
            return out;
        }
        out.add(token);
        for (int j = 2; z.containsKey(token + "#" + j); j++) {
            out.add(token + "#" + j);
        }
        return out;
    }

    // ------------------------------------------------------------------ writes without admission

    @SuppressWarnings("unchecked")
    private void refund(Clause c, long t, long server) {
        Entry e = get(c.key, server);
        if (e == null) {
            return;
        }
        switch (c.kind) {
            case "CHECK" -> {
                long longest = 0;
                for (int i = 1; i < c.args.size(); i += 2) {
                    longest = Math.max(longest, Long.parseLong(c.args.get(i)));
                }
                long max = longest;
                Map<String, Double> z = (Map<String, Double>) e.value;
                z.entrySet().stream().filter(x -> x.getValue() > t - max)
                        .sorted(Map.Entry.<String, Double>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey(Comparator.reverseOrder())))
                        .limit(c.cost).map(Map.Entry::getKey).toList().forEach(z::remove);
            }
            case "THROTTLE" -> {
                Map<String, String> h = (Map<String, String>) e.value;
                BigInteger tNs = BigInteger.valueOf(t).multiply(NS);
                for (long[] r : c.rules) {
                    String f = Long.toString(r[2]);
                    if (!h.containsKey(f)) {
                        continue;
                    }
                    BigInteger em = BigInteger.valueOf(r[2]).multiply(NS).divide(BigInteger.valueOf(r[1]));
                    BigInteger tat = new BigInteger(h.get(f)).subtract(em.multiply(BigInteger.valueOf(c.cost)));
                    if (tat.compareTo(tNs) <= 0) {
                        h.remove(f);
                    } else {
                        h.put(f, tat.toString());
                    }
                }
            }
            case "QUOTA" -> {
                Map<String, String> h = (Map<String, String>) e.value;
                for (String f : c.fields) {
                    if (!h.containsKey(f)) {
                        continue;
                    }
                    long v = Long.parseLong(h.get(f));
                    v -= Math.min(c.cost, Math.max(0, v));
                    if (v <= 0) {
                        h.remove(f);
                    } else {
                        h.put(f, Long.toString(v));
                    }
                }
            }
            default -> {
                if (c.token != null) {
                    release(c.key, t, server, List.of(c.token));
                }
                return;
            }
        }
        if (((Map<String, ?>) e.value).isEmpty()) {
            keys.remove(c.key);
        }
    }

    private void debit(Clause c, long t, long server) {
        if (!c.kind.equals("THROTTLE")) {
            c.apply.run(); // CHECK and QUOTA add their cost as an admission does
            return;
        }
        Map<String, String> h = new HashMap<>(hash(c.key, server));
        BigInteger tNs = BigInteger.valueOf(t).multiply(NS);
        BigInteger top = BigInteger.ZERO;
        for (long[] r : c.rules) {
            String stored = h.get(Long.toString(r[2]));
            BigInteger em = BigInteger.valueOf(r[2]).multiply(NS).divide(BigInteger.valueOf(r[1]));
            BigInteger nw = (stored == null ? tNs : new BigInteger(stored)).max(tNs).add(em.multiply(BigInteger.valueOf(c.cost)));
            h.put(Long.toString(r[2]), nw.toString());
            top = top.max(nw);
        }
        put(c.key, h, ceilDiv(top, NS).longValue() + Math.max(0, server - t), true);
    }

    private List<Object> release(String key, long t, long server, List<String> tokens) {
        Map<String, Double> z = zset(key, server);
        List<Object> out = new ArrayList<>();
        for (String tok : tokens) {
            List<String> us = units(z, tok);
            out.add(us.stream().filter(m -> z.get(m) > t).count());
            us.forEach(z::remove);
        }
        if (keys.containsKey(key) && z.isEmpty()) {
            keys.remove(key);
        }
        return out;
    }

    private List<Object> renew(String key, long t, long server, long ttl, List<String> tokens) {
        Map<String, Double> z = zset(key, server);
        List<Object> out = new ArrayList<>();
        for (String tok : tokens) {
            List<String> us = units(z, tok);
            if (us.stream().noneMatch(m -> z.get(m) > t)) {
                out.add(0L);
                continue;
            }
            us.forEach(m -> z.put(m, (double) (t + ttl)));
            out.add((long) us.size());
        }
        Entry e = keys.get(key);
        if (e != null && !z.isEmpty()) {
            long top = (long) z.values().stream().mapToDouble(Double::doubleValue).max().orElse(t);
            e.expireAt = Math.max(e.expireAt == null ? 0 : e.expireAt, top + Math.max(0, server - t));
        }
        return out;
    }

    private List<Object> lockcount(long t, String lock, String count, long window, long max, long lockTime) {
        Entry ck = get(count, t);
        long c = ck == null ? 0 : Math.max(0, (Long) ck.value);
        Entry lk = get(lock, t);
        if (lk != null) {
            return List.of(1L, c, lk.expireAt == null ? -1L : lk.expireAt - t);
        }
        if (c < max) {
            long exp = ck != null && ck.expireAt != null ? ck.expireAt : t + window;
            keys.put(count, new Entry(c + 1, exp));
            return List.of(0L, c + 1, exp - t);
        }
        keys.put(lock, new Entry(1L, t + lockTime));
        keys.remove(count);
        return List.of(1L, c, lockTime);
    }

    // ------------------------------------------------------------------ RL.ALL / RL.ALLPEEK

    private List<Object> all(List<String> a, long server, boolean peek) {
        int n = Integer.parseInt(a.get(1));
        List<String> ks = a.subList(2, 2 + n);
        long t = now(a.get(2 + n), server);
        List<String> rest = new ArrayList<>(a.subList(3 + n, a.size()));
        boolean details = !rest.isEmpty() && rest.get(rest.size() - 1).equalsIgnoreCase("DETAILS");
        if (details) {
            rest.remove(rest.size() - 1);
        }
        boolean refund = !rest.isEmpty() && rest.get(rest.size() - 1).equalsIgnoreCase("REFUND");
        if (refund) {
            rest.remove(rest.size() - 1);
        }
        List<Object[]> parts = new ArrayList<>(); // kind, key, body
        IntPredicate isKind = i -> KINDS.contains(rest.get(i).toUpperCase(Locale.ROOT));
        for (int i = 0; i < rest.size();) {
            String kind = rest.get(i).toUpperCase(Locale.ROOT);
            String key = ks.get(Integer.parseInt(rest.get(i + 1)) - 1);
            List<String> body = new ArrayList<>();
            int j = i + 2;
            while (j < rest.size() && !isKind.test(j)) {
                body.add(rest.get(j));
                String u = rest.get(j).toUpperCase(Locale.ROOT);
                if (u.equals("COST") || u.equals("TOKEN")) {
                    body.add(rest.get(++j));
                }
                j++;
            }
            parts.add(new Object[] {kind, key, body});
            i = j;
        }
        List<Clause> clauses = new ArrayList<>();
        for (Object[] p : parts) {
            @SuppressWarnings("unchecked")
            List<String> body = (List<String>) p[2];
            if (refund) {
                refund(clause((String) p[0], (String) p[1], body, t, server, true), t, server);
            }
        }
        for (Object[] p : parts) {
            @SuppressWarnings("unchecked")
            List<String> body = (List<String>) p[2];
            clauses.add(refund ? clause((String) p[0], (String) p[1], withCost(body, 0), t, server, true)
                    : clause((String) p[0], (String) p[1], body, t, server, peek));
        }
        boolean admitted = clauses.stream().allMatch(c -> c.admitted);
        if (admitted && !peek && !refund) {
            clauses.forEach(c -> c.apply.run());
            if (details) { // after the writes: each rule as its command answers with COST 0 (a LEASE: its own reply)
                for (Clause c : clauses) {
                    if (!c.kind.equals("LEASE")) {
                        List<long[]> rows = clause(c.kind, c.key, withCost(c.sent(), 0), t, server, true).rows;
                        c.rows.clear();
                        c.rows.addAll(rows);
                    }
                }
            }
        }
        List<long[]> firsts = new ArrayList<>();
        for (Clause c : clauses) {
            int b = binding(c.rows, c.admitted);
            long[] r = c.rows.get(b);
            firsts.add(new long[] {c.admitted ? 0 : 1, b + 1, r[2], r[3], r[4], r[5]});
        }
        int pick;
        if (admitted) {
            pick = 0;
            for (int k = 1; k < firsts.size(); k++) {
                long x = firsts.get(k)[3] / Math.max(clauses.get(k).cost, 1);
                long y = firsts.get(pick)[3] / Math.max(clauses.get(pick).cost, 1);
                if (x < y || (x == y && firsts.get(k)[5] > firsts.get(pick)[5])) {
                    pick = k;
                }
            }
        } else {
            pick = binding(firsts, false);
        }
        List<Object> reply = new ArrayList<>();
        reply.add(admitted ? 0L : 1L);
        reply.add((long) pick + 1);
        for (int i = 1; i < 6; i++) {
            reply.add(firsts.get(pick)[i]);
        }
        if (details) {
            for (Clause c : clauses) {
                List<Object> rows = new ArrayList<>();
                for (int k = 0; k < c.rows.size(); k++) {
                    long[] r = c.rows.get(k);
                    rows.add(List.of(r[0], (long) k + 1, r[2], r[3], r[4], r[5]));
                }
                reply.add(rows);
            }
        }
        return reply;
    }

    // ------------------------------------------------------------------ calendar buckets (RL.QUOTA)

    /** The field of the {@code period} bucket holding {@code t} in {@code zone}; {@code span} gets its start and end. */
    private static String bucket(String period, ZoneId zone, long t, long[] span) {
        ZonedDateTime local = Instant.ofEpochMilli(t).atZone(zone);
        ZonedDateTime start;
        long end;
        switch (period) {
            case "minute", "hour" -> {
                long into = local.getSecond() * 1000L + Math.floorMod(t, 1000L) + (period.equals("hour") ? local.getMinute() * 60_000L : 0);
                span[0] = t - into;
                end = span[0] + (period.equals("minute") ? 60_000 : 3_600_000);
                start = Instant.ofEpochMilli(span[0]).atZone(zone);
            }
            default -> {
                LocalDate d = local.toLocalDate();
                LocalDate first;
                LocalDate next;
                switch (period) {
                    case "day" -> {
                        first = d;
                        next = d.plusDays(1);
                    }
                    case "week" -> {
                        first = d.with(TemporalAdjusters.previousOrSame(DayOfWeek.MONDAY));
                        next = first.plusWeeks(1);
                    }
                    case "month" -> {
                        first = d.withDayOfMonth(1);
                        next = first.plusMonths(1);
                    }
                    default -> {
                        first = d.withDayOfYear(1);
                        next = first.plusYears(1);
                    }
                }
                // atStartOfDay: a midnight in a spring-forward gap is the instant of the change (SPEC's rule)
                start = first.atStartOfDay(zone);
                span[0] = start.toInstant().toEpochMilli();
                end = next.atStartOfDay(zone).toInstant().toEpochMilli();
            }
        }
        span[1] = end;
        int off = start.getOffset().getTotalSeconds();
        int abs = Math.abs(off);
        String offset = String.format(Locale.ROOT, "%s%02d:%02d", off < 0 ? "-" : "+", abs / 3600, abs % 3600 / 60)
                + (abs % 60 != 0 ? String.format(Locale.ROOT, ":%02d", abs % 60) : "");
        return String.format(Locale.ROOT, "%s:%04d-%02d-%02dT%02d:%02d%s", period, start.getYear(), start.getMonthValue(),
                start.getDayOfMonth(), start.getHour(), start.getMinute(), offset);
    }

    /** The end (ms) of the calendar {@code period} (minute ... year) holding {@code t} in {@code zone}. */
    static long periodEnd(long t, String period, ZoneId zone) {
        long[] span = new long[2];
        bucket(period, zone, t, span);
        return span[1];
    }

    @Override
    public String toString() {
        return "LocalRateLimitTransport" + new LinkedHashMap<>(Map.of("keys", keys.size()));
    }
}
