package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.RoutesContract;
import dev.redisratelimit.spring.test.SharedRedis;
import java.net.http.HttpResponse;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** ratelimit.routes on Spring MVC: {@link RoutesContract}, and what only MVC has (an async handler, a functional endpoint). */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ActiveProfiles("routes")
class RoutesHttpTest extends RoutesContract {

    static final String PREFIX = "r" + UUID.randomUUID().toString().substring(0, 8) + ":";

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) {
        r.add("spring.data.redis.url", () -> SharedRedis.get().url());
        r.add("ratelimit.prefix", () -> PREFIX);
    }

    @Override
    protected String prefix() {
        return PREFIX;
    }

    @Test
    void theLeaseIsHeldUntilAnAsyncHandlerCompletes() throws Exception {
        String k = key();
        CompletableFuture<HttpResponse<String>> slow = CompletableFuture.supplyAsync(() -> http().get("/r/async?sleepMs=700", "X-Key", k));
        long deadline = System.currentTimeMillis() + 2000;
        while (leaseRemaining(k) != 0 && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        assertThat(leaseRemaining(k)).isEqualTo(0); // in flight after the handler returned its Callable
        HttpResponse<String> second = http().get("/r/async", "X-Key", k);
        assertThat(second.statusCode()).isEqualTo(429);
        assertThat(second.headers().firstValue("Retry-After")).hasValue("1");
        assertThat(slow.get().statusCode()).isEqualTo(200);
        deadline = System.currentTimeMillis() + 1500;
        while (leaseRemaining(k) != 1 && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        assertThat(leaseRemaining(k)).isEqualTo(1);
        assertThat(http().get("/r/async", "X-Key", k).statusCode()).isEqualTo(200);
    }
}
