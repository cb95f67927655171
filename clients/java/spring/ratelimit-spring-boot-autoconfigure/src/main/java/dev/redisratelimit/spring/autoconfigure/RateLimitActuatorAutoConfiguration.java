package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.spring.actuate.RateLimitEndpoint;
import dev.redisratelimit.client.RateLimiter;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;

/**
 * With spring-boot-starter-actuator: the {@code ratelimit} endpoint (policies,
 * and a policy's state for a key through the peeks) and the {@code ratelimit}
 * health indicator (Redis down, module missing). Each is the usual conditional
 * bean: replaceable, and off with {@code management.endpoint.ratelimit.access=none}
 * / {@code management.health.ratelimit.enabled=false}.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnBean(RateLimiter.class)
// the health indicator is per Boot line (src/boot4/java, src/boot3/java): its package moved in Boot 4
@Import(RateLimitHealthConfiguration.class)
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
}
