package dev.redisratelimit.spring.core;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.output.NestedMultiOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.CompletionException;
import java.util.function.Supplier;

/**
 * Sends RL commands over the app's own Spring Data Redis connection (the
 * shared native Lettuce connection of its {@code LettuceConnectionFactory}),
 * so {@code spring.data.redis.*} — host, password, TLS, Cluster nodes —
 * configures it. Under Cluster, Lettuce routes each command by its first key
 * ({@link CommandArgs#addKey}), so there is no MOVED redirect.
 */
public final class LettuceTransport implements RedisTransport {

    private final Supplier<RedisClusterAsyncCommands<byte[], byte[]>> connect;
    private volatile RedisClusterAsyncCommands<byte[], byte[]> commands;
    private final ConcurrentHashMap<String, ProtocolKeyword> keywords = new ConcurrentHashMap<>();

    public LettuceTransport(Supplier<RedisClusterAsyncCommands<byte[], byte[]>> connect) {
        this.connect = connect;
    }

    @Override
    public CompletableFuture<Object> call(String command, List<Object> args) {
        RedisClusterAsyncCommands<byte[], byte[]> c;
        try {
            c = commands();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
        CommandArgs<byte[], byte[]> a = new CommandArgs<>(ByteArrayCodec.INSTANCE);
        for (Object arg : args) {
            if (arg instanceof Key k) {
                a.addKey(k.name().getBytes(StandardCharsets.UTF_8));
            } else {
                a.add(String.valueOf(arg));
            }
        }
        ProtocolKeyword kw = keywords.computeIfAbsent(command, LettuceTransport::keyword);
        @SuppressWarnings({"unchecked", "rawtypes"})
        CompletableFuture<Object> f = (CompletableFuture) c.dispatch(kw, new NestedMultiOutput<>(ByteArrayCodec.INSTANCE), a)
                .toCompletableFuture();
        return f.thenApply(LettuceTransport::unwrap);
    }

    private RedisClusterAsyncCommands<byte[], byte[]> commands() {
        RedisClusterAsyncCommands<byte[], byte[]> c = commands;
        if (c == null) {
            synchronized (this) {
                c = commands;
                if (c == null) {
                    c = connect.get();
                    commands = c;
                }
            }
        }
        return c;
    }

    // NestedMultiOutput wraps every reply in a list; a single value comes back alone.
    private static Object unwrap(Object reply) {
        if (reply instanceof List<?> l && l.size() == 1 && !(l.get(0) instanceof List<?>)) {
            Object v = l.get(0);
            if (v instanceof Throwable t) {
                throw new CompletionException(t);
            }
        }
        return reply;
    }

    @Override
    public boolean isUnavailable(Throwable failure) {
        Throwable t = failure;
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return !(t instanceof RedisCommandExecutionException);
    }

    private static ProtocolKeyword keyword(String name) {
        byte[] bytes = name.getBytes(StandardCharsets.US_ASCII);
        return new ProtocolKeyword() {
            @Override
            public byte[] getBytes() {
                return bytes;
            }

            @Override
            public String name() {
                return name;
            }

            @Override
            public String toString() {
                return name;
            }
        };
    }
}
