package dev.redisratelimit.example;

import static dev.redisratelimit.example.Checks.isProblem;
import static dev.redisratelimit.example.Checks.retryAfter;
import static dev.redisratelimit.example.Checks.sms;
import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.RedisServer;
import java.net.http.HttpResponse;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * RL_BACKEND=functions on a server without the module (SERVICES.md "On a
 * Redis without the module"): two instances, the library loaded at start-up,
 * every decision one FCALL; a subset of StandaloneServicesTest's checks
 * (endpoints 1, 2 in Asia/Shanghai, 3 and 4; 5 with a zone of one offset,
 * and a zone with daylight saving refused as bad input).
 */
class FunctionsBackendServicesTest {

    static RedisServer redis;
    static App a;
    static App b;
    static String prefix = "fx" + UUID.randomUUID().toString().substring(0, 6) + ":";

    @BeforeAll
    static void start() throws Exception {
        redis = RedisServer.launchWithoutModule();
        a = App.standalone(redis.url(), prefix, "functions");
        b = App.standalone(redis.url(), prefix, "functions");
    }

    @AfterAll
    static void stop() throws Exception {
        if (a != null) {
            a.close();
        }
        if (b != null) {
            b.close();
        }
        if (redis != null) {
            redis.close();
        }
    }

    static String uniq() {
        return Long.toString(Math.abs(UUID.randomUUID().getMostSignificantBits()) % 100_000_000L);
    }

    @Test
    void smsWindowsDuplicatesAndHeadersAcrossInstances() throws Exception {
        String phone = uniq();
        HttpResponse<String> first = sms(a.http, "{\"phone\":\"" + phone + "\"}");
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(first.headers().firstValue("RateLimit")).hasValue("\"short\";r=1;t=10, \"long\";r=4;t=3600, \"duplicate\";r=0;t=5");
        isProblem(sms(b.http, "{\"phone\":\"" + phone + "\"}"), 429, "duplicate");
        assertThat(sms(b.http, "{\"phone\": \"" + phone + "\"}").statusCode()).isEqualTo(200);
        HttpResponse<String> third = sms(a.http, "{ \"phone\":\"" + phone + "\"}");
        isProblem(third, 429, "rate-limited");
        assertThat(retryAfter(third)).isBetween(1L, 10L);
        assertThat(redis.cli("INFO", "commandstats")).contains("cmdstat_fcall:").doesNotContain("cmdstat_rl.");
    }

    @Test
    void ocrDayAndHourInShanghai() {
        String user = "u" + uniq();
        for (int i = 0; i < 5; i++) {
            assertThat((i % 2 == 0 ? a : b).http.post("/seed001/ocr", "{}", "X-User", user).statusCode()).isEqualTo(200);
        }
        HttpResponse<String> sixth = b.http.post("/seed001/ocr", "{}", "X-User", user);
        isProblem(sixth, 429, "rate-limited");
        assertThat(retryAfter(sixth)).isBetween(1L, 3600L);
    }

    @Test
    void llmZonesWithOneOffsetPassDaylightSavingIsA400() {
        String key = "k" + uniq();
        HttpResponse<String> tokyo = a.http.post("/llm/complete", "{\"max_tokens\":10}", "X-Api-Key", key, "X-Zone", "Asia/Tokyo", "X-Sleep-Ms", "0");
        assertThat(tokyo.statusCode()).isEqualTo(200);
        HttpResponse<String> paris = a.http.post("/llm/complete", "{\"max_tokens\":10}", "X-Api-Key", key, "X-Zone", "Europe/Paris", "X-Sleep-Ms", "0");
        isProblem(paris, 400, "bad-request");
        assertThat(paris.body()).contains("daylight saving");
    }

    @Test
    void apiWindowsAndLoginLockout() {
        String ip = "198.51.100." + (Math.abs(UUID.randomUUID().hashCode()) % 250 + 1);
        for (int i = 0; i < 5; i++) {
            assertThat(a.http.get("/seed002/api/custom", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        }
        isProblem(b.http.get("/seed002/api/custom", "X-Forwarded-For", ip), 429, "rate-limited");
        for (int i = 0; i < 5; i++) {
            assertThat(a.http.post("/seed004/login", "{}", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        }
        isProblem(b.http.post("/seed004/login", "{}", "X-Forwarded-For", ip), 429, "locked");
    }
}
