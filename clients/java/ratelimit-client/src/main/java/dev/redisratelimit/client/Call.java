package dev.redisratelimit.client;

import java.util.function.Function;

/**
 * A validated RL command and how to read its reply: built by {@link Calls},
 * sent by {@link RateLimitClient#execute} / {@link RateLimitClient#pipeline}
 * (or the async client's), so several independent decisions can share one
 * round trip.
 */
public record Call<T>(RedisCall command, Function<Object, T> reader) {

    public T read(Object reply) {
        return reader.apply(reply);
    }
}
