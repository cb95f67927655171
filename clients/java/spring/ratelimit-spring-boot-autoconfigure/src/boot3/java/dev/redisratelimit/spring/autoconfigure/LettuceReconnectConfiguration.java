package dev.redisratelimit.spring.autoconfigure;

import io.lettuce.core.resource.Delay;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.data.redis.ClientResourcesBuilderCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Lettuce's reconnect backoff capped at {@code ratelimit.max-reconnect-delay},
 * imported by {@link RateLimitAutoConfiguration}: Spring Boot 3.5's package of
 * ClientResourcesBuilderCustomizer ({@code src/boot4/java} holds the other line's twin of this file).
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass(name = {"io.lettuce.core.resource.Delay", "org.springframework.boot.autoconfigure.data.redis.ClientResourcesBuilderCustomizer"})
class LettuceReconnectConfiguration {

    // Lettuce's default reconnect backoff grows to 30 s: a Redis back after an outage would go unused that long.
    @Bean
    ClientResourcesBuilderCustomizer rateLimitReconnectDelay(RateLimitProperties p) {
        return builder -> {
            Duration max = p.getMaxReconnectDelay();
            if (max != null && !max.isZero()) {
                builder.reconnectDelay(Delay.exponential(Duration.ofMillis(10), max, 2, TimeUnit.MILLISECONDS));
            }
        };
    }
}
