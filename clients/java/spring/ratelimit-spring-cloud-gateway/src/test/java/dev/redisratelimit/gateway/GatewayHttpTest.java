package dev.redisratelimit.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.RedisServer;
import dev.redisratelimit.gateway.test.StubBackend;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A gateway (routes in application.yml) in front of a stub backend, over
 * HTTP, on a real Redis with the module: SCG's RequestRateLimiter with this
 * RateLimiter (two policies in one call, the headers, SCG's bare 429), the
 * RateLimit filter (problem+json 429/401, a lease held until the routed
 * response ends), and Redis down last (503 within the budget, fail-open).
 */
@SpringBootTest(classes = GatewayTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class GatewayHttpTest {

    static RedisServer redis;
    static StubBackend backend;
    static final HttpClient http = HttpClient.newHttpClient();

    @DynamicPropertySource
    static void props(DynamicPropertyRegistry r) throws Exception {
        redis = RedisServer.launch();
        backend = new StubBackend();
        r.add("spring.data.redis.url", () -> redis.url());
        r.add("backend.uri", () -> backend.uri());
    }

    @AfterAll
    static void stop() throws Exception {
        redis.close();
        backend.close();
    }

    @LocalServerPort
    int port;

    HttpResponse<String> get(String path, String user) throws Exception {
        return http.send(request(path, user), HttpResponse.BodyHandlers.ofString());
    }

    HttpRequest request(String path, String user) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path));
        if (user != null) {
            b.header("X-User", user);
        }
        return b.build();
    }

    @Test
    @Order(1)
    void requestRateLimiterDecidesTwoPoliciesWithHeaders() throws Exception {
        int before = backend.hits.get();
        HttpResponse<String> first = get("/scg/hello", "scg-1");
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(first.body()).isEqualTo("hello");
        assertThat(first.headers().firstValue("RateLimit-Policy")).hasValue("\"short\";q=2;w=10, \"long\";q=5;w=3600");
        assertThat(first.headers().firstValue("RateLimit")).hasValueSatisfying(v -> assertThat(v).matches("\"short\";r=1;t=\\d+, \"long\";r=4;t=\\d+"));
        assertThat(get("/scg/hello", "scg-1").statusCode()).isEqualTo(200);
        HttpResponse<String> refused = get("/scg/hello", "scg-1");
        // SCG's filter answers its own status, bare: no problem body
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(refused.body()).isEmpty();
        assertThat(refused.headers().firstValue("RateLimit")).hasValueSatisfying(v -> assertThat(v).startsWith("\"short\";r=0;"));
        assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 10L);
        assertThat(backend.hits.get() - before).isEqualTo(2);
        // another caller has its own counts
        assertThat(get("/scg/hello", "scg-2").statusCode()).isEqualTo(200);
    }

    @Test
    @Order(2)
    void routePoliciesFromProperties() throws Exception {
        HttpResponse<String> r = get("/props/hello", "props-1");
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.headers().firstValue("RateLimit-Policy")).hasValue("\"short\";q=2;w=10");
    }

    @Test
    @Order(3)
    void rateLimitFilterAnswersProblemJson() throws Exception {
        int before = backend.hits.get();
        HttpResponse<String> first = get("/own/hello", "own-1");
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(first.headers().firstValue("RateLimit-Policy")).hasValue("\"short\";q=2;w=10, \"long\";q=5;w=3600");
        assertThat(get("/own/hello", "own-1").statusCode()).isEqualTo(200);
        HttpResponse<String> refused = get("/own/hello", "own-1");
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(refused.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
        assertThat(refused.body()).contains("https://redis-ratelimit.dev/problems/rate-limited").contains("\"status\":429")
                .contains("'short'");
        assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 10L);
        assertThat(backend.hits.get() - before).isEqualTo(2);
    }

    @Test
    @Order(4)
    void noKeyIsUnauthorized() throws Exception {
        HttpResponse<String> r = get("/own/hello", null);
        assertThat(r.statusCode()).isEqualTo(401);
        assertThat(r.body()).contains("/problems/unauthorized");
    }

    @Test
    @Order(5)
    void leaseHeldUntilTheRoutedResponseEnds() throws Exception {
        int before = backend.hits.get();
        CompletableFuture<HttpResponse<String>> slow = http.sendAsync(request("/inflight/slow?ms=1500", "lease-1"),
                HttpResponse.BodyHandlers.ofString());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (backend.hits.get() == before && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertThat(backend.hits.get()).isEqualTo(before + 1); // the first request is at the backend, its lease held
        HttpResponse<String> second = get("/inflight/hello", "lease-1");
        assertThat(second.statusCode()).isEqualTo(429);
        assertThat(second.headers().firstValue("Retry-After")).isPresent();
        assertThat(slow.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        // given back when the routed response ended
        assertThat(get("/inflight/hello", "lease-1").statusCode()).isEqualTo(200);
    }

    @Test
    @Order(99)
    void redisDownWithinTheBudget() throws Exception {
        assertThat(get("/closed/hello", "down-1").headers().firstValue("RateLimit")).isPresent();
        redis.stop();
        for (int i = 0; i < 3; i++) {
            long t0 = System.nanoTime();
            HttpResponse<String> closed = get("/closed/hello", "down-1");
            assertThat(closed.statusCode()).isEqualTo(503);
            assertThat(closed.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
            assertThat(closed.body()).contains("/problems/unavailable");
            HttpResponse<String> open = get("/open/hello", "down-1");
            assertThat(open.statusCode()).isEqualTo(200);
            assertThat(open.headers().firstValue("RateLimit")).isEmpty();
            // SCG's filter: the fail-closed default refuses with its one status
            assertThat(get("/scg/hello", "down-2").statusCode()).isEqualTo(429);
            assertThat((System.nanoTime() - t0) / 1_000_000).isLessThan(3000);
        }
    }
}
