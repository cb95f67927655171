package dev.redisratelimit.spring;

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
 * Redis stopped, frozen and restarted under a running app: every answer
 * within the budget's reach (under 1 s), fail-open, fail-closed and local
 * policies as configured, and Redis used again within 2 s of answering.
 */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "ratelimit.prefix=down:")
class RedisDownTest {

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

    record Timed(HttpResponse<String> response, long ms) {
    }

    Timed timed(String path) {
        long t0 = System.nanoTime();
        HttpResponse<String> r = new Http(port).get(path, "X-Forwarded-For", "198.51.100.7");
        return new Timed(r, (System.nanoTime() - t0) / 1_000_000);
    }

    @Test
    void downThenBack() throws Exception {
        Timed first = timed("/closed");
        assertThat(first.response().statusCode()).isEqualTo(200);
        assertThat(first.response().headers().firstValue("RateLimit")).isPresent();

        redis.stop();
        for (int i = 0; i < 5; i++) {
            Timed closed = timed("/closed");
            assertThat(closed.response().statusCode()).isEqualTo(503);
            assertThat(closed.response().body()).contains("/problems/unavailable").contains("\"status\":503");
            assertThat(closed.ms()).isLessThan(1000);
            Timed open = timed("/default");
            assertThat(open.response().statusCode()).isEqualTo(200);
            assertThat(open.response().headers().firstValue("RateLimit")).isEmpty();
            assertThat(open.ms()).isLessThan(1000);
        }
        int localOk = 0;
        for (int i = 0; i < 5; i++) {
            Timed local = timed("/local");
            assertThat(local.ms()).isLessThan(1000);
            localOk += local.response().statusCode() == 200 ? 1 : 0;
        }
        assertThat(localOk).isEqualTo(3); // the local stand-in holds the same limit on this instance

        redis.start();
        long back = System.nanoTime();
        long usedAfterMs = -1;
        while ((System.nanoTime() - back) / 1_000_000 < 5000) {
            Timed t = timed("/closed");
            if (t.response().statusCode() == 200 && t.response().headers().firstValue("RateLimit").isPresent()) {
                usedAfterMs = (System.nanoTime() - back) / 1_000_000;
                break;
            }
            Thread.sleep(50);
        }
        System.out.println("Redis used again " + usedAfterMs + " ms after it listened again");
        assertThat(usedAfterMs).isBetween(0L, 2000L);

        // accepted and never answered (a frozen server): still answered within 1 s
        redis.pause();
        try {
            for (int i = 0; i < 3; i++) {
                Timed closed = timed("/closed");
                assertThat(closed.response().statusCode()).isEqualTo(503);
                assertThat(closed.ms()).isLessThan(1000);
            }
        } finally {
            redis.resume();
        }
        long resumed = System.nanoTime();
        long usedAgain = -1;
        while ((System.nanoTime() - resumed) / 1_000_000 < 5000) {
            Timed t = timed("/default");
            if (t.response().headers().firstValue("RateLimit").isPresent()) {
                usedAgain = (System.nanoTime() - resumed) / 1_000_000;
                break;
            }
            Thread.sleep(50);
        }
        System.out.println("Redis used again " + usedAgain + " ms after it was resumed");
        assertThat(usedAgain).isBetween(0L, 2000L);
    }
}
