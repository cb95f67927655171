package dev.redisratelimit.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The LOCAL Redis-down policy: an in-memory stand-in per instance while Redis
 * is unreachable. Every limit becomes a fixed window of its count per its
 * window (a quota: per its period's nominal length; an in-flight limit: a
 * counter given back on release); all-or-nothing like RL.ALL. It limits each
 * instance alone, so N instances admit up to N times the limit: a floor, not
 * the shared limit.
 */
public final class LocalLimiter {

    private static final int MAX_KEYS = 100_000;

    private final ConcurrentHashMap<String, long[]> windows = new ConcurrentHashMap<>();

    /** Admits or refuses; on admission returns the keys of in-flight counters to give back, else null. */
    public synchronized List<String> tryAcquire(Policy policy, String key, RuntimeLimits runtime) {
        long now = System.currentTimeMillis();
        if (windows.size() > MAX_KEYS) {
            windows.clear(); // bounded memory: forget rather than grow while Redis is down
        }
        List<long[]> taken = new ArrayList<>();
        List<String> leases = new ArrayList<>();
        for (Limit l : policy.limits()) {
            String k = policy.name() + "|" + (l.shared() ? "" : key) + "|" + l.name();
            long limit = runtime.count(policy.name(), l);
            long span = l.kind() == Limit.Kind.QUOTA ? Limit.nominalSeconds(l.period()) * 1000
                    : l.kind() == Limit.Kind.CONCURRENCY ? Long.MAX_VALUE : l.window().toMillis();
            long[] w = windows.computeIfAbsent(k, x -> new long[] {now, 0});
            if (l.kind() != Limit.Kind.CONCURRENCY && now - w[0] >= span) {
                w[0] = now;
                w[1] = 0;
            }
            if (w[1] + 1 > limit) {
                return null;
            }
            taken.add(w);
            if (l.kind() == Limit.Kind.CONCURRENCY) {
                leases.add(k);
            }
        }
        for (long[] w : taken) {
            w[1]++;
        }
        return leases;
    }

    public synchronized void release(List<String> leases) {
        for (String k : leases) {
            long[] w = windows.get(k);
            if (w != null && w[1] > 0) {
                w[1]--;
            }
        }
    }
}
