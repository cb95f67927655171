package dev.redisratelimit.example;

import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.RateLimited;
import dev.redisratelimit.client.RuntimeLimits;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.PutMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * Seed 001: per user, a natural day and a natural hour in Asia/Shanghai
 * (policy {@code ocr} in application.yml), changed at run time on every
 * instance through the starter's RuntimeLimits.
 */
@RestController
public class Seed001Ocr {

    private final RuntimeLimits limits;

    public Seed001Ocr(RuntimeLimits limits) {
        this.limits = limits;
    }

    @PostMapping("/seed001/ocr")
    @RateLimited(policy = "ocr", by = KeyBy.USER)
    public Map<String, Object> ocr(@RequestHeader("X-User") String user) {
        return Map.of("ok", true);
    }

    /** {"day": D, "hour": H}, integers from 0: checked by Jackson (400) before anything is written. */
    public record OcrLimits(Object day, Object hour) {
        public OcrLimits {
            check("day", day);
            check("hour", hour);
        }

        private static void check(String name, Object v) {
            if (!(v instanceof Integer || v instanceof Long) || ((Number) v).longValue() < 0) {
                throw new IllegalArgumentException(name + " must be an integer of 0 or more");
            }
        }
    }

    @PutMapping("/admin/limits/ocr")
    public ResponseEntity<Void> set(@RequestBody OcrLimits body) {
        Map<String, Long> counts = new LinkedHashMap<>();
        counts.put("day", ((Number) body.day()).longValue());
        counts.put("hour", ((Number) body.hour()).longValue());
        limits.set("ocr", counts);
        return ResponseEntity.noContent().build();
    }

    @GetMapping("/admin/limits/ocr")
    public Map<String, Long> get() {
        return limits.get("ocr");
    }
}
