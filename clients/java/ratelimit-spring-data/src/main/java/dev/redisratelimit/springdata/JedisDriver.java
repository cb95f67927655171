package dev.redisratelimit.springdata;

import dev.redisratelimit.client.RateLimitException;
import dev.redisratelimit.client.RedisCall;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import redis.clients.jedis.AbstractPipeline;
import redis.clients.jedis.ClusterCommandArguments;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPool;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.Response;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * Spring Data's Jedis driver: {@link Jedis} (standalone) or
 * {@link JedisCluster} (routed by the call's key); one command directly,
 * several in a Jedis pipeline. Loaded only when Jedis is present.
 */
final class JedisDriver {

    private JedisDriver() {
    }

    static boolean handles(Object nativeConnection) {
        return nativeConnection instanceof Jedis || nativeConnection instanceof JedisCluster;
    }

    // JedisCluster routes by its ClusterConnectionProvider's slot table (kept up to date by Jedis on MOVED and
    // connection failures), which it exposes through no public method (UnifiedJedis.provider is protected): read
    // by reflection once. Without it (a Jedis that renamed the field), one circuit for the whole Cluster.
    private static final java.lang.reflect.Field PROVIDER = providerField();

    private static java.lang.reflect.Field providerField() {
        try {
            java.lang.reflect.Field f = UnifiedJedis.class.getDeclaredField("provider");
            f.setAccessible(true);
            return f;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /**
     * Under Cluster, the primary that serves {@code key}'s slot in Jedis's own
     * slot table ({@code host:port}, where Jedis sends the call): an in-memory
     * lookup. Null standalone or while Jedis does not know the slot.
     */
    static String nodeOf(Object nativeConnection, String key) {
        if (!(nativeConnection instanceof JedisCluster cluster) || PROVIDER == null) {
            return null;
        }
        try {
            if (PROVIDER.get(cluster) instanceof ClusterConnectionProvider provider) {
                HostAndPort node = provider.getNode(JedisClusterCRC16.getSlot(key));
                return node == null ? null : node.getHost() + ":" + node.getPort();
            }
        } catch (IllegalAccessException | RuntimeException e) {
            // no slot table now: the one circuit
        }
        return null;
    }

    /** PINGs {@code node} of a Cluster through Jedis's pool for it (blocking, within Jedis's timeouts); null when Jedis knows no such node. */
    static CompletionStage<Object> ping(Object nativeConnection, String node) {
        if (!(nativeConnection instanceof JedisCluster cluster)) {
            return null;
        }
        ConnectionPool pool = cluster.getClusterNodes().get(node);
        if (pool == null) {
            return null;
        }
        try (Connection connection = pool.getResource()) {
            connection.sendCommand(Protocol.Command.PING);
            return CompletableFuture.completedFuture(connection.getStatusCodeReply());
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * Under Cluster, a key in the first slot of each primary, from the
     * cluster's own slot table ({@code CLUSTER SLOTS}, as Jedis reads it for
     * its routing): what must run on every primary (the Functions library
     * loaded at start-up) is routed by these keys. Standalone: none.
     */
    static List<String> primaryRoutes(Object nativeConnection) {
        if (!(nativeConnection instanceof JedisCluster cluster)) {
            return List.of();
        }
        Object reply = normalize(cluster.sendCommand("ratelimit", Protocol.Command.CLUSTER, "SLOTS"));
        // Each range: start, end, then the primary [host, port, id, ...], then its replicas.
        java.util.Map<String, Long> firstSlot = new java.util.LinkedHashMap<>();
        for (Object range : (List<?>) reply) {
            List<?> r = (List<?>) range;
            List<?> primary = (List<?>) r.get(2);
            firstSlot.merge(primary.get(0) + ":" + primary.get(1), (Long) r.get(0), Math::min);
        }
        List<String> keys = new ArrayList<>(firstSlot.size());
        for (long slot : firstSlot.values()) {
            keys.add(keyInSlot((int) slot));
        }
        return keys;
    }

    /** A short key whose CRC16 slot is {@code slot} (found by counting; 16384 slots, so a few thousand tries). */
    private static String keyInSlot(int slot) {
        for (int i = 0; ; i++) {
            String key = "rl:" + i;
            if (JedisClusterCRC16.getSlot(key) == slot) {
                return key;
            }
        }
    }

    static List<CompletionStage<Object>> pipeline(Object nativeConnection, List<RedisCall> calls) {
        if (calls.size() == 1) {
            return List.of(one(nativeConnection, calls.get(0)));
        }
        List<CompletionStage<Object>> out = new ArrayList<>(calls.size());
        AbstractPipeline pipeline = nativeConnection instanceof Jedis jedis ? jedis.pipelined() : ((JedisCluster) nativeConnection).pipelined();
        try (pipeline) {
            List<Response<Object>> responses = new ArrayList<>(calls.size());
            for (RedisCall call : calls) {
                responses.add(pipeline.sendCommand(arguments(call, nativeConnection instanceof JedisCluster)));
            }
            pipeline.sync();
            for (Response<Object> response : responses) {
                try {
                    out.add(CompletableFuture.completedFuture(normalize(response.get())));
                } catch (JedisDataException e) {
                    out.add(CompletableFuture.failedFuture(new RateLimitException(e.getMessage(), e)));
                }
            }
        }
        return out;
    }

    private static CompletionStage<Object> one(Object nativeConnection, RedisCall call) {
        try {
            Object reply;
            String[] args = call.args().toArray(String[]::new);
            if (nativeConnection instanceof Jedis jedis) {
                reply = jedis.sendCommand(command(call), args);
            } else {
                // JedisCluster routes by the sample key; a keyless call (COMMAND INFO) may go to any node.
                String sample = call.routingKey() == null ? "ratelimit" : call.routingKey();
                reply = ((JedisCluster) nativeConnection).sendCommand(sample, command(call), args);
            }
            return CompletableFuture.completedFuture(normalize(reply));
        } catch (JedisDataException e) {
            return CompletableFuture.failedFuture(new RateLimitException(e.getMessage(), e));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private static CommandArguments arguments(RedisCall call, boolean cluster) {
        // A cluster pipeline groups commands per node by the slot of their keys.
        CommandArguments args = cluster ? new ClusterCommandArguments(command(call)) : new CommandArguments(command(call));
        List<String> raw = call.args();
        for (int i = 0; i < raw.size(); i++) {
            if (i == call.keyIndex()) {
                args.key(raw.get(i));
            } else {
                args.add(raw.get(i));
            }
        }
        return args;
    }

    private static ProtocolCommand command(RedisCall call) {
        byte[] raw = call.command().getBytes(StandardCharsets.US_ASCII);
        return () -> raw;
    }

    private static Object normalize(Object reply) {
        if (reply instanceof byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
        if (reply instanceof List<?> list) {
            List<Object> out = new ArrayList<>(list.size());
            for (Object item : list) {
                out.add(normalize(item));
            }
            return out;
        }
        return reply;
    }
}
