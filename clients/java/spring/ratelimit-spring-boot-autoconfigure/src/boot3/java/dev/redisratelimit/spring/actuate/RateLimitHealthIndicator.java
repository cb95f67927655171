package dev.redisratelimit.spring.actuate;

import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.client.RedisAvailability;
import java.time.Duration;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * {@code ratelimit} in /actuator/health: {@link RateLimitHealthCheck} in
 * Spring Boot 3.5's health API ({@code src/boot4/java} holds the other line's twin of this file).
 */
public class RateLimitHealthIndicator extends AbstractHealthIndicator {

    private final RateLimitHealthCheck check;

    public RateLimitHealthIndicator(RateLimitAsyncClient client, RedisAvailability availability, Duration budget) {
        super("rate-limit health check failed");
        this.check = new RateLimitHealthCheck(client, availability, budget);
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        RateLimitHealthCheck.Result result = check.run();
        switch (result.status()) {
            case UP -> builder.up();
            case DOWN -> builder.down();
            default -> builder.unknown();
        }
        if (result.detail() != null) {
            builder.withDetail(result.detail(), result.value());
        }
        if (result.backend() != null) {
            builder.withDetail("backend", result.backend());
        }
    }
}
