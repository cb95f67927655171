package dev.redisratelimit.client;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One circuit per Redis node (CLIENTS.md §3): per Cluster primary, as the
 * transport names it ({@link RateLimitTransport#nodeOf}), one ({@code "*"})
 * for a standalone server, Sentinel, or while a Cluster's slots are not known.
 * A node's circuit opens on a failure of that node — a refused, reset or
 * broken connection, {@code CLUSTERDOWN}/{@code TRYAGAIN}/{@code MASTERDOWN}/
 * {@code LOADING}, or {@value #OVERRUNS} budget overruns in a row (one slow
 * reply, a GC pause or a busy machine, is not an outage). While it is open,
 * decisions on that node's keys get the Redis-down mode at once (no
 * reconnect or timeout per request) and one background probe PINGs that
 * node every probe interval; its first answer closes the circuit, so
 * decisions use Redis again within about one interval of it answering. Keys
 * served by the other nodes are decided by Redis meanwhile, as in the
 * Python and Node clients.
 */
public final class RedisAvailability implements AutoCloseable {

    private static final System.Logger log = System.getLogger(RedisAvailability.class.getName());

    /** Budget overruns in a row on one node that open its circuit (the same number in every client). */
    public static final int OVERRUNS = 3;

    /** The circuit of a server that is not a Cluster (or a Cluster whose slots are not known yet). */
    public static final String ANY_NODE = "*";

    /** One node's circuit: open while the node fails; its probe closes it. */
    private static final class Circuit {
        final String node;
        final AtomicBoolean open = new AtomicBoolean();
        final AtomicInteger overruns = new AtomicInteger();
        // When a trip was last logged at WARNING: a node that answers PING but not decisions (a Cluster node
        // rejoining says CLUSTERDOWN) opens and closes each probe interval; one warning per 10 s says so.
        volatile long warnedAt;
        volatile boolean warned;

        Circuit(String node) {
            this.node = node;
        }
    }

    private final RateLimitTransport transport;
    private final long probeMs;
    private final long budgetMs;
    private final Map<String, Circuit> circuits = new ConcurrentHashMap<>();
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

    /** The node that serves {@code key} (its circuit's name): {@link #ANY_NODE} unless the transport knows a Cluster's slots. */
    public String nodeOf(String key) {
        String node;
        try {
            node = transport.nodeOf(key);
        } catch (RuntimeException e) {
            node = null; // no slot table yet: decided as "the server"
        }
        return node == null ? ANY_NODE : node;
    }

    /** Whether some node's circuit is open (its keys decided by the Redis-down mode; a probe is running). */
    public boolean isDown() {
        for (Circuit c : circuits.values()) {
            if (c.open.get()) {
                return true;
            }
        }
        return false;
    }

    /** Whether the circuit of {@code node} is open. */
    public boolean isDown(String node) {
        Circuit c = circuits.get(node);
        return c != null && c.open.get();
    }

    /** Whether the circuit of any of {@code nodes} is open. */
    public boolean anyDown(List<String> nodes) {
        for (int i = 0; i < nodes.size(); i++) {
            if (isDown(nodes.get(i))) {
                return true;
            }
        }
        return false;
    }

    /** The nodes whose circuit is open, sorted (for a health report). */
    public List<String> openNodes() {
        return circuits.values().stream().filter(c -> c.open.get()).map(c -> c.node).sorted().toList();
    }

    private Circuit circuit(String node) {
        return circuits.computeIfAbsent(node == null ? ANY_NODE : node, Circuit::new);
    }

    /** These nodes answered in time: their overrun count starts again. */
    public void answered(List<String> nodes) {
        for (int i = 0; i < nodes.size(); i++) {
            Circuit c = circuits.get(nodes.get(i));
            if (c != null && c.overruns.get() != 0) {
                c.overruns.set(0);
            }
        }
    }

    /**
     * These nodes did not answer within the budget: {@value #OVERRUNS} in a
     * row open a node's circuit, one when the driver says it is disconnected.
     */
    public void overran(List<String> nodes, Throwable why) {
        for (String n : nodes) {
            Circuit c = circuit(n);
            boolean connected;
            try {
                connected = transport.isConnected(n);
            } catch (RuntimeException e) {
                connected = true;
            }
            // The driver says the connection is down (reconnecting, the call queued): a failure, not a slow reply.
            if (!connected || c.overruns.incrementAndGet() >= OVERRUNS) {
                trip(c, why);
            }
        }
    }

    /** These nodes failed (a broken connection, CLUSTERDOWN, ...): their circuits open now. */
    public void failed(List<String> nodes, Throwable why) {
        for (String n : nodes) {
            trip(circuit(n), why);
        }
    }

    /** Redis as a whole did not answer (the start-up check): the circuit of {@link #ANY_NODE} opens. */
    public void markDown(Throwable why) {
        failed(List.of(ANY_NODE), why);
    }

    private void trip(Circuit c, Throwable why) {
        if (c.open.compareAndSet(false, true)) {
            long now = System.nanoTime();
            boolean again = c.warnedAt != 0 && now - c.warnedAt < TimeUnit.SECONDS.toNanos(10);
            if (!again) {
                c.warnedAt = now;
            }
            c.warned = !again;
            log.log(again ? System.Logger.Level.DEBUG : System.Logger.Level.WARNING, "Redis{0} unavailable for rate limits ({1}); its keys get the Redis-down policies, "
                    + "probed every {2} ms", c.node.equals(ANY_NODE) ? "" : " " + c.node, why == null ? "no answer" : why.toString(),
                    Long.toString(probeMs));
            schedule(c);
        }
    }

    private void schedule(Circuit c) {
        try {
            probe.schedule(() -> probeOnce(c), probeMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closed) {
            // closing: no more probes
        }
    }

    // Asynchronous: one probe thread serves every node, and a node that never answers does not hold it.
    private void probeOnce(Circuit c) {
        CompletableFuture<Object> f;
        try {
            f = transport.ping(c.node).toCompletableFuture();
        } catch (RuntimeException e) {
            f = CompletableFuture.failedFuture(e);
        }
        Timeouts.within(f, budgetMs).thenCompose(v -> flushBeforeClosing(c.node)).whenComplete((flushed, e) -> {
            if (e == null && flushed) {
                c.overruns.set(0);
                c.open.set(false);
                log.log(c.warned ? System.Logger.Level.INFO : System.Logger.Level.DEBUG, "Redis{0} answers again: its rate limits decided by Redis",
                        c.node.equals(ANY_NODE) ? "" : " " + c.node);
            } else {
                schedule(c);
            }
        });
    }

    // What must reach a node before its circuit closes: the releases of leases whose replies were lost
    // (LostLeases), so a decision made once Redis answers again does not see them held.
    private volatile java.util.function.Function<String, CompletableFuture<Boolean>> beforeClosing;

    void beforeClosing(java.util.function.Function<String, CompletableFuture<Boolean>> flush) {
        this.beforeClosing = flush;
    }

    private CompletableFuture<Boolean> flushBeforeClosing(String node) {
        java.util.function.Function<String, CompletableFuture<Boolean>> flush = beforeClosing;
        if (flush == null) {
            return CompletableFuture.completedFuture(true);
        }
        try {
            return flush.apply(node);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** Runs {@code task} on the probe thread after one probe interval (nothing once closed). */
    void later(Runnable task) {
        try {
            probe.schedule(task, probeMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closed) {
            // closing: the waiting releases expire by their TTL
        }
    }

    @Override
    public void close() {
        probe.shutdownNow();
    }
}
