package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.RedisServer;
import dev.redisratelimit.spring.test.SharedRedis;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import java.net.http.HttpResponse;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Micrometer meters per policy, the ratelimit Actuator endpoint (peeks at
 * COST 0) and health indicator, on TestApp with spring-boot-starter-actuator,
 * against real redis-server processes: a healthy one, one stopped mid-run, one
 * without the module.
 */
class MetricsAndActuatorTest {

    static final String PREFIX = "m" + UUID.randomUUID().toString().substring(0, 8) + ":";

    static ConfigurableApplicationContext start(String redisUrl, String... extra) {
        SpringApplicationBuilder b = new SpringApplicationBuilder(TestApp.class).properties(Map.of(
                "server.port", "0",
                "spring.data.redis.url", redisUrl,
                "ratelimit.prefix", PREFIX,
                "management.endpoints.web.exposure.include", "health,ratelimit",
                "management.endpoint.health.show-details", "always"));
        return b.properties(extra).run();
    }

    static Http http(ConfigurableApplicationContext app) {
        return new Http(app.getEnvironment().getRequiredProperty("local.server.port", Integer.class));
    }

    static double timerCount(MeterRegistry r, String policy, String outcome, String reason) {
        var t = r.find("ratelimit.decisions").tags("policy", policy, "outcome", outcome, "reason", reason).timer();
        return t == null ? 0 : t.count();
    }

    static double counter(MeterRegistry r, String name, String policy, String tag, String value) {
        var c = r.find(name).tags("policy", policy, tag, value).counter();
        return c == null ? 0 : c.count();
    }

    @Test
    void metersPerPolicyWithoutKeysAndTheEndpointPeeksWithoutCharging() throws Exception {
        try (ConfigurableApplicationContext app = start(SharedRedis.get().url())) {
            Http http = http(app);
            MeterRegistry registry = app.getBean(MeterRegistry.class);
            String k = "caller-" + UUID.randomUUID().toString().substring(0, 8);
            double admittedBefore = timerCount(registry, "two", "admitted", "none");
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(200);
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(200);
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(429);
            assertThat(timerCount(registry, "two", "admitted", "none") - admittedBefore).isEqualTo(2.0);
            assertThat(timerCount(registry, "two", "refused", "rate_limited")).isEqualTo(1.0);
            assertThat(registry.find("ratelimit.decisions").tags("policy", "two", "outcome", "refused").timer().totalTime(
                    java.util.concurrent.TimeUnit.NANOSECONDS)).isPositive();
            // no meter carries a caller's key: the tags are policy, outcome, reason, kind, mode
            for (Meter m : registry.getMeters()) {
                for (Tag t : m.getId().getTags()) {
                    assertThat(t.getValue()).as(m.getId().toString()).doesNotContain(k);
                }
            }

            // the endpoint: policies listed, a key's state read without charging anything
            HttpResponse<String> list = http.get("/actuator/ratelimit");
            assertThat(list.statusCode()).isEqualTo(200);
            assertThat(list.body()).contains("\"two\"").contains("\"name\":\"short\"").contains("\"count\":2");
            String zset = SharedRedis.get().cli("KEYS", PREFIX + "two:{" + k + "}:*");
            String before = SharedRedis.get().cli("ZCARD", zset);
            for (int i = 0; i < 3; i++) {
                HttpResponse<String> s = http.get("/actuator/ratelimit/two?key=" + k);
                assertThat(s.statusCode()).isEqualTo(200);
                assertThat(s.body()).contains("\"nextCallAdmitted\":false").contains("\"binding\":\"short\"")
                        .containsPattern("\"name\":\"short\",\"limit\":2,\"windowSeconds\":10,\"remaining\":0")
                        .containsPattern("\"name\":\"long\",\"limit\":5,\"windowSeconds\":3600,\"remaining\":3");
            }
            assertThat(SharedRedis.get().cli("ZCARD", zset)).isEqualTo(before).isEqualTo("2");
            // a lease and a quota peeked at COST 0: nothing taken
            String w = "w-" + UUID.randomUUID().toString().substring(0, 8);
            HttpResponse<String> work = http.get("/actuator/ratelimit/work?key=" + w);
            assertThat(work.body()).contains("\"nextCallAdmitted\":true").containsPattern("\"name\":\"inflight\",\"limit\":2,\"remaining\":2")
                    .containsPattern("\"name\":\"tokens\",\"limit\":1000,\"windowSeconds\":86400,\"remaining\":1000");
            assertThat(SharedRedis.get().cli("EXISTS", PREFIX + "work:{" + w + "}:inflight")).isEqualTo("0");
            assertThat(http.get("/actuator/ratelimit/nosuchpolicy?key=x").statusCode()).isEqualTo(404);

            HttpResponse<String> health = http.get("/actuator/health/ratelimit");
            assertThat(health.statusCode()).isEqualTo(200);
            assertThat(health.body()).contains("\"status\":\"UP\"").contains("\"module\":\"loaded\"").contains("\"backend\":\"module\"");
        }
    }

