package dev.redisratelimit.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Leases whose call was sent but whose reply was lost (the driver's command
 * timeout, a broken or reset connection): Redis may have run it, so each is
 * released by its token (chosen by the client, CLIENTS.md §3) once Redis
 * answers again — by the probe before it closes the node's circuit, or every
 * probe interval while the circuit is closed (one lost reply does not open
 * it). Releasing a token Redis never saw changes nothing. At most
 * {@value #MAX} wait; past that they expire by their TTL (logged). The same
 * queue, bound and timing as the Python and Node clients.
 */
final class LostLeases {

    private static final System.Logger log = System.getLogger(LostLeases.class.getName());

    /** Releases that may wait at once. */
    static final int MAX = 10_000;

    private record Release(String node, String key, String token) {
    }

    private final RateLimitAsyncClient client;
    private final RedisAvailability availability;
    private final long budgetMs;
    private final ConcurrentLinkedQueue<Release> queue = new ConcurrentLinkedQueue<>();
    private final AtomicInteger size = new AtomicInteger();
    private final AtomicBoolean flushing = new AtomicBoolean();
    private final AtomicBoolean scheduled = new AtomicBoolean();

    LostLeases(RateLimitAsyncClient client, RedisAvailability availability, long budgetMs) {
        this.client = client;
        this.availability = availability;
        this.budgetMs = budgetMs;
        availability.beforeClosing(this::flush);
    }

    /** How many releases wait (for tests and health). */
    int size() {
        return size.get();
    }

    /** Queues the release of every lease among {@code clauses} (the others cannot be told apart: they stay taken). */
    void add(List<Clause> clauses) {
        boolean any = false;
        for (Clause c : clauses) {
            if (c instanceof Clause.Lease l) {
                any |= offer(l.key(), l.token());
            }
        }
        if (any) {
            later();
        }
    }

    /** Queues the release of a permit's leases (its release was lost). */
    void addLeases(List<Permit.Lease> leases) {
        boolean any = false;
        for (Permit.Lease l : leases) {
            any |= offer(l.key(), l.token());
        }
        if (any) {
            later();
        }
    }

    private boolean offer(String key, String token) {
        if (size.incrementAndGet() > MAX) {
            size.decrementAndGet();
            log.log(System.Logger.Level.WARNING, "rate limit: {0} lease releases already wait for Redis; the lease on {1} expires by its TTL",
                    Integer.toString(MAX), key);
            return false;
        }
        queue.add(new Release(availability.nodeOf(key), key, token));
        return true;
    }

    // The flusher: every probe interval while releases wait; a node whose circuit is open is left to its probe.
    private void later() {
        if (scheduled.compareAndSet(false, true)) {
            availability.later(() -> {
                scheduled.set(false);
                flush(null).whenComplete((ok, e) -> {
                    if (size.get() > 0) {
                        later();
                    }
                });
            });
        }
    }

    /**
     * Sends the waiting releases of {@code node} (null: of every node whose
     * circuit is closed), one RL.RELEASE per key with all its tokens; true
     * when none failed for want of Redis (those wait again).
     */
    CompletableFuture<Boolean> flush(String node) {
        if (size.get() == 0 || !flushing.compareAndSet(false, true)) {
            return CompletableFuture.completedFuture(size.get() == 0 || node == null);
        }
        Map<String, List<Release>> byKey = new LinkedHashMap<>();
        List<Release> kept = new ArrayList<>();
        for (Release r; (r = queue.poll()) != null;) {
            size.decrementAndGet();
            boolean mine = node == null ? !availability.isDown(r.node()) : r.node().equals(node) || node.equals(RedisAvailability.ANY_NODE);
            if (mine) {
                byKey.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r);
            } else {
                kept.add(r);
            }
        }
        requeue(kept);
        List<CompletableFuture<Boolean>> sent = new ArrayList<>(byKey.size());
        for (Map.Entry<String, List<Release>> e : byKey.entrySet()) {
            List<Release> rs = e.getValue();
            CompletableFuture<?> f;
            try {
                f = client.release(e.getKey(), rs.stream().map(Release::token).distinct().toList(), Options.none()).toCompletableFuture();
            } catch (RuntimeException ex) {
                f = CompletableFuture.failedFuture(ex);
            }
            sent.add(Timeouts.within(f, budgetMs).handle((v, ex) -> {
                Throwable cause = ex == null ? null : RateLimiter.unwrapped(ex);
                if (cause == null) {
                    return true;
                }
                if (cause instanceof RateLimitException rle && !RateLimiter.unavailableReply(rle)) {
                    log.log(System.Logger.Level.WARNING, "rate limit: Redis refused to release a lost lease on {0}: {1}", e.getKey(), cause.toString());
                    return true;
                }
                requeue(rs); // still unavailable (or slow: a second release of the same token is harmless)
                return false;
            }));
        }
        return CompletableFuture.allOf(sent.toArray(CompletableFuture[]::new)).handle((v, ex) -> {
            flushing.set(false);
            return sent.stream().allMatch(s -> s.getNow(false));
        });
    }

    private void requeue(List<Release> rs) {
        for (Release r : rs) {
            size.incrementAndGet();
            queue.add(r);
        }
    }
}
