package dev.redisratelimit.client;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A circuit in front of Redis: after a decision that Redis did not answer in
 * its budget, requests stop going to Redis (they get the Redis-down policy at
 * once, no per-request reconnect or timeout) while one background probe
 * PINGs every probe interval; the first answer closes the circuit, so
 * decisions use Redis again within about one interval of it answering.
 */
public final class RedisAvailability implements AutoCloseable {

    private static final System.Logger log = System.getLogger(RedisAvailability.class.getName());

    private final RateLimitTransport transport;
    private final long probeMs;
    private final long budgetMs;
    private final AtomicBoolean down = new AtomicBoolean();
    private final ScheduledExecutorService probe;

    public RedisAvailability(RateLimitTransport transport, Duration probeInterval, Duration budget) {
        this.transport = transport;
        this.probeMs = Math.max(10, probeInterval.toMillis());
        this.budgetMs = Math.max(10, budget.toMillis());
        this.probe = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "ratelimit-redis-probe");
            t.setDaemon(true);
            return t;
        });
    }

    public boolean isDown() {
        return down.get();
    }

    /** Called when Redis failed to answer a decision in time. */
    public void markDown(Throwable why) {
        if (down.compareAndSet(false, true)) {
            log.log(System.Logger.Level.WARNING, "Redis unavailable for rate limits ({0}); applying the Redis-down policies and probing every {1} ms",
                    why == null ? "no answer" : why.toString(), Long.toString(probeMs));
            probe.schedule(this::probeOnce, probeMs, TimeUnit.MILLISECONDS);
        }
    }

    private void probeOnce() {
        CompletableFuture<Object> f;
        try {
            f = transport.execute(new RedisCall("PING", List.of(), -1)).toCompletableFuture();
        } catch (RuntimeException e) {
            f = CompletableFuture.failedFuture(e);
        }
        try {
            f.get(budgetMs, TimeUnit.MILLISECONDS);
            down.set(false);
            log.log(System.Logger.Level.INFO, "Redis answers again: rate limits decided by Redis");
        } catch (Exception e) {
            f.cancel(true);
            probe.schedule(this::probeOnce, probeMs, TimeUnit.MILLISECONDS);
        }
    }

    @Override
    public void close() {
        probe.shutdownNow();
    }
}
