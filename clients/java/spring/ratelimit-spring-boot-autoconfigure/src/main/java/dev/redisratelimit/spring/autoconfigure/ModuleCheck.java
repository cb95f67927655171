package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.ModuleNotLoadedException;
import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.client.RedisAvailability;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.InitializingBean;

/**
 * At start-up, the client's module check ({@code COMMAND INFO RL.ALL}): the
 * module missing fails the start with one clear message; Redis unreachable
 * does not (the Redis-down policies apply and the probe takes over), since an
 * app may start before its Redis.
 */
final class ModuleCheck implements InitializingBean {

    private static final Logger log = LoggerFactory.getLogger(ModuleCheck.class);

    private final RateLimitAsyncClient client;
    private final RedisAvailability availability;

    ModuleCheck(RateLimitAsyncClient client, RedisAvailability availability) {
        this.client = client;
        this.availability = availability;
    }

    @Override
    public void afterPropertiesSet() {
        CompletableFuture<Void> f = client.verifyModule().toCompletableFuture();
        try {
            f.get(2, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof ModuleNotLoadedException missing) {
                throw missing;
            }
            log.warn("Redis did not answer at start-up ({}); rate limits start with their Redis-down policies", e.getCause().toString());
            availability.markDown(e.getCause());
        } catch (Exception e) {
            f.cancel(true);
            log.warn("Redis did not answer at start-up ({}); rate limits start with their Redis-down policies", e.toString());
            availability.markDown(e);
        }
    }
}
