package dev.redisratelimit.webflux;

import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/** The MVC test app's class-level policy on WebFlux: every endpoint of the class counts against one global limit. */
@RestController
@RateLimited(policy = "cls", by = KeyBy.GLOBAL, limits = @Limit(name = "c", count = 3, window = "30s"))
public class ReactiveClassLevelController {

    @GetMapping("/cls/a")
    public Mono<Map<String, Object>> a() {
        return Mono.just(Map.of("ok", true));
    }

    @GetMapping("/cls/b")
    public Mono<Map<String, Object>> b() {
        return Mono.just(Map.of("ok", true));
    }
}
