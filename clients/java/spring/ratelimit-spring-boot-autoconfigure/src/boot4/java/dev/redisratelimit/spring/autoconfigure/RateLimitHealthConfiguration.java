package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.spring.actuate.RateLimitHealthIndicator;
import dev.redisratelimit.client.RedisAvailability;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The {@code ratelimit} health indicator, imported by
 * {@link RateLimitActuatorAutoConfiguration}: Spring Boot 4.0's health packages
 * ({@code src/boot3/java} holds the other line's twin of this file).
 */
@Configuration(proxyBeanMethods = false)
@ConditionalOnClass(name = {"org.springframework.boot.health.contributor.AbstractHealthIndicator",
        "org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator"})
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
