package dev.redisratelimit.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.RedisServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * Every answer written on a reused HTTP/1.1 connection (issue 35's stall: a
 * request sent on a kept-alive connection to a WebFlux app was sometimes never
 * answered). One JDK client sends requests one after the other, so they share
 * one connection: admitted, refused (429), Redis down (503), POST bodies read
 * and unread. Each must be answered within 5 s, and the connection must be the
 * same at the end as at the start (nothing closed it to recover).
 */
@SpringBootTest(classes = ReactiveTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.main.web-application-type=reactive", "ratelimit.prefix=wfka:", "ratelimit.decision-budget=300ms"})
class WebFluxKeepAliveTest {

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

    final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    final List<String> stalled = new ArrayList<>();
    final Map<String, Integer> statuses = new TreeMap<>();

    void send(String method, String path, String body, String key) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(5))
                .header("X-Key", key)
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (body != null) {
            b.header("Content-Type", "application/json");
        }
        try {
            HttpResponse<String> r = client.send(b.build(), HttpResponse.BodyHandlers.ofString());
            statuses.merge(method + " " + path.replaceAll("\\?.*", "") + " " + r.statusCode(), 1, Integer::sum);
        } catch (HttpTimeoutException e) {
            stalled.add(method + " " + path);
        }
    }

    String peer() throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/peer")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
    }

    @Test
    void everyRequestOnOneKeptAliveConnectionIsAnswered() throws Exception {
        String first = peer();
        String body = "{\"to\":\"+15550100\",\"text\":\"hello\"}";
        for (int i = 0; i < 400; i++) {
            send("GET", "/two", null, "fresh" + i);                // admitted
            send("GET", "/two", null, "spent");                    // refused but for 5 (its 1 h limit)
            send("POST", "/once", "{\"n\":" + i + "}", "once" + i); // admitted, body read
            send("POST", "/unread", body, "unread" + i);            // admitted, body unread
            send("POST", "/unread", body, "spent");                 // refused but once, body unread
        }
        redis.stop();
        for (int i = 0; i < 150; i++) {
            send("GET", "/closed", null, "down");                   // 503
            send("POST", "/unread", body, "down" + i);              // 503, body unread
        }
        redis.start();
        assertThat(stalled).as("requests never answered on the kept-alive connection (statuses %s)", statuses).isEmpty();
        // "spent" on /two: 2 per 10 s, 5 per hour, so 2 to 5 of its 400 admitted (as fast as the loop runs)
        assertThat(statuses.get("GET /two 200")).isBetween(402, 405);
        assertThat(statuses.get("GET /two 200") + statuses.get("GET /two 429")).isEqualTo(800);
        assertThat(statuses).containsEntry("POST /once 200", 400)
                .containsEntry("POST /unread 200", 401).containsEntry("POST /unread 429", 399)
                .containsEntry("GET /closed 503", 150).containsEntry("POST /unread 503", 150);
        assertThat(peer()).as("the same connection throughout").isEqualTo(first);
    }
}
