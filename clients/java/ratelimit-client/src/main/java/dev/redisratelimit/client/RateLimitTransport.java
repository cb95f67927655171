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

    /**
     * The node that serves {@code key}'s slot under Cluster (e.g.
     * {@code "10.0.0.5:6379"}), what the client keeps one circuit per
     * ({@link RedisAvailability}); null for one server, Sentinel, or a
     * transport that does not know the topology (one circuit for all).
     * Called on every decision: an in-memory lookup, never a round trip.
     */
    default String nodeOf(String key) {
        return null;
    }

    /**
     * PINGs {@code node} (a name from {@link #nodeOf}, or
     * {@link RedisAvailability#ANY_NODE}: any node): the probe of an open
     * circuit. The default sends one PING wherever the transport sends a
     * command without a key.
     */
    default CompletionStage<Object> ping(String node) {
        return execute(new RedisCall("PING", List.of(), -1));
    }

    /**
     * False when the driver itself says its connection to {@code node} is
     * down (reconnecting, commands queued): a budget overrun there is a
     * failure of that node, not a slow reply. True when connected or not known.
     */
    default boolean isConnected(String node) {
        return true;
    }

    /** Closes what the transport opened itself (never a connection it was given). */
    @Override
    default void close() {
    }
}
