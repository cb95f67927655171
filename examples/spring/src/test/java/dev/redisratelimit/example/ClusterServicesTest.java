package dev.redisratelimit.example;

import static dev.redisratelimit.example.Checks.concurrently;
import static dev.redisratelimit.example.Checks.count;
import static dev.redisratelimit.example.Checks.isProblem;
import static dev.redisratelimit.example.Checks.sms;
import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.RedisCluster;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The same services on a three-primary Redis Cluster (REDIS_CLUSTER): the
 * same answers, every key of a request in one slot, and no MOVED redirect.
 * The module decides; {@link FunctionsClusterServicesTest} runs the same
 * checks with the Functions library on primaries without the module.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ClusterServicesTest {

    RedisCluster cluster;
    App app;
    App other;

    /** What decides: the module ({@link FunctionsClusterServicesTest}: the library). */
    Backend backend() {
        return Backend.MODULE;
    }

    @BeforeAll
    void start() throws Exception {
        cluster = backend().withModule ? RedisCluster.start() : RedisCluster.startWithoutModule();
        app = App.cluster(cluster.seeds(), "cl:", backend().env);
        other = App.cluster(cluster.seeds(), "cl:", backend().env);
    }

    @AfterAll
    void stop() throws Exception {
        if (app != null) {
            app.close();
        }
        if (other != null) {
            other.close();
        }
        if (cluster != null) {
            cluster.close();
        }
    }

    java.net.http.HttpResponse<String> llm(dev.redisratelimit.spring.test.Http h, String key, String body, String... more) {
        return Checks.llm(h, backend().zone, key, body, more);
    }

    @Test
    void everyEndpointDecidesWithNoMovedRedirect() throws Exception {
        // the counter is live: a plain client sent to the wrong primary gets one MOVED
        long sanity = cluster.moved();
        for (int i = 0; i < 3 && cluster.moved() == sanity; i++) {
            cluster.nodes.get(i).cli("GET", "moved-probe");
        }
        assertThat(cluster.moved()).isEqualTo(sanity + 1);
        long movedBefore = cluster.moved();
        // endpoint 1: 2 per 10 s per phone, over many phones (many slots)
        for (int p = 0; p < 10; p++) {
            String phone = "555" + p;
            assertThat(sms(app.http, "{\"phone\":\"" + phone + "\"}").statusCode()).isEqualTo(200);
            assertThat(sms(other.http, "{\"phone\": \"" + phone + "\"}").statusCode()).isEqualTo(200);
            isProblem(sms(app.http, "{ \"phone\":\"" + phone + "\"}"), 429, "rate-limited");
        }
        // endpoint 2 and its runtime limits
        for (int u = 0; u < 5; u++) {
            for (int i = 0; i < 5; i++) {
                assertThat(app.http.post("/seed001/ocr", "{}", "X-User", "cu" + u).statusCode()).isEqualTo(200);
            }
            isProblem(other.http.post("/seed001/ocr", "{}", "X-User", "cu" + u), 429, "rate-limited");
        }
        assertThat(app.http.send("PUT", "/admin/limits/ocr", "{\"day\":20,\"hour\":6}").statusCode()).isEqualTo(204);
        Thread.sleep(1000);
        assertThat(other.http.get("/admin/limits/ocr").body()).isEqualTo("{\"day\":20,\"hour\":6}");
        assertThat(other.http.post("/seed001/ocr", "{}", "X-User", "cu0").statusCode()).isEqualTo(200);
        // endpoint 3: 20 concurrent clients, exactly 5
        List<java.net.http.HttpResponse<String>> rs = concurrently(20,
                i -> (i % 2 == 0 ? app : other).http.get("/seed002/api/custom", "X-Forwarded-For", "192.0.2.77"));
        assertThat(count(rs, 200)).isEqualTo(5);
        // endpoint 4
        for (int i = 0; i < 5; i++) {
            assertThat(app.http.post("/seed004/login", "{}", "X-Forwarded-For", "203.0.113.77").statusCode()).isEqualTo(200);
        }
        isProblem(other.http.post("/seed004/login", "{}", "X-Forwarded-For", "203.0.113.77"), 429, "locked");
        // endpoint 5: four limits (one of them global) in one RL.ALL per request, across many keys
        for (int k = 0; k < 10; k++) {
            assertThat(llm(app.http, "ck" + k, "{\"max_tokens\":10}", "X-Sleep-Ms", "0").statusCode()).isEqualTo(200);
        }
        List<java.net.http.HttpResponse<String>> inflight = concurrently(3,
                i -> llm(i % 2 == 0 ? app.http : other.http, "ck-in", "{\"max_tokens\":10}", "X-Sleep-Ms", "1200"));
        assertThat(count(inflight, 200)).isEqualTo(2);
        assertThat(count(inflight, 429)).isEqualTo(1);
        assertThat(cluster.moved() - movedBefore).isZero();
    }
}
