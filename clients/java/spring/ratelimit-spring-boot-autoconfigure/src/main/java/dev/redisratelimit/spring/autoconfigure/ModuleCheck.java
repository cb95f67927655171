package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.spring.core.RedisAvailability;
import dev.redisratelimit.spring.core.RedisTransport;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.InitializingBean;

/**
 * At start-up: {@code COMMAND INFO RL.ALL}. The module missing fails the
 * start with one clear message; Redis unreachable does not (the Redis-down
 * policies apply and the probe takes over), since an app may start first.
 */
final class ModuleCheck implements InitializingBean {

    private static final Logger log = LoggerFactory.getLogger(ModuleCheck.class);

    private final RedisTransport transport;
    private final RedisAvailability availability;

    ModuleCheck(RedisTransport transport, RedisAvailability availability) {
        this.transport = transport;
        this.availability = availability;
    }

    @Override
    public void afterPropertiesSet() {
        CompletableFuture<Object> f = transport.call("COMMAND", List.of("INFO", "RL.ALL"));
        Object reply;
        try {
            reply = f.get(2, TimeUnit.SECONDS);
        } catch (Exception e) {
            f.cancel(true);
            log.warn("Redis did not answer at start-up ({}); rate limits start with their Redis-down policies", e.toString());
            availability.markDown(e);
            return;
        }
        if (!(reply instanceof List<?> l) || l.isEmpty() || !(l.get(0) instanceof List<?>)) {
            throw new RateLimitModuleMissingException();
        }
    }

    /** The server answers but has no RL.ALL. */
    public static final class RateLimitModuleMissingException extends IllegalStateException {
        RateLimitModuleMissingException() {
            super("the redis-ratelimit module is not loaded on the configured Redis (COMMAND INFO RL.ALL is empty): "
                    + "start redis-server with --loadmodule /path/to/libredis_ratelimit.so");
        }
    }
}
