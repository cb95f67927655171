package dev.redisratelimit.spring;

import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/** A failures-only login lockout: 3 failed logins in 15 minutes lock the user out; good logins never count. */
@RestController
public class LoginController {

    @PostMapping("/failed-logins")
    @RateLimited(policy = "failed-logins", key = "#user", text = "3 per 15 minutes", counts = "failures")
    public ResponseEntity<Map<String, Object>> login(@RequestParam String user, @RequestParam String password) {
        if (!"right".equals(password)) {
            return ResponseEntity.status(401).body(Map.of("error", "bad password"));
        }
        return ResponseEntity.ok(Map.of("ok", true));
    }
}
