package dev.redisratelimit.spring.core;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * How the starter sends one command: asynchronously, so a decision can stop
 * waiting at its budget. Arguments are {@link Key}s (routed under Cluster) or
 * plain values written as strings. Replies: Long, byte[], List, or null; a
 * server error completes the future with the driver's exception.
 *
 * <p>Kept to this one method so the Java client's transport can stand in for
 * it (a bean of this type replaces the default).
 */
public interface RedisTransport {

    CompletableFuture<Object> call(String command, List<Object> args);

    /** A key argument (a String); the first one routes the command under Cluster. */
    record Key(String name) {
    }

    /** True when the failure is Redis unreachable or slow, not an error reply. */
    boolean isUnavailable(Throwable failure);
}
