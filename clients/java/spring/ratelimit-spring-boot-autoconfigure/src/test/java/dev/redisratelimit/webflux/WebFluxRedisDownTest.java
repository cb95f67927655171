package dev.redisratelimit.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.RedisServer;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Redis frozen (accepts, never answers: the budget's timeout) then stopped
 * under a running WebFlux app: fail-closed answers 503 problem+json,
 * fail-open lets the call through without headers, each within the budget's
 * reach; Redis used again once it answers.
 */
@SpringBootTest(classes = ReactiveTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.main.web-application-type=reactive", "ratelimit.prefix=wfdown:", "ratelimit.decision-budget=300ms"})
class WebFluxRedisDownTest {

    static RedisServer redis;

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) throws Exception {
        redis = RedisServer.launch();
        r.add("spring.data.redis.url", () -> redis.url());
    }

    @AfterAll
    static void stop() throws Exception {
        redis.close();
    }

    @LocalServerPort
    int port;

    void answersWithinTheBudget() {
        Http http = new Http(port);
        for (int i = 0; i < 3; i++) {
            long t0 = System.nanoTime();
            HttpResponse<String> closed = http.get("/closed", "X-Key", "k");
            long closedMs = (System.nanoTime() - t0) / 1_000_000;
            assertThat(closed.statusCode()).isEqualTo(503);
            assertThat(closed.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
            assertThat(closed.body()).contains("/problems/unavailable").contains("\"status\":503");
            assertThat(closedMs).isLessThan(1000);
            t0 = System.nanoTime();
            HttpResponse<String> open = http.get("/open", "X-Key", "k");
            long openMs = (System.nanoTime() - t0) / 1_000_000;
            assertThat(open.statusCode()).isEqualTo(200);
            assertThat(open.headers().firstValue("RateLimit")).isEmpty();
            assertThat(openMs).isLessThan(1000);
        }
    }

    @Test
    void frozenThenStoppedThenBack() throws Exception {
        Http http = new Http(port);
        assertThat(http.get("/closed", "X-Key", "k").headers().firstValue("RateLimit")).isPresent();
        redis.pause();
        try {
            answersWithinTheBudget();
        } finally {
            redis.resume();
        }
        redis.stop();
        answersWithinTheBudget();
        redis.start();
        long t0 = System.nanoTime();
        boolean back = false;
        while (!back && (System.nanoTime() - t0) / 1_000_000 < 5000) {
            HttpResponse<String> r = http.get("/closed", "X-Key", "k");
            back = r.statusCode() == 200 && r.headers().firstValue("RateLimit").isPresent();
            Thread.sleep(50);
        }
        assertThat(back).isTrue();
    }
}
