package dev.redisratelimit.springdata;

import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import java.util.List;
import java.util.concurrent.CompletionStage;

/** Spring Data's Lettuce driver: its native async commands, through {@link LettuceTransport}. Loaded only when Lettuce is present. */
final class LettuceDriver {

    private LettuceDriver() {
    }

    static boolean handles(Object nativeConnection) {
        return nativeConnection instanceof RedisClusterAsyncCommands<?, ?>;
    }

    static List<String> primaryRoutes(Object nativeConnection) {
        return LettuceTransport.of((RedisClusterAsyncCommands<?, ?>) nativeConnection).primaryRoutes();
    }

    static String nodeOf(Object nativeConnection, String key) {
        return LettuceTransport.of((RedisClusterAsyncCommands<?, ?>) nativeConnection).nodeOf(key);
    }

    static boolean isConnected(Object nativeConnection, String node) {
        return LettuceTransport.of((RedisClusterAsyncCommands<?, ?>) nativeConnection).isConnected(node);
    }

    static CompletionStage<Object> ping(Object nativeConnection, String node) {
        return LettuceTransport.of((RedisClusterAsyncCommands<?, ?>) nativeConnection).ping(node);
    }

    static List<CompletionStage<Object>> pipeline(Object nativeConnection, List<RedisCall> calls) {
        return LettuceTransport.of((RedisClusterAsyncCommands<?, ?>) nativeConnection).pipeline(calls);
    }
}
