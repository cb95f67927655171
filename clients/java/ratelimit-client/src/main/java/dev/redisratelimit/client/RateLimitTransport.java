package dev.redisratelimit.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;

/**
 * How the client reaches Redis. Implementations: {@code LettuceTransport}
 * (module ratelimit-lettuce) and {@code SpringDataTransport} (module
 * ratelimit-spring-data); a test or another driver can bring its own.
 *
 * <p>Contract: {@link #execute} sends one command to the node that serves its
 * routing key (under Cluster) and completes with the raw reply, normalised to
 * {@code Long} (integers), {@code String} (bulk and simple strings, UTF-8),
 * {@code List<Object>} (arrays, nested) or {@code null}; an error reply
 * completes it exceptionally with a {@link RateLimitException} whose message
 * is the server's text unchanged. Connection failures and timeouts complete
 * it with the driver's own exception.
 */
public interface RateLimitTransport extends AutoCloseable {

    CompletionStage<Object> execute(RedisCall call);

    /**
     * Sends independent commands back to back without waiting for each reply
     * (one round trip where the driver allows it); the replies in order.
     */
    default List<CompletionStage<Object>> pipeline(List<RedisCall> calls) {
        List<CompletionStage<Object>> replies = new ArrayList<>(calls.size());
        for (RedisCall call : calls) {
            replies.add(execute(call));
        }
        return replies;
    }

    /**
     * Under Cluster, one key per primary, each served by that primary (for
     * {@link RedisCall#onNodeOf}: what must run on every primary, such as
     * loading the Functions library). Empty: one server, or a transport that
     * does not know the topology (then such a command reaches one node, and
     * the others as their calls need it).
     */
    default List<String> primaryRoutes() {
        return List.of();
    }

    /** Closes what the transport opened itself (never a connection it was given). */
    @Override
    default void close() {
    }
}
