package dev.redisratelimit.example;

import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;

/** Seed 004: per (client IP, path), 5 calls in a 10 s window, then locked out for 30 s. */
@RestController
public class Seed004Login {

    @PostMapping("/seed004/login")
    @RateLimited(policy = "login", by = KeyBy.IP_AND_PATH,
            limits = @Limit(name = "login", type = LimitType.LOCKOUT, count = 5, window = "10s", lockTime = "30s"))
    public Map<String, Object> login() {
        return Map.of("ok", true);
    }
}
