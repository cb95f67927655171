package dev.redisratelimit.example;

import static dev.redisratelimit.example.Checks.concurrently;
import static dev.redisratelimit.example.Checks.count;
import static dev.redisratelimit.example.Checks.isProblem;
import static dev.redisratelimit.example.Checks.sms;
import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.RedisCluster;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * ClusterServicesTest's checks with RL_BACKEND=functions on three primaries
 * without the module: the library loaded on every primary at start-up, the
 * same answers, no MOVED redirect (endpoint 5 in a zone of one offset: the
 * library takes no zone with daylight saving).
 */
class FunctionsClusterServicesTest {

    static RedisCluster cluster;
    static App app;
    static App other;

    @BeforeAll
    static void start() throws Exception {
        cluster = RedisCluster.startWithoutModule();
        app = App.cluster(cluster.seeds(), "fcl:", "functions");
        other = App.cluster(cluster.seeds(), "fcl:", "functions");
    }

    @AfterAll
    static void stop() throws Exception {
        if (app != null) {
            app.close();
        }
        if (other != null) {
            other.close();
        }
        cluster.close();
    }

    static HttpResponse<String> llm(App a, String key, String... more) {
        String[] headers = new String[4 + more.length];
        headers[0] = "X-Api-Key";
        headers[1] = key;
        headers[2] = "X-Zone";
        headers[3] = "Asia/Tokyo";
        System.arraycopy(more, 0, headers, 4, more.length);
        return a.http.post("/llm/complete", "{\"max_tokens\":10}", headers);
    }

    @Test
    void everyEndpointDecidesWithTheLibraryAndNoMovedRedirect() throws Exception {
        for (var n : cluster.nodes) {
            assertThat(n.cli("FCALL", "rl_version", "0").trim()).matches("\\d+"); // loaded on every primary at start-up
        }
        long movedBefore = cluster.moved();
        for (int p = 0; p < 10; p++) {
            String phone = "556" + p;
            assertThat(sms(app.http, "{\"phone\":\"" + phone + "\"}").statusCode()).isEqualTo(200);
            assertThat(sms(other.http, "{\"phone\": \"" + phone + "\"}").statusCode()).isEqualTo(200);
            isProblem(sms(app.http, "{ \"phone\":\"" + phone + "\"}"), 429, "rate-limited");
        }
        for (int u = 0; u < 5; u++) {
            for (int i = 0; i < 5; i++) {
                assertThat(app.http.post("/seed001/ocr", "{}", "X-User", "fu" + u).statusCode()).isEqualTo(200);
            }
            isProblem(other.http.post("/seed001/ocr", "{}", "X-User", "fu" + u), 429, "rate-limited");
        }
        List<HttpResponse<String>> rs = concurrently(20,
                i -> (i % 2 == 0 ? app : other).http.get("/seed002/api/custom", "X-Forwarded-For", "192.0.2.78"));
        assertThat(count(rs, 200)).isEqualTo(5);
        for (int i = 0; i < 5; i++) {
            assertThat(app.http.post("/seed004/login", "{}", "X-Forwarded-For", "203.0.113.78").statusCode()).isEqualTo(200);
        }
        isProblem(other.http.post("/seed004/login", "{}", "X-Forwarded-For", "203.0.113.78"), 429, "locked");
        for (int k = 0; k < 10; k++) {
            assertThat(llm(app, "fk" + k, "X-Sleep-Ms", "0").statusCode()).isEqualTo(200);
        }
        List<HttpResponse<String>> inflight = concurrently(3, i -> llm(i % 2 == 0 ? app : other, "fk-in", "X-Sleep-Ms", "1200"));
        assertThat(count(inflight, 200)).isEqualTo(2);
        assertThat(count(inflight, 429)).isEqualTo(1);
        assertThat(cluster.moved() - movedBefore).isZero();
    }
}
