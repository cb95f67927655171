package dev.redisratelimit.example.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** The example gateway's routes over HTTP; run against standalone Redis and a Cluster. */
abstract class GatewayRoutesChecks {

    static final HttpClient http = HttpClient.newHttpClient();

    abstract int port();

    abstract StubBackend backend();

    HttpResponse<String> get(String path, String key) throws Exception {
        return http.send(request(path, key), HttpResponse.BodyHandlers.ofString());
    }

    HttpRequest request(String path, String key) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port() + path));
        if (key != null) {
            b.header("X-Api-Key", key);
        }
        return b.build();
    }

    /** The api route: a burst of 5 (then one a minute), then 429 problem+json; every answer has both policies' headers. */
    void apiRouteBurstThenProblem() throws Exception {
        String key = "k-" + UUID.randomUUID();
        int before = backend().hits.get();
        for (int i = 0; i < 5; i++) {
            HttpResponse<String> r = get("/api/hello", key);
            assertThat(r.statusCode()).as("request %d", i + 1).isEqualTo(200);
            assertThat(r.headers().firstValue("RateLimit-Policy")).hasValue("\"burst\";q=10;w=600, \"inflight\";q=2, \"daily\";q=1000;w=86400");
        }
        HttpResponse<String> refused = get("/api/hello", key);
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(refused.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
        assertThat(refused.body()).contains("/problems/rate-limited").contains("'burst'");
        assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 60L);
        assertThat(backend().hits.get() - before).isEqualTo(5);
    }

    /** Two requests in flight hold the two leases; a third is refused until one's routed response ends. */
    void apiRouteLeasesUntilTheResponseEnds() throws Exception {
        String key = "k-" + UUID.randomUUID();
        int before = backend().hits.get();
        CompletableFuture<HttpResponse<String>> a = http.sendAsync(request("/api/slow?ms=1500", key), HttpResponse.BodyHandlers.ofString());
        CompletableFuture<HttpResponse<String>> b = http.sendAsync(request("/api/slow?ms=1500", key), HttpResponse.BodyHandlers.ofString());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (backend().hits.get() < before + 2 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        HttpResponse<String> third = get("/api/hello", key);
        assertThat(third.statusCode()).isEqualTo(429);
        assertThat(third.body()).contains("'inflight'");
        assertThat(a.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        assertThat(b.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        assertThat(get("/api/hello", key).statusCode()).isEqualTo(200);
    }

    /** SCG's RequestRateLimiter with redis-ratelimit's policies: the same headers, SCG's bare 429. */
    void scgRouteHeadersAndBare429() throws Exception {
        String key = "k-" + UUID.randomUUID();
        for (int i = 0; i < 5; i++) {
            HttpResponse<String> r = get("/scg/hello", key);
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("RateLimit")).hasValueSatisfying(v -> assertThat(v).startsWith("\"burst\";r="));
        }
        HttpResponse<String> refused = get("/scg/hello", key);
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(refused.body()).isEmpty();
        assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 60L);
    }

    /** No X-Api-Key: 401 problem+json from the RateLimit filter. */
    void noKey() throws Exception {
        HttpResponse<String> r = get("/api/hello", null);
        assertThat(r.statusCode()).isEqualTo(401);
        assertThat(r.body()).contains("/problems/unauthorized");
    }
}
