package dev.redisratelimit.lettuce;

import dev.redisratelimit.client.RateLimitException;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RedisCall;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.async.RedisAdvancedClusterAsyncCommands;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.ArrayOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;

/**
 * The transport over plain Lettuce, standalone or Cluster. Each command is
 * dispatched with its key marked as a key ({@code CommandArgs.addKey}), so
 * Lettuce's Cluster client sends it straight to the primary that serves the
 * key's slot (no MOVED); Lettuce writes concurrent commands back to back on
 * one connection, so independent decisions are pipelined.
 *
 * <pre>{@code
 * LettuceTransport t = LettuceTransport.create(RedisClient.create("redis://localhost:6379"));
 * LettuceTransport c = LettuceTransport.create(RedisClusterClient.create("redis://node1:7000"));
 * LettuceTransport shared = LettuceTransport.of(myConnection); // your StatefulRedis(Cluster)Connection<K, V>
 * }</pre>
 */
public final class LettuceTransport implements RateLimitTransport {

    // Arguments are encoded and replies decoded by this codec whatever the
    // connection's own codec: a dispatched command carries its CommandArgs'
    // codec and its output's, so one String/byte[] connection serves alike.
    private static final StringCodec CODEC = StringCodec.UTF8;

    private final RedisClusterAsyncCommands<?, ?> commands;
    private final AutoCloseable owned;

    private LettuceTransport(RedisClusterAsyncCommands<?, ?> commands, AutoCloseable owned) {
        this.commands = commands;
        this.owned = owned;
    }

    /** Opens its own connection from {@code client} (closed by {@link #close()}; the client stays yours). */
    public static LettuceTransport create(RedisClient client) {
        StatefulRedisConnection<String, String> connection = client.connect(StringCodec.UTF8);
        return new LettuceTransport(connection.async(), connection);
    }

    /** Opens its own Cluster connection from {@code client} (closed by {@link #close()}). */
    public static LettuceTransport create(RedisClusterClient client) {
        StatefulRedisClusterConnection<String, String> connection = client.connect(StringCodec.UTF8);
        return new LettuceTransport(connection.async(), connection);
    }

    /** Uses a connection you own (any codec); {@link #close()} leaves it open. */
    public static LettuceTransport of(StatefulRedisConnection<?, ?> connection) {
        return new LettuceTransport(connection.async(), null);
    }

    /** Uses a Cluster connection you own; {@link #close()} leaves it open. */
    public static LettuceTransport of(StatefulRedisClusterConnection<?, ?> connection) {
        return new LettuceTransport(connection.async(), null);
    }

    /**
     * Uses the async commands of a connection you own (standalone or Cluster,
     * any codec); for frameworks (Spring Data's Lettuce driver) that hand out
     * the commands, not the connection.
     */
    public static LettuceTransport of(RedisClusterAsyncCommands<?, ?> commands) {
        return new LettuceTransport(commands, null);
    }

