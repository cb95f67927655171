package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.SharedRedis;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The ratelimit endpoint's writes (reset, penalty, reward) for the operator who must unlock a customer: absent
 * while Actuator's access for the endpoint is read-only (its default), there once
 * {@code management.endpoint.ratelimit.access=unrestricted}.
 */
class ActuatorWritesTest {

    @Test
    void writesOnlyWhereActuatorAllowsThem() throws Exception {
        String k = "op-" + UUID.randomUUID().toString().substring(0, 8);
        try (ConfigurableApplicationContext app = MetricsAndActuatorTest.start(SharedRedis.get().url())) {
            Http http = MetricsAndActuatorTest.http(app);
            for (int i = 0; i < 2; i++) {
                assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(200);
            }
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(429);
            assertThat(http.send("DELETE", "/actuator/ratelimit/two?key=" + k, null).statusCode()).isNotEqualTo(200);
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(429); // still locked: nothing reset
        }
        try (ConfigurableApplicationContext app = MetricsAndActuatorTest.start(SharedRedis.get().url(),
                "management.endpoint.ratelimit.access=unrestricted")) {
            Http http = MetricsAndActuatorTest.http(app);
            var reset = http.send("DELETE", "/actuator/ratelimit/two?key=" + k, null);
            assertThat(reset.statusCode()).isEqualTo(200);
            assertThat(reset.body()).contains("\"deletedKeys\":1");
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(200); // unlocked
            var penalty = http.post("/actuator/ratelimit/two", "{\"key\":\"" + k + "\",\"action\":\"penalty\",\"units\":1}");
            assertThat(penalty.statusCode()).isEqualTo(200);
            assertThat(penalty.body()).containsPattern("\"name\":\"short\",\"limit\":2,\"windowSeconds\":10,\"remaining\":0");
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(429);
            var reward = http.post("/actuator/ratelimit/two", "{\"key\":\"" + k + "\",\"action\":\"reward\",\"units\":1}");
            assertThat(reward.body()).containsPattern("\"name\":\"short\",\"limit\":2,\"windowSeconds\":10,\"remaining\":1");
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(200);
        }
    }
}
