package dev.redisratelimit.springdata;

import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RedisCall;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.springframework.data.redis.connection.RedisConnection;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.util.ClassUtils;

/**
 * The transport over Spring Data Redis's {@link RedisConnectionFactory}, so
 * a Spring application's RL calls use its {@code spring.data.redis.*}
 * settings (host, Cluster nodes, TLS, auth, pool, timeouts), with either of
 * its drivers, standalone or Cluster.
 *
 * <p>Each call borrows a connection from the factory and sends the command
 * through the driver underneath it: Spring Data's generic
 * {@code RedisConnection.execute} cannot be used, as its Lettuce driver reads
 * an unknown command's array reply as bytes and its Cluster {@code execute}
 * puts the routing key first (RL.ALL's key is not). So:
 * <ul>
 * <li>Lettuce driver: asynchronous, through the factory's shared native
 * connection, routed by key by Lettuce's Cluster client; concurrent calls are
 * pipelined on that connection.</li>
 * <li>Jedis driver: blocking (a completed stage when it returns); under
 * Cluster routed by key by {@code JedisCluster}; {@link #pipeline} uses a
 * Jedis pipeline (a cluster pipeline under Cluster).</li>
 * </ul>
 */
public final class SpringDataTransport implements RateLimitTransport {

    private static final ClassLoader LOADER = SpringDataTransport.class.getClassLoader();
    private static final boolean LETTUCE = ClassUtils.isPresent("io.lettuce.core.RedisClient", LOADER)
            && ClassUtils.isPresent("dev.redisratelimit.lettuce.LettuceTransport", LOADER);
    private static final boolean JEDIS = ClassUtils.isPresent("redis.clients.jedis.Jedis", LOADER);

    private final RedisConnectionFactory factory;
    // The driver's native connection last seen (for nodeOf, on every decision, without borrowing one).
    private volatile Object lastNative;

    private SpringDataTransport(RedisConnectionFactory factory) {
        this.factory = Objects.requireNonNull(factory, "factory");
    }

    /** A transport over the factory (the factory stays yours: {@link #close()} leaves it open). */
    public static SpringDataTransport of(RedisConnectionFactory factory) {
        return new SpringDataTransport(factory);
    }

    public RedisConnectionFactory factory() {
        return factory;
    }

    @Override
    public CompletionStage<Object> execute(RedisCall call) {
        return pipeline(List.of(call)).get(0);
    }

    /** Under Cluster, a key per primary (Lettuce: its partitions; Jedis: {@code CLUSTER SLOTS}); standalone none. */
    @Override
    public List<String> primaryRoutes() {
        RedisConnection connection;
        try {
            connection = factory.getConnection();
        } catch (RuntimeException e) {
            return List.of();
        }
        try {
            Object nativeConnection = connection.getNativeConnection();
            if (LETTUCE && LettuceDriver.handles(nativeConnection)) {
                return LettuceDriver.primaryRoutes(nativeConnection);
            }
            return JEDIS && JedisDriver.handles(nativeConnection) ? JedisDriver.primaryRoutes(nativeConnection) : List.of();
        } catch (RuntimeException e) {
            return List.of(); // the slot table unreadable now: the node reached, the others on their first call
        } finally {
            connection.close();
        }
    }

    /**
     * Under Cluster, the primary serving the key's slot ({@code host:port}:
     * Lettuce's partitions, or Jedis's slot table), one circuit per node as
     * CLIENTS.md §3 asks; standalone null.
     */
    @Override
    public String nodeOf(String key) {
        Object nativeConnection = lastNative;
        if (nativeConnection == null) {
            nativeConnection = nativeConnection();
            if (nativeConnection == null) {
                return null;
            }
        }
        if (LETTUCE && LettuceDriver.handles(nativeConnection)) {
            return LettuceDriver.nodeOf(nativeConnection, key);
        }
        return JEDIS && JedisDriver.handles(nativeConnection) ? JedisDriver.nodeOf(nativeConnection, key) : null;
    }

    @Override
    public boolean isConnected(String node) {
        Object nativeConnection = lastNative;
        return nativeConnection == null || !LETTUCE || !LettuceDriver.handles(nativeConnection)
                || LettuceDriver.isConnected(nativeConnection, node);
    }

    @Override
    public CompletionStage<Object> ping(String node) {
        Object nativeConnection = nativeConnection();
        if (nativeConnection != null && LETTUCE && LettuceDriver.handles(nativeConnection)) {
            return LettuceDriver.ping(nativeConnection, node);
        }
        if (nativeConnection != null && JEDIS && JedisDriver.handles(nativeConnection)) {
            CompletionStage<Object> pinged = JedisDriver.ping(nativeConnection, node);
            if (pinged != null) {
                return pinged;
            }
        }
        return execute(new RedisCall("PING", List.of(), -1));
    }

    private Object nativeConnection() {
        RedisConnection connection;
        try {
            connection = factory.getConnection();
        } catch (RuntimeException e) {
            return null;
        }
        try {
            Object n = connection.getNativeConnection();
            lastNative = n;
            return n;
        } catch (RuntimeException e) {
            return null;
        } finally {
            connection.close();
        }
    }

    @Override
    public List<CompletionStage<Object>> pipeline(List<RedisCall> calls) {
        RedisConnection connection;
        try {
            connection = factory.getConnection();
        } catch (RuntimeException e) {
            return failed(calls.size(), e);
        }
        Object nativeConnection = connection.getNativeConnection();
        lastNative = nativeConnection;
        if (LETTUCE && LettuceDriver.handles(nativeConnection)) {
            List<CompletionStage<Object>> replies = LettuceDriver.pipeline(nativeConnection, calls);
            // The native connection is the factory's shared one (or a dedicated one
            // this RedisConnection holds): give it back once every reply is in.
            CompletableFuture<?> all = replies.size() == 1 ? replies.get(0).toCompletableFuture()
                    : CompletableFuture.allOf(replies.stream().map(CompletionStage::toCompletableFuture).toArray(CompletableFuture[]::new));
            all.whenComplete((done, failure) -> connection.close());
            return replies;
        }
        try {
            if (JEDIS && JedisDriver.handles(nativeConnection)) {
                return JedisDriver.pipeline(nativeConnection, calls);
            }
            throw new IllegalStateException("unsupported Spring Data Redis driver: " + nativeConnection.getClass().getName()
                    + " (the Lettuce driver needs dev.redisratelimit:ratelimit-lettuce on the class path)");
        } catch (RuntimeException e) {
            return failed(calls.size(), e);
        } finally {
            connection.close();
        }
    }

    private static List<CompletionStage<Object>> failed(int n, Throwable failure) {
        CompletionStage<Object> f = CompletableFuture.failedFuture(failure);
        return java.util.Collections.nCopies(n, f);
    }
}