    @Override
    public CompletionStage<Object> execute(RedisCall call) {
        CommandArgs<String, String> args = new CommandArgs<>(CODEC);
        List<String> raw = call.args();
        for (int i = 0; i < raw.size(); i++) {
            if (i == call.keyIndex()) {
                args.addKey(raw.get(i));
            } else {
                args.addValue(raw.get(i));
            }
        }
        CompletableFuture<Object> reply;
        try {
            CompletableFuture<RedisClusterAsyncCommands<String, String>> node = nodeOfRoute(call);
            if (node == null) { // the usual call: the connection routes it by its key, nothing to wait for
                reply = dispatch(asStrings(commands), call, args);
            } else {
                reply = node.thenCompose(c -> dispatch(c, call, args));
            }
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        return reply.exceptionallyCompose(LettuceTransport::translate);
    }

    private static CompletableFuture<Object> dispatch(RedisClusterAsyncCommands<String, String> c, RedisCall call,
            CommandArgs<String, String> args) {
        return c.dispatch(Keyword.of(call.command()), new ArrayOutput<>(CODEC), args).toCompletableFuture()
                .thenApply(LettuceTransport::normalize);
    }

    @SuppressWarnings("unchecked")
    private static RedisClusterAsyncCommands<String, String> asStrings(RedisClusterAsyncCommands<?, ?> c) {
        return (RedisClusterAsyncCommands<String, String>) c;
    }

    /**
     * For a keyless call with a route under Cluster, the commands of the
     * primary that serves the route's slot, once Lettuce has a connection to
     * it; null for every other call (the connection's own commands route it
     * by the key marked). Asynchronous on purpose: such calls (the module
     * check, the library's load on each primary) are often sent from a
     * completion stage that runs on a Lettuce event loop, and Lettuce's
     * blocking {@code getConnection(nodeId)} waited there for a node
     * connection the same loop had to establish — the application hung (a
     * Spring context's close waiting on it for ever).
     */
    private CompletableFuture<RedisClusterAsyncCommands<String, String>> nodeOfRoute(RedisCall call) {
        if (call.keyIndex() < 0 && call.route() != null && commands instanceof RedisAdvancedClusterAsyncCommands<?, ?> cluster) {
            RedisClusterNode node = cluster.getStatefulConnection().getPartitions().getPartitionBySlot(SlotHash.getSlot(call.route()));
            if (node != null) {
                return cluster.getStatefulConnection().getConnectionAsync(node.getNodeId())
                        .thenApply(connection -> asStrings(connection.async()));
            }
        }
        return null;
    }

    /**
     * Under Cluster, {@code host:port} of the primary that serves the key's
     * slot in Lettuce's view of the partitions (an array lookup); null for a
     * standalone connection or a slot no node serves yet.
     */
    @Override
    public String nodeOf(String key) {
        if (!(commands instanceof RedisAdvancedClusterAsyncCommands<?, ?> cluster)) {
            return null;
        }
        RedisClusterNode node = cluster.getStatefulConnection().getPartitions().getPartitionBySlot(SlotHash.getSlot(key));
        return node == null || node.getUri() == null ? null : node.getUri().getHost() + ":" + node.getUri().getPort();
    }

    /**
     * PINGs one Cluster node ({@link #nodeOf}'s {@code host:port}) on its own
     * connection, opened asynchronously; anything else: PING on the connection.
     */
    @Override
    @SuppressWarnings("unchecked")
    public CompletionStage<Object> ping(String node) {
        int colon = node == null ? -1 : node.lastIndexOf(':');
        if (colon < 0 || !(commands instanceof RedisAdvancedClusterAsyncCommands<?, ?> cluster)) {
            return execute(new RedisCall("PING", List.of(), -1));
        }
        String host = node.substring(0, colon);
        int port;
        try {
            port = Integer.parseInt(node.substring(colon + 1));
        } catch (NumberFormatException e) {
            return CompletableFuture.failedFuture(e);
        }
        try {
            return ((StatefulRedisClusterConnection<Object, Object>) cluster.getStatefulConnection()).getConnectionAsync(host, port)
                    .thenCompose(c -> c.async().ping().toCompletableFuture()).thenApply(pong -> (Object) pong);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * Whether Lettuce's connection (under Cluster: to that node, when it has
     * one open already) is connected; Lettuce queues commands while it
     * reconnects, so a stopped server shows as an overrun, not a refusal.
     */
    @Override
    @SuppressWarnings("unchecked")
    public boolean isConnected(String node) {
        if (commands instanceof RedisAdvancedClusterAsyncCommands<?, ?> cluster) {
            int colon = node == null ? -1 : node.lastIndexOf(':');
            if (colon < 0) {
                return cluster.getStatefulConnection().isOpen();
            }
            try {
                CompletableFuture<? extends StatefulRedisConnection<?, ?>> c = ((StatefulRedisClusterConnection<Object, Object>) cluster
                        .getStatefulConnection()).getConnectionAsync(node.substring(0, colon), Integer.parseInt(node.substring(colon + 1)));
                return !c.isDone() || c.isCompletedExceptionally() || c.join().isOpen();
            } catch (RuntimeException e) {
                return true;
            }
        }
        if (commands instanceof io.lettuce.core.api.async.RedisAsyncCommands<?, ?> standalone) {
            return standalone.getStatefulConnection().isOpen();
        }
        return true;
    }

    /** Under Cluster, a key in the first slot of each primary (Lettuce's view of the partitions). */
    @Override
    public List<String> primaryRoutes() {
        if (!(commands instanceof RedisAdvancedClusterAsyncCommands<?, ?> cluster)) {
            return List.of();
        }
        List<String> keys = new ArrayList<>();
        for (RedisClusterNode node : cluster.getStatefulConnection().getPartitions()) {
            if (node.is(RedisClusterNode.NodeFlag.UPSTREAM) && !node.getSlots().isEmpty()) {
                keys.add(keyInSlot(node.getSlots().get(0)));
            }
        }
        return keys;
    }

    /** A short key whose CRC16 slot is {@code slot} (found by counting; 16384 slots, so a few thousand tries). */
    private static String keyInSlot(int slot) {
        for (int i = 0; ; i++) {
            String key = "rl:" + i;
            if (SlotHash.getSlot(key) == slot) {
                return key;
            }
        }
    }

    @Override
    public void close() {
        if (owned != null) {
            try {
                owned.close();
            } catch (Exception e) {
                throw new RateLimitException("closing the Lettuce connection failed", e);
            }
        }
    }

    /**
     * ArrayOutput gives a list (possibly nested); a bare reply comes as a
     * one-element list. A list whose elements need no conversion (RL replies
     * are integers) is returned as it is: the output's fresh list, ours alone.
     */
    private static Object normalize(Object reply) {
        if (reply instanceof byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
        if (reply instanceof List<?> list) {
            List<Object> out = null;
            for (int i = 0; i < list.size(); i++) {
                Object item = list.get(i);
                Object n = normalize(item);
                if (out == null && n != item) {
                    out = new ArrayList<>(list);
                }
                if (out != null) {
                    out.set(i, n);
                }
            }
            return out != null ? out : list;
        }
        if (reply instanceof java.nio.ByteBuffer buffer) {
            return StandardCharsets.UTF_8.decode(buffer.duplicate()).toString();
        }
        return reply;
    }

    private static CompletionStage<Object> translate(Throwable failure) {
        Throwable cause = failure;
        while (cause instanceof CompletionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        if (cause instanceof RedisCommandExecutionException server) {
            return CompletableFuture.failedFuture(new RateLimitException(server.getMessage(), server));
        }
        return CompletableFuture.failedFuture(cause);
    }

    /** A command name Lettuce does not know (the module's). */
    private record Keyword(String name, byte[] bytes) implements ProtocolKeyword {
        // One per command name (a handful: RL.*, PING, HGETALL, ...), its bytes encoded once.
        private static final java.util.concurrent.ConcurrentMap<String, Keyword> KNOWN = new java.util.concurrent.ConcurrentHashMap<>();

        static Keyword of(String name) {
            Keyword k = KNOWN.get(name);
            if (k == null) {
                k = new Keyword(name, name.getBytes(StandardCharsets.US_ASCII));
                if (KNOWN.size() < 256) {
                    KNOWN.putIfAbsent(name, k);
                }
            }
            return k;
        }

        @Override
        public byte[] getBytes() {
            return bytes;
        }

        @Override
        public String toString() {
            return name;
        }
    }
}
