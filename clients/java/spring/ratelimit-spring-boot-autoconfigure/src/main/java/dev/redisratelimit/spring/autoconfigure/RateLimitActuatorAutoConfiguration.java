package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.spring.actuate.RateLimitEndpoint;
import dev.redisratelimit.spring.actuate.RateLimitHealthIndicator;
import dev.redisratelimit.spring.core.RateLimiter;
import dev.redisratelimit.spring.core.RedisAvailability;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * With spring-boot-starter-actuator: the {@code ratelimit} endpoint (policies,
 * and a policy's state for a key through the peeks) and the {@code ratelimit}
 * health indicator (Redis down, module missing). Each is the usual conditional
 * bean: replaceable, and off with {@code management.endpoint.ratelimit.access=none}
 * / {@code management.health.ratelimit.enabled=false}.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnBean(RateLimiter.class)
public class RateLimitActuatorAutoConfiguration {

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = {"org.springframework.boot.actuate.endpoint.annotation.Endpoint",
            "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint"})
    static class Endpoint {
        @Bean
        @ConditionalOnMissingBean
        @ConditionalOnAvailableEndpoint(RateLimitEndpoint.class)
        RateLimitEndpoint rateLimitEndpoint(RateLimiter limiter) {
            return new RateLimitEndpoint(limiter);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = {"org.springframework.boot.health.contributor.AbstractHealthIndicator",
            "org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator"})
    static class Health {
        // named so the health contributor is "ratelimit"
        @Bean(name = "ratelimitHealthIndicator")
        @ConditionalOnMissingBean(name = "ratelimitHealthIndicator")
        @ConditionalOnEnabledHealthIndicator("ratelimit")
        RateLimitHealthIndicator rateLimitHealthIndicator(RateLimitAsyncClient client, RedisAvailability availability,
                RateLimitProperties p) {
            return new RateLimitHealthIndicator(client, availability, p.getDecisionBudget());
        }
    }
}
