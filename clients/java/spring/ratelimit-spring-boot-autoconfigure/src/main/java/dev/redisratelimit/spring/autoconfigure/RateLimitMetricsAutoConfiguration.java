package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.BackendTransport;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RateLimiter;
import java.util.function.Supplier;
import dev.redisratelimit.spring.metrics.MicrometerDecisionObserver;
import io.micrometer.core.instrument.MeterRegistry;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.context.annotation.Bean;

/**
 * Micrometer meters per policy ({@link MicrometerDecisionObserver}) when the
 * app has Micrometer and a MeterRegistry (spring-boot-starter-actuator brings
 * both); {@code management.metrics.enable.ratelimit=false} (a Boot meter filter) turns them off.
 */
// after Boot's meter registry: Boot 4's spring-boot-micrometer-metrics names first, then Boot 3.5's
@AutoConfiguration(after = RateLimitAutoConfiguration.class,
        afterName = {"org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration",
                "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration",
                "org.springframework.boot.actuate.autoconfigure.metrics.CompositeMeterRegistryAutoConfiguration",
                "org.springframework.boot.actuate.autoconfigure.metrics.MetricsAutoConfiguration"})
@ConditionalOnClass(MeterRegistry.class)
@ConditionalOnBean({MeterRegistry.class, RateLimiter.class})
public class RateLimitMetricsAutoConfiguration {

    // Attached once every singleton exists, so a user's own RateLimiter bean is instrumented too.
    @Bean
    SmartInitializingSingleton rateLimitMeters(ObjectProvider<MeterRegistry> registry, ObjectProvider<RateLimiter> limiter,
            ObjectProvider<RateLimitTransport> transport) {
        // the tag "backend": the engine deciding now (ratelimit.backend)
        Supplier<String> backend = () -> transport.getIfAvailable() instanceof BackendTransport b ? b.backend().toString() : "module";
        return () -> limiter.ifAvailable(l -> l.setObserver(new MicrometerDecisionObserver(registry.getObject(), backend)));
    }
}
