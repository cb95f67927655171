package dev.redisratelimit.example.webflux;

import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * Endpoint 3 (seed 002): the configured default per client IP (policy
 * {@code api-default} in application.yml, failing open while Redis is down),
 * a custom limit per IP and a limit per the path's user id — the same
 * policies as examples/spring's, returning a Mono (decided without blocking
 * the event loop).
 */
@RestController
@RequestMapping("/seed002/api")
public class Seed002Api {

    @GetMapping("/default")
    @RateLimited(policy = "api-default", legacyHeaders = true, onRedisDown = OnRedisDown.FAIL_OPEN)
    public Mono<Map<String, String>> byDefault() {
        return Mono.just(Map.of("message", "This endpoint uses default rate limiting"));
    }

    @GetMapping("/custom")
    @RateLimited(policy = "api-custom", legacyHeaders = true, limits = @Limit(name = "custom", count = 5, window = "30s"))
    public Mono<Map<String, String>> custom() {
        return Mono.just(Map.of("message", "This endpoint uses custom rate limiting"));
    }

    @GetMapping("/user/{userId}")
    @RateLimited(policy = "api-user", key = "#userId", legacyHeaders = true,
            limits = @Limit(name = "user", count = 3, window = "60s"))
    public Mono<Map<String, String>> user(@PathVariable String userId) {
        return Mono.just(Map.of("message", "This endpoint uses rate limiting per user ID"));
    }
}
