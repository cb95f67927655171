package dev.redisratelimit.spring;

import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/** A class-level policy: every endpoint of the class counts against one global limit. */
@RestController
@RateLimited(policy = "cls", by = KeyBy.GLOBAL, limits = @Limit(name = "c", count = 3, window = "30s"))
public class ClassLevelController {

    @GetMapping("/cls/a")
    public Map<String, Object> a() {
        return Map.of("ok", true);
    }

    @GetMapping("/cls/b")
    public Map<String, Object> b() {
        return Map.of("ok", true);
    }
}
