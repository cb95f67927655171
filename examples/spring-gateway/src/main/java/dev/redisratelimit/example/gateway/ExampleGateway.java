package dev.redisratelimit.example.gateway;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.context.annotation.Bean;
import reactor.core.publisher.Mono;

/**
 * A gateway in front of BACKEND_URI (application.yml): callers are counted
 * by their X-Api-Key header; a request without one is answered 401 by the
 * RateLimit filter (403 by SCG's RequestRateLimiter, its own rule).
 */
@SpringBootApplication
public class ExampleGateway {

    public static void main(String[] args) {
        SpringApplication.run(ExampleGateway.class, args);
    }

    @Bean
    KeyResolver apiKeyResolver() {
        return exchange -> Mono.justOrEmpty(exchange.getRequest().getHeaders().getFirst("X-Api-Key"));
    }
}
