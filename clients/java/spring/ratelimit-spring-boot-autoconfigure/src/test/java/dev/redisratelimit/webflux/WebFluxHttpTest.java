package dev.redisratelimit.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.TestApp;
import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.SharedRedis;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The starter on a WebFlux app (Reactor Netty, random port) over real HTTP
 * against a real redis-server with the module: headers, 429/problem+json
 * byte for byte as the MVC adapter answers, leases released on error and on
 * a client that goes away mid-response, estimates settled and refunded.
 */
@SpringBootTest(classes = ReactiveTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.main.web-application-type=reactive", "ratelimit.legacy-headers=true"})
class WebFluxHttpTest {

    static final String PREFIX = "wf" + UUID.randomUUID().toString().substring(0, 8) + ":";

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) {
        r.add("spring.data.redis.url", () -> SharedRedis.get().url());
        r.add("ratelimit.prefix", () -> PREFIX);
        r.add("ratelimit.user-header", () -> "X-User");
    }

    @LocalServerPort
    int port;

    Http http() {
        return new Http(port);
    }

    static String key() {
        return UUID.randomUUID().toString().substring(0, 12);
    }

    // The remaining count of one named item in a RateLimit header.
    static long remaining(HttpResponse<?> r, String item) {
        Matcher m = Pattern.compile("\"" + item + "\";r=(\\d+)").matcher(r.headers().firstValue("RateLimit").orElseThrow());
        assertThat(m.find()).isTrue();
        return Long.parseLong(m.group(1));
    }

    @Test
    void admittedWithHeadersThenRefusedWithAProblemThatChargesNothing() {
        String k = key();
        HttpResponse<String> first = http().get("/two", "X-Key", k);
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(first.headers().firstValue("RateLimit-Policy")).hasValue("\"short\";q=2;w=10, \"long\";q=5;w=3600");
        assertThat(first.headers().firstValue("RateLimit")).hasValueSatisfying(v -> assertThat(v).matches("\"short\";r=1;t=\\d+, \"long\";r=4;t=\\d+"));
        assertThat(first.headers().firstValue("X-RateLimit-Limit")).isPresent();
        assertThat(http().get("/two", "X-Key", k).statusCode()).isEqualTo(200);
        String state = null;
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> refused = http().get("/two", "X-Key", k);
            assertThat(refused.statusCode()).isEqualTo(429);
            assertThat(refused.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
            assertThat(refused.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/rate-limited\"").contains("\"status\":429")
                    .contains("'short'");
            assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 10L);
            assertThat(remaining(refused, "short")).isZero();
            if (state != null) { // the refusals charged nothing: every one sees the same state
                assertThat(refused.headers().firstValue("RateLimit").orElseThrow().replaceAll(";t=\\d+", "")).isEqualTo(state);
            }
            state = refused.headers().firstValue("RateLimit").orElseThrow().replaceAll(";t=\\d+", "");
        }
    }

    static String timeless(String s) {
        return s.replaceAll(";t=\\d+", ";t=_").replaceAll("retry in \\d+ s", "retry in _ s");
    }

    @Test
    void answersByteForByteAsTheMvcAdapter() {
        ConfigurableApplicationContext mvc = new SpringApplicationBuilder(TestApp.class)
                .properties("server.port=0", "spring.main.web-application-type=servlet", "spring.data.redis.url=" + SharedRedis.get().url(),
                        "ratelimit.prefix=" + PREFIX + "mvc:", "ratelimit.legacy-headers=true")
                .run();
        try {
            Http mvcHttp = new Http(Integer.parseInt(mvc.getEnvironment().getProperty("local.server.port")));
            String k = key();
            List<HttpResponse<String>> fromMvc = new ArrayList<>();
            List<HttpResponse<String>> fromWebFlux = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                fromMvc.add(mvcHttp.get("/two", "X-Key", k));
                fromWebFlux.add(http().get("/two", "X-Key", k));
            }
            for (int i = 0; i < 3; i++) {
                HttpResponse<String> a = fromMvc.get(i);
                HttpResponse<String> b = fromWebFlux.get(i);
                assertThat(b.statusCode()).isEqualTo(a.statusCode()).isEqualTo(i < 2 ? 200 : 429);
                // Seconds left (t=, X-RateLimit-Reset, Retry-After, "retry in N s") come from each call's own clock
                // (a loaded machine may put a second between the two apps' calls): equal up to one second.
                for (String h : List.of("RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining")) {
                    assertThat(b.headers().firstValue(h).map(WebFluxHttpTest::timeless)).as(h)
                            .isEqualTo(a.headers().firstValue(h).map(WebFluxHttpTest::timeless));
                }
                for (String h : List.of("X-RateLimit-Reset", "Retry-After")) {
                    assertThat(b.headers().firstValue(h).isPresent()).as(h).isEqualTo(a.headers().firstValue(h).isPresent());
                    a.headers().firstValue(h).ifPresent(v -> assertThat(Long.parseLong(b.headers().firstValue(h).orElseThrow()))
                            .as(h).isBetween(Long.parseLong(v) - 1, Long.parseLong(v) + 1));
                }
                if (i == 2) {
                    assertThat(b.headers().firstValue("Content-Type")).isEqualTo(a.headers().firstValue("Content-Type"));
                    assertThat(timeless(b.body())).isEqualTo(timeless(a.body()));
                }
            }
        } finally {
            mvc.close();
        }
    }

    @Test
    void leasesReleasedAndEstimatesRefundedWhenTheHandlerErrs() throws Exception {
        String k = key();
        for (int i = 0; i < 3; i++) { // two leases, three failing calls: each released its lease
            HttpResponse<String> failed = http().post("/work?estimate=100&used=0&fail=true", null, "X-Key", k);
            assertThat(failed.statusCode()).isEqualTo(500);
            assertThat(remaining(failed, "tokens")).isEqualTo(900); // 100 charged now, the earlier 100s refunded
        }
        assertThat(held("work:{" + k + "}:inflight")).isZero();
        HttpResponse<String> ok = http().post("/work?estimate=10&used=4", null, "X-Key", k);
        assertThat(ok.statusCode()).isEqualTo(200);
        assertThat(remaining(ok, "tokens")).isEqualTo(990);
        HttpResponse<String> next = http().post("/work?estimate=10&used=10", null, "X-Key", k);
        assertThat(remaining(next, "tokens")).isEqualTo(1000 - 4 - 10); // settled from #result['used']
    }

    // The units held on a lease key (a sorted set, one member per unit: SPEC, RL.LEASE).
    static long held(String policyAndKey) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("ZCARD", PREFIX + policyAndKey).trim());
    }

    @Test
    void concurrencyLimitHoldsWhileCallsRunAndIsReleasedAfter() throws Exception {
        String k = key();
        String lease = "work:{" + k + "}:inflight";
        CompletableFuture<HttpResponse<String>> a = CompletableFuture.supplyAsync(() -> http().post("/work?estimate=1&used=1&delayMs=3000", null, "X-Key", k));
        CompletableFuture<HttpResponse<String>> b = CompletableFuture.supplyAsync(() -> http().post("/work?estimate=1&used=1&delayMs=3000", null, "X-Key", k));
        long t0 = System.nanoTime();
        while (held(lease) < 2 && (System.nanoTime() - t0) / 1_000_000 < 10_000) { // both admitted, however slow the machine
            Thread.sleep(20);
        }
        assertThat(held(lease)).isEqualTo(2);
        HttpResponse<String> third = http().post("/work?estimate=1&used=1", null, "X-Key", k);
        assertThat(third.statusCode()).isEqualTo(429);
        assertThat(third.body()).contains("'inflight'");
        assertThat(third.headers().firstValue("Retry-After")).hasValue("1"); // ratelimit.concurrency-retry-after
        assertThat(a.get().statusCode()).isEqualTo(200);
        assertThat(b.get().statusCode()).isEqualTo(200);
        assertThat(held(lease)).isZero();
        assertThat(http().post("/work?estimate=1&used=1", null, "X-Key", k).statusCode()).isEqualTo(200);
    }

    @Test
    void aClientThatGoesAwayMidStreamReleasesItsLeaseAndPaysItsEstimate() throws Exception {
        String k = key();
        HttpResponse<String> whole = http().get("/stream?n=3", "X-Key", k);
        assertThat(whole.statusCode()).isEqualTo(200);
        assertThat(remaining(whole, "chunks")).isEqualTo(997); // estimate 3 charged, settled to #result = 3 (the last element)

        // 100 chunks 50 ms apart: read the first bytes, then hang up
        try (Socket s = new Socket("127.0.0.1", port)) {
            OutputStream out = s.getOutputStream();
            out.write(("GET /stream?n=100&everyMs=50 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Key: " + k + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            String head = new String(in.readNBytes(12), StandardCharsets.US_ASCII);
            assertThat(head).isEqualTo("HTTP/1.1 200");
            assertThat(http().get("/stream?n=1", "X-Key", k).statusCode()).isEqualTo(429); // its lease is held
        }
        long t0 = System.nanoTime();
        HttpResponse<String> after = null;
        while ((System.nanoTime() - t0) / 1_000_000 < 3000) {
            after = http().get("/stream?n=1", "X-Key", k);
            if (after.statusCode() == 200) {
                break;
            }
            Thread.sleep(50);
        }
        assertThat(after.statusCode()).isEqualTo(200); // released on cancel (the lease's TTL is 60 s)
        assertThat(held("stream:{" + k + "}:inflight")).isZero();
        // 997, then the cancelled call's estimate 100 stands, then 1 charged now
        assertThat(remaining(after, "chunks")).isEqualTo(997 - 100 - 1);
    }

    @Test
    void keyedByClientIpAndUserAsTheMvcAdapter() {
        String ip = "198.51.100." + (1 + (int) (Math.random() * 200));
        HttpResponse<String> a = http().get("/ip", "X-Forwarded-For", "203.0.113.9, " + ip);
        HttpResponse<String> b = http().get("/ip", "X-Forwarded-For", ip);
        assertThat(remaining(b, "per-ip")).isEqualTo(remaining(a, "per-ip") - 1); // the right-most address is the key

        String user = key();
        assertThat(http().get("/user", "X-User", user).statusCode()).isEqualTo(200);
        assertThat(http().get("/user", "X-User", user).statusCode()).isEqualTo(429);
        assertThat(http().get("/user", "X-User", user + "2").statusCode()).isEqualTo(200);
        HttpResponse<String> anonymous = http().get("/user"); // a missing identity: 401 (CLIENTS.md §5)
        assertThat(anonymous.statusCode()).isEqualTo(401);
        assertThat(anonymous.body()).contains("/problems/unauthorized");
    }

    @Test
    void duplicateBodiesRefusedFromTheDigestOfTheBytesRead() {
        String k = key();
        assertThat(http().post("/once", "{\"a\":1}", "X-Key", k).statusCode()).isEqualTo(200);
        HttpResponse<String> again = http().post("/once", "{\"a\":1}", "X-Key", k);
        assertThat(again.statusCode()).isEqualTo(429);
        assertThat(again.body()).contains("/problems/duplicate");
        assertThat(http().post("/once", "{\"a\":2}", "X-Key", k).statusCode()).isEqualTo(200);
    }

    @Test
    void aPlainReturnValueOnTheEventLoopIsAConfigurationError() {
        HttpResponse<String> r = http().get("/plain");
        assertThat(r.statusCode()).isEqualTo(500);
        assertThat(r.body()).contains("/problems/misconfigured").contains("return a Mono or a Flux");
    }
}
