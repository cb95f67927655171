package dev.redisratelimit.client;

import java.time.Instant;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
import java.time.temporal.TemporalAdjusters;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The LOCAL Redis-down mode: an in-process stand-in for the module while
 * Redis is unreachable, with the module's own algorithms — an exact sliding
 * log per sliding window, GCRA per token bucket, the calendar period of each
 * quota in its zone, in-flight counters, count-then-lock lockouts, the
 * duplicate window — and the call's costs and estimates charged (an
 * estimate settled to the usage reported when the permit closes, as
 * RL.ALL's DEBIT would). All-or-nothing across the policies of one call.
 *
 * <p><b>Exact within one instance, not across instances.</b> Each instance
 * keeps its own counters: N instances admit up to N times a limit while
 * Redis is down, and what they admitted is not in Redis's counters when it
 * answers again (so a caller may get up to one more limit's worth there).
 * Counters live in memory only; a restart forgets them.
 *
 * <p><b>Bounded memory without forgetting.</b> A key's state is dropped only
 * once it has ended (its window passed, its bucket full again, its period
 * over, no call in flight, its lock lifted). Past {@code maxKeys} live keys or
 * {@code maxEntries} sliding-log entries, a call that would need more is
 * refused (retry after the earliest end) — refusing rather than freeing a
 * spent key early, which would admit its caller again.
 */
public final class LocalLimiter {

    /** Default bound on the keys held at once. */
    public static final int DEFAULT_MAX_KEYS = 100_000;
    /** Default bound on the sliding-log entries held at once (one per admitted call of a sliding window). */
    public static final int DEFAULT_MAX_ENTRIES = 1_000_000;

    private final int maxKeys;
    private final int maxEntries;
    private final LongSupplier clock;
    private final Map<String, State> states = new HashMap<>();
    private int entries;
    /** No scan for ended keys before this time (ms): the earliest end seen by the last scan. */
    private long nextSweep;

    public LocalLimiter() {
        this(DEFAULT_MAX_KEYS, DEFAULT_MAX_ENTRIES);
    }

    public LocalLimiter(int maxKeys, int maxEntries) {
        this(maxKeys, maxEntries, System::currentTimeMillis);
    }

    /** With a clock in ms (tests). */
    LocalLimiter(int maxKeys, int maxEntries, LongSupplier clock) {
        Limit.require(maxKeys >= 1 && maxEntries >= 1, "local limiter bounds must be at least 1");
        this.maxKeys = maxKeys;
        this.maxEntries = maxEntries;
        this.clock = clock;
    }

    /** What an admitted call holds here: the charges to settle or give back when its permit closes. */
    public static final class Held {
        private final List<Charge> charges = new ArrayList<>();

        /** Nothing held (no LOCAL policy in the call). */
        public boolean isEmpty() {
            return charges.isEmpty();
        }

        /** What a call's clause's estimate charged (the first of its limits). */
        long charged(PolicyCall call, int clause) {
            for (Charge c : charges) {
                if (c.estimate && c.call == call && c.clause == clause) {
                    return c.units;
                }
            }
            return 0;
        }

        /** The clause indexes of one call's policy charged an estimate. */
        List<Integer> estimateClauses(PolicyCall call) {
            List<Integer> out = new ArrayList<>();
            for (Charge c : charges) {
                if (c.estimate && c.call == call && !out.contains(c.clause)) {
                    out.add(c.clause);
                }
            }
            return out;
        }

        /** The clause indexes charged an estimate (to settle from the usage reported). */
        List<Integer> estimateClauses() {
            List<Integer> out = new ArrayList<>();
            for (Charge c : charges) {
                if (c.estimate && !out.contains(c.clause)) {
                    out.add(c.clause);
                }
            }
            return out;
        }
    }

    /** One limit's charge of one call. */
    private record Charge(String key, State state, PolicyCall call, int clause, long units, boolean estimate, Object token) {
    }

    /**
     * Admits every call, charging each limit its clause's cost, or refuses
     * them all (nothing charged).
     *
     * @throws RateLimitRefusedException naming the first policy refused, its
     *         retry-after from the local state
     */
    public synchronized Held acquire(List<PolicyCall> calls, RuntimeLimits runtime) {
        long now = clock.getAsLong();
        Held held = new Held();
        for (PolicyCall call : calls) {
            PolicyDecision refused = charge(call, runtime, now, held);
            if (refused != null) {
                giveBack(held);
                throw new RateLimitRefusedException(refused);
            }
        }
        return held;
    }

    /**
     * Ends a call: in-flight counters released, each estimate settled to the
     * usage reported for its clause (none reported: 0, a full refund; above
     * the limit: the limit), other charges kept.
     */
    public synchronized void release(Held held, Map<Integer, Long> usedByClause) {
        release(held, (call, clause) -> usedByClause.get(clause));
    }

    /** As {@link #release(Held, Map)}, the usage of each call's clause reported apart (a permit of several calls). */
    synchronized void release(Held held, Permit.Usage usage) {
        long now = clock.getAsLong();
        for (Charge c : held.charges) {
            if (c.state.kind == Limit.Kind.CONCURRENCY) {
                c.state.undo(c, 0, now);
            } else if (c.estimate) {
                Long reported = usage.of(c.call, c.clause);
                long used = Math.max(0, Math.min(reported == null ? 0L : reported, c.state.limit));
                c.state.undo(c, used, now);
            }
        }
        held.charges.clear();
    }

    /** Gives every charge back (the call was not served). */
    public synchronized void giveBack(Held held) {
        long now = clock.getAsLong();
        for (Charge c : held.charges) {
            c.state.undo(c, 0, now);
        }
        held.charges.clear();
    }

    /** Keys held now (ended ones included until swept). */
    public synchronized int size() {
        return states.size();
    }

    private PolicyDecision charge(PolicyCall call, RuntimeLimits runtime, long now, Held held) {
        Policy policy = call.policy();
        List<PolicyClause> clauses = policy.clauses();
        int first = held.charges.size();
        for (int c = 0; c < clauses.size(); c++) {
            PolicyClause clause = clauses.get(c);
            long cost = call.costs() == null ? 1 : call.costs()[c];
            for (int item : clause.items()) {
                Limit l = clause.duplicate() ? null : policy.limits().get(item);
                String key;
                State s;
                if (l == null) {
                    if (call.subkey() == null) {
                        continue;
                    }
                    key = policy.name() + "|" + call.key() + "|duplicate|" + call.subkey();
                    s = state(key, Limit.Kind.SLIDING_WINDOW, 1, policy.duplicateWindow().toMillis(), 0, null, null, 0, now);
                } else {
                    key = policy.name() + "|" + (l.shared() ? "" : call.key()) + "|" + l.name();
                    // the call's zone, else the limit's (the core refuses a quota with neither before deciding)
                    ZoneId zone = l.kind() == Limit.Kind.QUOTA && call.zone() != null ? ZoneId.of(call.zone())
                            : l.zone() != null ? l.zone() : ZoneId.of("UTC");
                    s = state(key, l.kind(), runtime.count(policy.name(), l), l.window() == null ? 0 : l.window().toMillis(), l.burst(),
                            l.period(), zone, l.lockTime() == null ? 0 : l.lockTime().toMillis(), now);
                }
                // a lease takes the call's cost, as RL.LEASE; a lockout and the duplicate window count calls
                long units = l == null || l.kind() == Limit.Kind.LOCKOUT ? 1 : cost;
                long wait = s == null ? sweepWait(now) : s.admit(units, now, this);
                if (wait != 0) {
                    List<Charge> mine = new ArrayList<>(held.charges.subList(first, held.charges.size()));
                    held.charges.subList(first, held.charges.size()).clear();
                    for (Charge ch : mine) {
                        ch.state.undo(ch, 0, now);
                    }
                    boolean locked = s != null && s.kind == Limit.Kind.LOCKOUT;
                    boolean dup = l == null;
                    List<LimitState> items = new ArrayList<>();
                    if (l != null && s != null) {
                        items.add(new LimitState(l.name(), s.limit, l.windowSeconds(), 0, Limit.ceilSeconds(Math.max(0, wait)), true, wait));
                    }
                    return new PolicyDecision(policy.name(), false, items, items.isEmpty() ? -1 : 0, wait,
                            l == null ? Limit.Kind.SLIDING_WINDOW : l.kind(),
                            dup ? PolicyDecision.Kind.DUPLICATE : locked ? PolicyDecision.Kind.LOCKED : PolicyDecision.Kind.RATE_LIMITED,
                            policy.legacyHeaders());
                }
                held.charges.add(new Charge(key, s, call, c, units, clause.settle() != null, s.lastToken));
            }
        }
        return null;
    }

    // The state of a key, created when absent; null when the bounds are reached and nothing has ended.
    private State state(String key, Limit.Kind kind, long limit, long windowMs, long burst, QuotaPeriod period, ZoneId zone,
            long lockMs, long now) {
        State s = states.get(key);
        if (s == null) {
            if (states.size() >= maxKeys && !sweep(now)) {
                return null;
            }
            s = new State(kind);
            states.put(key, s);
        }
        s.limit = limit; // a runtime change applies at once, as in Redis
        s.windowMs = windowMs;
        s.burst = burst;
        s.period = period;
        s.zone = zone;
        s.lockMs = lockMs;
        return s;
    }

    // Drops every key that has ended; true when there is room now. Scans at most once until the earliest end seen.
    private boolean sweep(long now) {
        if (now < nextSweep) {
            return false;
        }
        long earliest = Long.MAX_VALUE;
        for (Iterator<State> it = states.values().iterator(); it.hasNext(); ) {
            State s = it.next();
            if (s.log != null) {
                entries -= s.prune(now);
            }
            long end = s.endsAt(now);
            if (end <= now) {
                entries -= s.log == null ? 0 : s.log.size();
                it.remove();
            } else {
                earliest = Math.min(earliest, end);
            }
        }
        nextSweep = states.size() >= maxKeys || entries >= maxEntries ? earliest : 0;
        return states.size() < maxKeys;
    }

    // Full: the wait until the earliest key ends (at least 1 ms).
    private long sweepWait(long now) {
        return nextSweep == Long.MAX_VALUE || nextSweep <= now ? 1000 : nextSweep - now;
    }

    /** One key's state, per its limit's kind. */
    private static final class State {
        final Limit.Kind kind;
        long limit;
        long windowMs;
        long burst;
        QuotaPeriod period;
        ZoneId zone;
        long lockMs;
        /** Sliding window: the admitted calls, oldest first, as {time ms, units}. */
        ArrayDeque<long[]> log;
        /** Token bucket: the theoretical arrival time in ns. */
        long tatNs;
        /** Quota: the current period's end (ms) and its count; lockout: the window's end and count. */
        long periodEnd;
        long count;
        /** Lockout: locked until (ms). */
        long lockedUntil;
        /** What the last admission charged, to undo it exactly (a log entry, or the quota period's end). */
        Object lastToken;

        State(Limit.Kind kind) {
            this.kind = kind;
        }

        /** Charges {@code units} and returns 0, or returns the ms to wait (-1: waiting cannot help) and charges nothing. */
        long admit(long units, long now, LocalLimiter owner) {
            lastToken = null;
            switch (kind) {
                case SLIDING_WINDOW -> {
                    if (log == null) {
                        log = new ArrayDeque<>();
                    }
                    owner.entries -= prune(now);
                    if (units > limit) {
                        return -1;
                    }
                    long used = 0;
                    for (long[] e : log) {
                        used += e[1];
                    }
                    if (used + units > limit) {
                        long need = used + units - limit;
                        for (long[] e : log) {
                            need -= e[1];
                            if (need <= 0) {
                                return Math.max(1, e[0] + windowMs - now);
                            }
                        }
                        return Math.max(1, windowMs);
                    }
                    if (units == 0) {
                        return 0;
                    }
                    if (owner.entries >= owner.maxEntries && (!owner.sweep(now) || owner.entries >= owner.maxEntries)) {
                        return owner.sweepWait(now);
                    }
                    long[] e = {now, units};
                    log.addLast(e);
                    owner.entries++;
                    lastToken = e;
                    return 0;
                }
                case TOKEN_BUCKET -> {
                    long t = now * 1_000_000L;
                    long emission = windowMs * 1_000_000L / limit;
                    long tau = emission * burst;
                    if (units > burst) {
                        return -1;
                    }
                    long next = Math.max(tatNs, t) + emission * units;
                    if (next - tau > t) {
                        return Math.max(1, ceilMs(next - tau - t));
                    }
                    tatNs = next;
                    return 0;
                }
                case QUOTA -> {
                    rollPeriod(now);
                    if (count + units > limit) {
                        return units > limit ? -1 : Math.max(1, periodEnd - now);
                    }
                    count += units;
                    lastToken = periodEnd;
                    return 0;
                }
                case CONCURRENCY -> {
                    if (units > limit) {
                        return -1;
                    }
                    if (count + units > limit) {
                        return 1000; // as a lease refusal in Redis: retry soon (the adapters answer their own value)
                    }
                    count += units;
                    return 0;
                }
                case LOCKOUT -> {
                    if (lockedUntil > now) {
                        return lockedUntil - now;
                    }
                    if (periodEnd <= now) {
                        periodEnd = now + windowMs;
                        count = 0;
                    }
                    if (count >= limit) {
                        lockedUntil = now + lockMs;
                        count = 0;
                        periodEnd = 0;
                        return lockMs;
                    }
                    count++;
                    return 0;
                }
                default -> throw new IllegalStateException(kind.name());
            }
        }

        /** Sets a charge's units to {@code keep} (0: given back entirely). */
        void undo(Charge c, long keep, long now) {
            long diff = keep - c.units();
            switch (kind) {
                case SLIDING_WINDOW -> {
                    if (c.token() instanceof long[] e) {
                        e[1] = Math.max(0, e[1] + diff);
                    }
                }
                case TOKEN_BUCKET -> {
                    long emission = windowMs * 1_000_000L / limit;
                    tatNs = Math.max(now * 1_000_000L - emission * burst, tatNs + emission * diff);
                }
                case QUOTA -> {
                    if (c.token() instanceof Long end && end == periodEnd) {
                        count = Math.max(0, count + diff);
                    }
                }
                case CONCURRENCY -> count = Math.max(0, count - c.units());
                case LOCKOUT -> {
                    if (keep == 0) {
                        count = Math.max(0, count - 1);
                    }
                }
                default -> {
                }
            }
        }

        // Removes the log entries that left the window; returns how many.
        private int prune(long now) {
            int n = 0;
            while (!log.isEmpty() && log.peekFirst()[0] <= now - windowMs) {
                log.pollFirst();
                n++;
            }
            return n;
        }

        private void rollPeriod(long now) {
            if (now >= periodEnd) {
                periodEnd = periodEnd(now, period, zone);
                count = 0;
            }
        }

        /** When this state is the same as no state (ms). */
        long endsAt(long now) {
            return switch (kind) {
                case SLIDING_WINDOW -> log == null || log.isEmpty() ? 0 : log.peekLast()[0] + windowMs;
                case TOKEN_BUCKET -> ceilMs(tatNs);
                case QUOTA -> count == 0 ? 0 : periodEnd;
                case CONCURRENCY -> count == 0 ? 0 : Long.MAX_VALUE;
                case LOCKOUT -> Math.max(lockedUntil, count == 0 ? 0 : periodEnd);
                default -> 0;
            };
        }
    }

    private static long ceilMs(long ns) {
        return Math.floorDiv(ns + 999_999, 1_000_000);
    }

    /** The end (ms) of the calendar period containing {@code now} in {@code zone} (ISO weeks from Monday). */
    static long periodEnd(long now, QuotaPeriod period, ZoneId zone) {
        ZonedDateTime t = Instant.ofEpochMilli(now).atZone(zone);
        ZonedDateTime end = switch (period) {
            case MINUTE -> t.truncatedTo(ChronoUnit.MINUTES).plusMinutes(1);
            case HOUR -> t.truncatedTo(ChronoUnit.HOURS).plusHours(1);
            case DAY -> t.toLocalDate().plusDays(1).atStartOfDay(zone);
            case WEEK -> t.toLocalDate().with(TemporalAdjusters.next(java.time.DayOfWeek.MONDAY)).atStartOfDay(zone);
            case MONTH -> t.toLocalDate().withDayOfMonth(1).plusMonths(1).atStartOfDay(zone);
            case YEAR -> t.toLocalDate().withDayOfYear(1).plusYears(1).atStartOfDay(zone);
        };
        return end.toInstant().toEpochMilli();
    }
}
