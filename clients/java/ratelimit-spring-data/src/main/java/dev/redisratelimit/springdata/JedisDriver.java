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
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.Response;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
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
