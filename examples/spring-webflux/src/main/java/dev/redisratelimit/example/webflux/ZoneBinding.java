package dev.redisratelimit.example.webflux;

import dev.redisratelimit.client.Backend;
import dev.redisratelimit.client.BackendTransport;
import dev.redisratelimit.client.FunctionsLibrary;
import dev.redisratelimit.client.RateLimitTransport;
import org.springframework.context.annotation.Configuration;
import org.springframework.format.FormatterRegistry;
import org.springframework.web.reactive.config.WebFluxConfigurer;

/**
 * Binds the X-Zone header to {@link LlmComplete.IanaZone}. With
 * RL_BACKEND=functions the Functions library decides, and it takes only
 * zones with one offset all year: a zone with daylight saving is a 400 that
 * says so, before any Redis call, like any other bad zone (as examples/spring).
 */
@Configuration
class ZoneBinding implements WebFluxConfigurer {

    private final RateLimitTransport transport;

    ZoneBinding(RateLimitTransport transport) {
        this.transport = transport;
    }

    @Override
    public void addFormatters(FormatterRegistry registry) {
        registry.addConverter(String.class, LlmComplete.IanaZone.class, id -> {
            LlmComplete.IanaZone zone = new LlmComplete.IanaZone(id);
            if (transport instanceof BackendTransport b && b.backend() == Backend.FUNCTIONS) {
                FunctionsLibrary.zone(id); // IllegalArgumentException naming daylight saving
            }
            return zone;
        });
    }
}
