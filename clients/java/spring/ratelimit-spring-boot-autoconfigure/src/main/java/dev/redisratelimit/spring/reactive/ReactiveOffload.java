package dev.redisratelimit.spring.reactive;

import dev.redisratelimit.client.BackendTransport;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.springdata.SpringDataTransport;

/**
 * Whether the transport blocks the thread that sends (Spring Data Redis's
 * Jedis driver does; Lettuce's is asynchronous on Netty): if it does, the
 * WebFlux adapter sends decisions and releases from Reactor's
 * {@code boundedElastic} scheduler, never from an event loop.
 */
public record ReactiveOffload(boolean blocking) {

    private static final String JEDIS_FACTORY = "org.springframework.data.redis.connection.jedis.JedisConnectionFactory";

    /** Blocking when the transport is Spring Data Redis's over a JedisConnectionFactory; other transports are taken as asynchronous. */
    public static ReactiveOffload of(RateLimitTransport transport) {
        if (transport instanceof BackendTransport b) {
            transport = b.delegate(); // the backend setting changes what is sent, not how
        }
        if (transport instanceof SpringDataTransport s) {
            for (Class<?> c = s.factory().getClass(); c != null; c = c.getSuperclass()) {
                if (c.getName().equals(JEDIS_FACTORY)) {
                    return new ReactiveOffload(true);
                }
            }
        }
        return new ReactiveOffload(false);
    }
}
