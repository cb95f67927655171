package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.redisratelimit.client.RuntimeLimits;
import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.SharedRedis;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The starter over real HTTP against a real redis-server with the module. */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class StarterHttpTest {

    static final String PREFIX = "t" + UUID.randomUUID().toString().substring(0, 8) + ":";

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) {
        r.add("spring.data.redis.url", () -> SharedRedis.get().url());
        r.add("ratelimit.prefix", () -> PREFIX);
        r.add("ratelimit.legacy-headers", () -> "true");
        // These tests check what is decided, not how fast (RedisDownTest covers the budget): on a
        // 2-core machine shared by parallel builds, 50 simultaneous first calls took longer than the
        // default 500 ms, opened the circuit and answered 503 (seen 3 times in 4 full builds at load 13-24).
        r.add("ratelimit.decision-budget", () -> "5s");
    }

    @LocalServerPort
    int port;

    @Autowired
    RuntimeLimits runtimeLimits;

    Http http() {
        return new Http(port);
    }

    static String key() {
        return UUID.randomUUID().toString().substring(0, 12);
    }

    @Test
    void fiftyThreadsOnOneKeyAdmitExactlyTheLimit() throws Exception {
        String k = key();
        ExecutorService pool = Executors.newFixedThreadPool(50);
        CountDownLatch go = new CountDownLatch(1);
        List<Future<HttpResponse<String>>> out = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            out.add(pool.submit(() -> {
                go.await();
                return http().get("/one", "X-Key", k);
            }));
        }
        go.countDown();
        int ok = 0;
        int refused = 0;
        for (Future<HttpResponse<String>> f : out) {
            HttpResponse<String> r = f.get();
            if (r.statusCode() == 200) {
                ok++;
            } else {
                assertThat(r.statusCode()).isEqualTo(429);
                assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
                assertThat(r.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/rate-limited\"").contains("\"status\":429")
                        .contains("\"title\":\"Too Many Requests\"");
                assertThat(Long.parseLong(r.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 60L);
                refused++;
            }
        }
        pool.shutdown();
        assertThat(ok).isEqualTo(10);
        assertThat(refused).isEqualTo(40);
        // refusals charged nothing: the set holds exactly the 10 admissions
        assertThat(SharedRedis.get().cli("ZCARD", PREFIX + "one:{" + k + "}:per-key")).isEqualTo("10");
    }

    @Test
    void headersCarryEveryNamedLimitFromDetails() {
        assumeTrue(SharedRedis.details(), "the loaded module has no RL.ALL DETAILS yet");
        String k = key();
        HttpResponse<String> r1 = http().get("/two", "X-Key", k);
        assertThat(r1.statusCode()).isEqualTo(200);
        assertThat(r1.headers().firstValue("RateLimit-Policy")).hasValue("\"short\";q=2;w=10, \"long\";q=5;w=3600");
        assertThat(r1.headers().firstValue("RateLimit")).hasValue("\"short\";r=1;t=10, \"long\";r=4;t=3600");
        assertThat(r1.headers().firstValue("X-RateLimit-Limit")).hasValue("2");
        assertThat(r1.headers().firstValue("X-RateLimit-Remaining")).hasValue("1");
        http().get("/two", "X-Key", k);
        HttpResponse<String> r3 = http().get("/two", "X-Key", k);
        assertThat(r3.statusCode()).isEqualTo(429);
        assertThat(r3.headers().firstValue("RateLimit")).hasValue("\"short\";r=0;t=10, \"long\";r=2;t=3600");
        assertThat(r3.headers().firstValue("Retry-After")).hasValue("10");
    }

    @Test
    void aClassLevelPolicyCoversEveryMethodOfTheClass() {
        int ok = 0;
        for (int i = 0; i < 6; i++) {
            ok += http().get(i % 2 == 0 ? "/cls/a" : "/cls/b", "X-Forwarded-For", "192.0.2." + i).statusCode() == 200 ? 1 : 0;
        }
        assertThat(ok).isEqualTo(3);
    }

    @Test
    void aGlobalLimitBesidePerKeyLimitsIsOneCounterForEveryKey() throws Exception {
        for (int i = 0; i < 3; i++) {
            assertThat(http().get("/mixed", "X-Key", key()).statusCode()).isEqualTo(200);
        }
        HttpResponse<String> r = http().get("/mixed", "X-Key", key());
        assertThat(r.statusCode()).isEqualTo(429);
        assertThat(r.headers().firstValue("RateLimit").orElseThrow()).startsWith("\"per\";r=4;t=60, \"all\";r=0;");
        // one global counter under the policy's own hash tag
        assertThat(SharedRedis.get().cli("ZCARD", PREFIX + "mixed:{mixed}:all")).isEqualTo("3");
    }

    @Test
    void aQuotaOfZeroRefusesWithoutRetryAfter() {
        HttpResponse<String> r = http().get("/off");
        assertThat(r.statusCode()).isEqualTo(429);
        assertThat(r.headers().firstValue("Retry-After")).isEmpty();
        assertThat(r.body()).contains("waiting will not help");
    }

    @Test
    void tokenBucketAdmitsItsBurst() {
        String k = key();
        int ok = 0;
        for (int i = 0; i < 6; i++) {
            if (http().get("/bucket", "X-Key", k).statusCode() == 200) {
                ok++;
            }
        }
        assertThat(ok).isEqualTo(3);
    }

    @Test
    void lockoutCountsThenLocks() {
        String ip = "203.0.113." + (int) (Math.random() * 200);
        assertThat(http().get("/login", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        assertThat(http().get("/login", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        HttpResponse<String> locked = http().get("/login", "X-Forwarded-For", ip);
        assertThat(locked.statusCode()).isEqualTo(429);
        assertThat(locked.body()).contains("/problems/locked");
        assertThat(locked.headers().firstValue("Retry-After")).hasValue("30");
        assertThat(locked.headers().firstValue("RateLimit")).hasValue("\"login\";r=0;t=30");
        assertThat(http().get("/login", "X-Forwarded-For", ip).statusCode()).isEqualTo(429);
        // another client is not locked
        assertThat(http().get("/login", "X-Forwarded-For", ip + "1").statusCode()).isEqualTo(200);
    }

    @Test
    void leaseReleasedAndEstimateSettled() throws Exception {
        String k = key();
        assertThat(http().post("/work?estimate=100&used=30", "{}", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().post("/work?estimate=100&used=130", "{}", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().post("/work?estimate=100&used=50&fail=true", "{}", "X-Key", k).statusCode()).isEqualTo(500);
        // the day's counter equals what was used: 30 + 130 + 0
        assertThat(quotaRemaining(k)).isEqualTo(1000 - 160);
        assertThat(leaseRemaining(k)).isEqualTo(2);

        // two in flight; a third is refused with Retry-After 1 (not the lease TTL)
        ExecutorService pool = Executors.newFixedThreadPool(2);
        Future<HttpResponse<String>> a = pool.submit(() -> http().post("/work?estimate=10&used=10&sleepMs=600", "{}", "X-Key", k));
        Future<HttpResponse<String>> b = pool.submit(() -> http().post("/work?estimate=10&used=10&sleepMs=600", "{}", "X-Key", k));
        Thread.sleep(250);
        HttpResponse<String> third = http().post("/work?estimate=10&used=10", "{}", "X-Key", k);
        assertThat(third.statusCode()).isEqualTo(429);
        assertThat(third.headers().firstValue("Retry-After")).hasValue("1");
        assertThat(a.get().statusCode()).isEqualTo(200);
        assertThat(b.get().statusCode()).isEqualTo(200);
        pool.shutdown();
        assertThat(leaseRemaining(k)).isEqualTo(2);
        assertThat(quotaRemaining(k)).isEqualTo(1000 - 180);
    }

    @Test
    void leaseReleasedAndEstimateRefundedWhenTheClientDisconnects() throws Exception {
        String k = key();
        try (Socket s = new Socket("127.0.0.1", port)) {
            OutputStream out = s.getOutputStream();
            out.write(("POST /work?estimate=100&used=40&sleepMs=500 HTTP/1.1\r\nHost: x\r\nX-Key: " + k
                    + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            Thread.sleep(150);
            assertThat(leaseRemaining(k)).isEqualTo(1); // in flight
        } // the client goes away mid-call
        long deadline = System.currentTimeMillis() + 1500;
        while (leaseRemaining(k) != 2 && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        assertThat(leaseRemaining(k)).isEqualTo(2);
        // the method ran to its end: its usage (40) is what the day counted
        assertThat(quotaRemaining(k)).isEqualTo(1000 - 40);
    }

    @Test
    void limitsChangedAtRunTimeApplyToExistingCounts() throws Exception {
        String user = key();
        for (int i = 0; i < 3; i++) {
            assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(200);
        }
        runtimeLimits.set("ocr", Map.of("hour", 3L));
        assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(429); // lowered below the count: refused at once
        runtimeLimits.set("ocr", Map.of("hour", 5L));
        assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(200); // nothing was reset: 4th of 5
        assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(200);
        assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(429);
        assertThat(runtimeLimits.get("ocr")).isEqualTo(Map.of("day", 20L, "hour", 5L));
        runtimeLimits.set("ocr", Map.of("day", 0L));
        HttpResponse<String> off = http().get("/ocr", "X-User", key());
        assertThat(off.statusCode()).isEqualTo(429);
        assertThat(off.headers().firstValue("Retry-After")).isEmpty();
        runtimeLimits.set("ocr", Map.of("day", 20L));
    }

    @Test
    void anAnnotationKeyedByUserAnswers401WhenTheRequestNamesNone() throws Exception {
        // CLIENTS.md §5: a missing identity is 401, not a misconfiguration (500); an empty header names no one either
        for (HttpResponse<String> r : List.of(http().get("/ocr"), http().get("/ocr", "X-User", ""))) {
            assertThat(r.statusCode()).isEqualTo(401);
            assertThat(r.body()).contains("/problems/unauthorized");
        }
    }

    long leaseRemaining(String k) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("RL.LEASEPEEK", PREFIX + "work:{" + k + "}:inflight", "*", "2", "COST", "0")
                .split("\n")[3].trim());
    }

    long quotaRemaining(String k) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("RL.QUOTAPEEK", PREFIX + "work:{" + k + "}:tokens", "*", "UTC", "DAY", "1000",
                "COST", "0").split("\n")[3].trim());
    }

    @Test
    void aKeyThatEvaluatesToNullIsAClearErrorNotAnUnlimitedCall() {
        HttpResponse<String> r = http().get("/nullkey");
        assertThat(r.statusCode()).isEqualTo(500);
        assertThat(r.body()).contains("/problems/misconfigured").contains("evaluated to null");
    }
}
