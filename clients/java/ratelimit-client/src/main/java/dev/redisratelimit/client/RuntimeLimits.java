package dev.redisratelimit.client;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Limits changed at run time (seed 001's real-time switch): kept in one Redis
 * hash under the prefix, {@code <prefix>ratelimit:limits}, field
 * {@code <policy>/<limit>}, so every instance — and one started later — uses
 * them. Each instance reads the hash in the background every refresh
 * interval (no Redis read per request); the module applies a new count to the
 * existing state, so nothing is reset.
 */
public final class RuntimeLimits {

    private static final System.Logger log = System.getLogger(RuntimeLimits.class.getName());

    private final RateLimitTransport transport;
    private final String hashKey;
    private final long budgetMs;
    private volatile Map<String, Long> current = Map.of();
    private final java.util.concurrent.atomic.AtomicLong issued = new java.util.concurrent.atomic.AtomicLong();
    private long applied; // the ticket of the read in current (guarded by this)
    private final Map<String, Policy> known = new ConcurrentHashMap<>();
    private final Map<String, String> warned = new ConcurrentHashMap<>();
    final java.util.concurrent.atomic.AtomicLong warnings = new java.util.concurrent.atomic.AtomicLong(); // for tests

    public RuntimeLimits(RateLimitTransport transport, String prefix, long budgetMs) {
        this.transport = transport;
        this.hashKey = prefix + "ratelimit:limits";
        this.budgetMs = budgetMs;
    }

    /**
     * Reads the hash every {@code every} on a daemon thread until the returned
     * handle is closed (the Spring starter schedules {@link #refresh()} itself).
     */
    public AutoCloseable refreshEvery(java.time.Duration every) {
        java.util.concurrent.ScheduledExecutorService timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "ratelimit-runtime-limits");
            t.setDaemon(true);
            return t;
        });
        long ms = Math.max(10, every.toMillis());
        timer.scheduleWithFixedDelay(this::refresh, ms, ms, TimeUnit.MILLISECONDS);
        return timer::shutdownNow;
    }

    void register(Policy policy) {
        known.put(policy.name(), policy);
    }

    /** The count in force for a limit: the value set at run time, else the configured one. */
    public long count(String policy, Limit limit) {
        Map<String, Long> set = current;
        if (set.isEmpty()) {
            return limit.count(); // nothing set at run time: no field name to build (several per decision)
        }
        Long v = set.get(policy + "/" + limit.name());
        // A value the limit's type cannot take (0 for a window, bucket or concurrency limit) is ignored, as every
        // client ignores it; a quota or a lockout may be 0.
        return v != null && (v >= 1 || limit.kind() == Limit.Kind.QUOTA || limit.kind() == Limit.Kind.LOCKOUT) ? v : limit.count();
    }

    /** The count in force for a policy's duplicate window (field {@code <policy>/duplicate}), else {@code defined}. */
    long duplicateCount(String policy, long defined) {
        Map<String, Long> set = current;
        Long v = set.isEmpty() ? null : set.get(policy + "/duplicate");
        return v != null && v >= 1 ? v : defined;
    }

    /**
     * Sets limits of a policy at run time on every instance (within the
     * refresh interval), keeping the counts. Each value is checked against the
     * limit's type (a sliding window needs 1 or more; a quota may be 0, which
     * refuses everything).
     *
     * @throws IllegalArgumentException for an unknown policy or limit, or a value out of range
     */
    public void set(String policy, Map<String, Long> counts) {
        Policy p = known.get(policy);
        if (p == null) {
            throw new IllegalArgumentException("unknown rate-limit policy '" + policy + "'");
        }
        if (counts.isEmpty()) {
            throw new IllegalArgumentException("no limit to set");
        }
        List<String> args = new java.util.ArrayList<>();
        args.add(hashKey);
        for (Map.Entry<String, Long> e : counts.entrySet()) {
            Limit l = p.limit(e.getKey());
            if (l == null) {
                throw new IllegalArgumentException("policy '" + policy + "' has no limit '" + e.getKey() + "'");
            }
            Long v = e.getValue();
            if (v == null || v < l.minCount() || v > Limit.MAX) {
                throw new IllegalArgumentException("limit '" + e.getKey() + "' must be an integer from " + l.minCount() + " to 2^53-1");
            }
            args.add(policy + "/" + e.getKey());
            args.add(Long.toString(v));
        }
        await(transport.execute(new RedisCall("HSET", args, 0)).toCompletableFuture());
        refresh();
    }

    /** The counts in force for a policy, read from Redis (for an admin endpoint; not per request). */
    public Map<String, Long> get(String policy) {
        Policy p = known.get(policy);
        if (p == null) {
            throw new IllegalArgumentException("unknown rate-limit policy '" + policy + "'");
        }
        Map<String, Long> stored = read();
        Map<String, Long> out = new LinkedHashMap<>();
        for (Limit l : p.limits()) {
            Long v = stored.get(policy + "/" + l.name());
            out.put(l.name(), v != null ? v : l.count());
        }
        return Collections.unmodifiableMap(out);
    }

    /**
     * Reads the hash now; a failure keeps the last values (logged once per
     * refresh). Reads overlap (the background refresher, {@link #set}'s own
     * read after its write): a read is applied only if none issued after it
     * was applied first, so a slow read begun before a write never puts the
     * old value back.
     */
    public void refresh() {
        long ticket = issued.incrementAndGet();
        try {
            Map<String, Long> read = read();
            synchronized (this) {
                if (ticket > applied) {
                    applied = ticket;
                    current = read;
                }
            }
        } catch (RuntimeException e) {
            log.log(System.Logger.Level.DEBUG, "runtime limits not refreshed: {0}", e.toString());
        }
    }

    private Map<String, Long> read() {
        Object reply = await(transport.execute(new RedisCall("HGETALL", List.of(hashKey), 0)).toCompletableFuture());
        Map<String, Long> out = new HashMap<>();
        if (reply instanceof List<?> l) {
            for (int i = 0; i + 1 < l.size(); i += 2) {
                put(out, text(l.get(i)), text(l.get(i + 1)));
            }
        } else if (reply instanceof Map<?, ?> m) {
            m.forEach((k, v) -> put(out, text(k), text(v)));
        }
        return out;
    }

    // A value that is not an integer is ignored, and logged once per distinct value of its field, not on
    // every refresh (every 500 ms in the Spring starter: issue 35).
    private static final java.util.regex.Pattern DIGITS = java.util.regex.Pattern.compile("[0-9]{1,16}");

    private void put(Map<String, Long> out, String field, String value) {
        try {
            // Decimal digits only, at most 2^53-1 (CLIENTS.md §1): "+3", "-1", " 3" and 2^53 are ignored in every client.
            if (!DIGITS.matcher(value).matches() || Long.parseLong(value) > Limits.MAX) {
                throw new NumberFormatException(value);
            }
            out.put(field, Long.parseLong(value));
            warned.remove(field);
        } catch (NumberFormatException e) {
            if (!value.equals(warned.put(field, value))) {
                if (warned.size() > 1024) {
                    warned.clear(); // bounded: at worst a field is warned about once more
                }
                warnings.incrementAndGet();
                log.log(System.Logger.Level.WARNING, "ignoring runtime limit {0}: \"{1}\" is not a decimal integer from 0 to 2^53-1", field, value);
            }
        }
    }

    private static String text(Object o) {
        return o instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(o);
    }

    private Object await(java.util.concurrent.CompletableFuture<Object> f) {
        try {
            return f.get(Math.max(budgetMs, 1000), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        } catch (Exception e) {
            f.cancel(true);
            throw new IllegalStateException("Redis did not answer: " + e, e);
        }
    }
}
