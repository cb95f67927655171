package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.spring.actuate.RateLimitHealthIndicator;
import dev.redisratelimit.client.RedisAvailability;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The {@code ratelimit} health indicator, imported by
 * {@link RateLimitActuatorAutoConfiguration}: Spring Boot 3.5's health packages
 * ({@code src/boot4/java} holds the other line's twin of this file).
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass(name = {"org.springframework.boot.actuate.health.AbstractHealthIndicator",
        "org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator"})
class RateLimitHealthConfiguration {

    // named so the health contributor is "ratelimit"
    @Bean(name = "ratelimitHealthIndicator")
    @ConditionalOnMissingBean(name = "ratelimitHealthIndicator")
    @ConditionalOnEnabledHealthIndicator("ratelimit")
    RateLimitHealthIndicator rateLimitHealthIndicator(RateLimitAsyncClient client, RedisAvailability availability,
            RateLimitProperties p) {
        return new RateLimitHealthIndicator(client, availability, p.getDecisionBudget());
    }
}
