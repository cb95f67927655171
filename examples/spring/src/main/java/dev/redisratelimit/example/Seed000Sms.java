package dev.redisratelimit.example;

import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** Seed 000: two sliding windows per phone plus duplicate-submission prevention, one atomic decision. */
@RestController
public class Seed000Sms {

    /**
     * {"phone": "<1-20 digits>"}; anything else is refused while Jackson binds it, before any Redis call
     * (400). Object, not String: Jackson would turn {"phone": 123} into "123" (the other apps refuse it).
     */
    public record Sms(Object phone) {
        public Sms {
            if (!(phone instanceof String s) || !s.matches("[0-9]{1,20}")) {
                throw new IllegalArgumentException("phone must be 1 to 20 digits");
            }
        }
    }

    @PostMapping("/seed000/sms")
    @RateLimited(policy = "sms", key = "#sms.phone()", preventDuplicate = "5s", limits = {
            @Limit(name = "short", count = 2, window = "10s"),
            @Limit(name = "long", count = 5, window = "3600s")})
    public Map<String, Object> send(@RequestBody Sms sms) {
        return Map.of("sent", true);
    }
}
