package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.LocalRateLimitTransport;
import dev.redisratelimit.client.RateLimitTransport;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * The local backend as the starter's transport, before {@link RateLimitAutoConfiguration}
 * (whose Redis transport then steps aside). Imported by {@link AutoConfigureLocalRateLimit}
 * only: never listed in the auto-configuration imports, so no application
 * decides locally by accident.
 */
@AutoConfiguration(before = RateLimitAutoConfiguration.class)
public class LocalRateLimitAutoConfiguration {

    /** On a {@link LocalRateLimitTransport.ManualClock} at 2026-01-01T00:00:00Z, moved by the test. */
    @Bean
    @ConditionalOnMissingBean(RateLimitTransport.class)
    public LocalRateLimitTransport rateLimitTransport() {
        return new LocalRateLimitTransport(new LocalRateLimitTransport.ManualClock());
    }
}
