package dev.redisratelimit.example.webflux;

import org.springframework.context.annotation.Configuration;
import org.springframework.http.codec.ServerCodecConfigurer;
import org.springframework.web.reactive.config.WebFluxConfigurer;

/** Endpoint 6's lines through {@link NdjsonLines} (custom codecs come before Jackson's). */
@Configuration
class Codecs implements WebFluxConfigurer {

    @Override
    public void configureHttpMessageCodecs(ServerCodecConfigurer configurer) {
        configurer.customCodecs().register(new NdjsonLines());
    }
}
