package dev.redisratelimit.spring.actuate;

import dev.redisratelimit.client.ModuleNotLoadedException;
import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.spring.core.RedisAvailability;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;

/**
 * {@code ratelimit} in /actuator/health: DOWN while the starter's circuit is
 * open (Redis unreachable: decisions follow the Redis-down policies), DOWN when
 * Redis answers but the module is not loaded (every decision would fail), UP
 * otherwise. One COMMAND INFO RL.ALL per check, waiting at most the decision budget.
 */
public class RateLimitHealthIndicator extends AbstractHealthIndicator {

    private final RateLimitAsyncClient client;
    private final RedisAvailability availability;
    private final Duration budget;

    public RateLimitHealthIndicator(RateLimitAsyncClient client, RedisAvailability availability, Duration budget) {
        super("rate-limit health check failed");
        this.client = client;
        this.availability = availability;
        this.budget = budget;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        if (availability.isDown()) {
            builder.down().withDetail("redis", "unreachable: decisions follow the Redis-down policies");
            return;
        }
        CompletableFuture<Void> f = client.verifyModule().toCompletableFuture();
        try {
            f.get(Math.max(1, budget.toMillis()), TimeUnit.MILLISECONDS);
            builder.up().withDetail("module", "loaded");
        } catch (ExecutionException e) {
            if (e.getCause() instanceof ModuleNotLoadedException) {
                builder.down().withDetail("module", "not loaded: " + e.getCause().getMessage());
            } else {
                builder.down().withDetail("redis", String.valueOf(e.getCause()));
            }
        } catch (TimeoutException e) {
            f.cancel(true);
            builder.down().withDetail("redis", "no answer within " + budget.toMillis() + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            builder.unknown();
        }
    }
}
