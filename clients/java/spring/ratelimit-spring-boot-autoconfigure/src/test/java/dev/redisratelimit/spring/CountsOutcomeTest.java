package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.SharedRedis;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;

/** @RateLimited(text = "3 per 15 minutes", counts = "failures"): a login lockout that counts failed logins only. */
class CountsOutcomeTest {

    @Test
    void onlyFailedLoginsCount() {
        String user = "ann-" + UUID.randomUUID().toString().substring(0, 8);
        try (ConfigurableApplicationContext app = MetricsAndActuatorTest.start(SharedRedis.get().url())) {
            Http http = MetricsAndActuatorTest.http(app);
            for (int i = 0; i < 5; i++) {
                assertThat(http.post("/failed-logins?user=" + user + "&password=right", null).statusCode()).isEqualTo(200);
            }
            List<Integer> failures = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                failures.add(http.post("/failed-logins?user=" + user + "&password=wrong", null).statusCode());
            }
            assertThat(failures).containsExactly(401, 401, 401, 429);
            var locked = http.post("/failed-logins?user=" + user + "&password=right", null);
            assertThat(locked.statusCode()).isEqualTo(429);
            assertThat(locked.headers().firstValue("RateLimit-Policy").orElse("")).contains("\"3-per-15m\";q=3;w=900");
        }
    }
}