    @Test
    void redisDownCountsFallbacksAndErrorsAndTheHealthSaysDown() throws Exception {
        try (RedisServer redis = RedisServer.launch(); ConfigurableApplicationContext app = start(redis.url())) {
            Http http = http(app);
            MeterRegistry registry = app.getBean(MeterRegistry.class);
            assertThat(http.get("/default").statusCode()).isEqualTo(200);
            redis.stop();
            // /default fails open, /closed fails closed: both counted as fallbacks, with the error's kind
            for (int i = 0; i < 3; i++) {
                assertThat(http.get("/default").statusCode()).isEqualTo(200);
                assertThat(http.get("/closed").statusCode()).isEqualTo(503);
            }
            assertThat(counter(registry, "ratelimit.fallbacks", "default", "mode", "fail_open")).isEqualTo(3.0);
            assertThat(counter(registry, "ratelimit.fallbacks", "closed", "mode", "fail_closed")).isEqualTo(3.0);
            assertThat(timerCount(registry, "closed", "unavailable", "none")).isEqualTo(3.0);
            double errors = registry.find("ratelimit.errors").counters().stream().mapToDouble(c -> c.count()).sum();
            assertThat(errors).isEqualTo(6.0);
            assertThat(counter(registry, "ratelimit.errors", "default", "kind", "circuit_open")
                    + counter(registry, "ratelimit.errors", "closed", "kind", "circuit_open")).isGreaterThanOrEqualTo(4.0);

            HttpResponse<String> health = http.get("/actuator/health/ratelimit");
            assertThat(health.statusCode()).isEqualTo(503);
            assertThat(health.body()).contains("\"status\":\"DOWN\"").contains("unreachable");
        }
    }

    @Test
    void theFunctionsBackendDecidesOnAServerWithoutTheModuleAndSaysSo() throws Exception {
        // ratelimit.backend=functions: the library loaded at start-up, decisions as FCALL,
        // health and meters naming the backend; the library gone (a flush) is loaded again
        try (RedisServer bare = RedisServer.launchWithoutModule();
                ConfigurableApplicationContext app = start(bare.url(), "ratelimit.backend=functions")) {
            Http http = http(app);
            MeterRegistry registry = app.getBean(MeterRegistry.class);
            String k = "fn-" + UUID.randomUUID().toString().substring(0, 8);
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(200);
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(200);
            assertThat(http.get("/two", "X-Key", k).statusCode()).isEqualTo(429);
            assertThat(bare.cli("INFO", "commandstats")).contains("cmdstat_fcall:calls=");
            assertThat(registry.find("ratelimit.decisions").tags("policy", "two", "outcome", "admitted", "backend", "functions")
                    .timer().count()).isEqualTo(2L);
            HttpResponse<String> health = http.get("/actuator/health/ratelimit");
            assertThat(health.statusCode()).isEqualTo(200);
            assertThat(health.body()).contains("\"status\":\"UP\"").contains("\"backend\":\"functions\"").contains("\"library\":\"loaded\"");
            bare.cli("FUNCTION", "FLUSH");
            assertThat(http.get("/actuator/health/ratelimit").body()).contains("\"status\":\"DOWN\"").contains("Functions library is not loaded");
            assertThat(http.get("/one", "X-Key", k).statusCode()).isEqualTo(200); // loaded again, sent again
            assertThat(http.get("/actuator/health/ratelimit").statusCode()).isEqualTo(200);
        }
    }

    @Test
    void healthSaysDownWhenTheModuleIsMissing() throws Exception {
        try (RedisServer bare = RedisServer.launchWithoutModule();
                ConfigurableApplicationContext app = start(bare.url(), "ratelimit.verify-module=false")) {
            HttpResponse<String> health = http(app).get("/actuator/health/ratelimit");
            assertThat(health.statusCode()).isEqualTo(503);
            assertThat(health.body()).contains("\"status\":\"DOWN\"").contains("\"module\":\"not loaded");
        }
    }
}
