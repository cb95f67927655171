package dev.redisratelimit.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.TestApp;
import dev.redisratelimit.spring.test.AnnotationHttpContract;
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
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The starter on a WebFlux app (Reactor Netty, random port) over real HTTP
 * against a real redis-server with the module: the HTTP contract both stacks
 * run ({@link AnnotationHttpContract}), answers byte for byte as the MVC
 * adapter's, and what only WebFlux has (a streamed result whose client goes
 * away, a plain return value on the event loop).
 */
@SpringBootTest(classes = ReactiveTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.main.web-application-type=reactive", "ratelimit.legacy-headers=true"})
class WebFluxHttpTest extends AnnotationHttpContract {

    static final String PREFIX = "wf" + UUID.randomUUID().toString().substring(0, 8) + ":";

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) {
        r.add("spring.data.redis.url", () -> SharedRedis.get().url());
        r.add("ratelimit.prefix", () -> PREFIX);
        // what is decided, not how fast (as the MVC test): 50 simultaneous first calls on a loaded machine
        r.add("ratelimit.decision-budget", () -> "5s");
    }

    @Override
    protected String prefix() {
        return PREFIX;
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
    void aClientThatGoesAwayMidStreamReleasesItsLeaseAndPaysWhatWasSent() throws Exception {
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
        HttpResponse<String> after = untilAdmitted(() -> http().get("/stream?n=1", "X-Key", k));
        assertThat(after.statusCode()).isEqualTo(200); // released on cancel (the lease's TTL is 60 s)
        // and the admitted call's own lease, released once its answer is sent (not waited for by it)
        long t1 = System.nanoTime();
        while (held("stream:{" + k + "}:inflight") > 0 && (System.nanoTime() - t1) / 1_000_000 < 2000) {
            Thread.sleep(20);
        }
        assertThat(held("stream:{" + k + "}:inflight")).isZero();
        // 997, then the cancelled call settled to its last element emitted (k of the 100 chunks, the chunks sent:
        // at least the first, which carried the headers; far fewer than 100 before the hang-up was seen), then 1 charged now
        long sent = 997 - 1 - remaining(after, "chunks");
        assertThat(sent).isBetween(1L, 60L);
    }

    @Test
    void aClientThatGoesAwayBeforeTheAnswerReleasesItsLeaseAndPaysNothing() throws Exception {
        String k = key();
        // an estimate of 100, the work 5 s long: the client hangs up while it runs (before any byte of the answer)
        try (Socket s = new Socket("127.0.0.1", port)) {
            OutputStream out = s.getOutputStream();
            out.write(("POST /work?estimate=100&used=30&delayMs=5000 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Key: " + k
                    + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            long t0 = System.nanoTime();
            while (held("work:{" + k + "}:inflight") < 1 && (System.nanoTime() - t0) / 1_000_000 < 10_000) {
                Thread.sleep(20);
            }
            assertThat(held("work:{" + k + "}:inflight")).isEqualTo(1);
        }
        long t0 = System.nanoTime();
        while (held("work:{" + k + "}:inflight") > 0 && (System.nanoTime() - t0) / 1_000_000 < 3000) {
            Thread.sleep(20);
        }
        assertThat(held("work:{" + k + "}:inflight")).isZero(); // released at the hang-up, not after the 5 s
        // the cancelled work reported nothing: its estimate refunded whole (SERVICES.md endpoint 5: 0 when cancelled);
        // this call's estimate of 1 is charged when its headers are written
        HttpResponse<String> next = http().post("/work?estimate=1&used=1", "{}", "X-Key", k);
        assertThat(next.statusCode()).isEqualTo(200);
        assertThat(remaining(next, "tokens")).isEqualTo(1000 - 1);
    }

    private static HttpResponse<String> untilAdmitted(java.util.function.Supplier<HttpResponse<String>> call) throws InterruptedException {
        long t0 = System.nanoTime();
        HttpResponse<String> r = call.get();
        while (r.statusCode() != 200 && (System.nanoTime() - t0) / 1_000_000 < 3000) {
            Thread.sleep(50);
            r = call.get();
        }
        return r;
    }

    @Test
    void aPlainReturnValueOnTheEventLoopIsAConfigurationError() {
        HttpResponse<String> r = http().get("/plain");
        assertThat(r.statusCode()).isEqualTo(500);
        assertThat(r.body()).contains("/problems/misconfigured").contains("return a Mono or a Flux");
    }
    @Test
    void aRefusalIsAnsweredByTheFallbackMethodForMonoAndFlux() throws Exception {
        String k = key();
        HttpResponse<String> admitted = http().get("/fallback/mono?who=ann", "X-Key", k);
        assertThat(admitted.statusCode()).isEqualTo(200);
        assertThat(admitted.body()).isEqualTo("hello ann");
        for (int i = 0; i < 2; i++) { // refused: the fallback's Mono answers (it gets the refusal), nothing charged
            HttpResponse<String> r = http().get("/fallback/mono?who=ann", "X-Key", k);
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.body()).isEqualTo("later ann (fb-mono)");
        }
        assertThat(held("fb-mono:{" + k + "}:fb")).isEqualTo(1);
        // a Flux method falling back to a plain value: one element
        assertThat(http().get("/fallback/flux", "X-Key", k).body()).contains("a").contains("b");
        HttpResponse<String> r = http().get("/fallback/flux", "X-Key", k);
        assertThat(r.statusCode()).isEqualTo(200);
        assertThat(r.body()).isEqualTo("cached");
        assertThat(held("fb-flux:{" + k + "}:fb")).isEqualTo(1);
    }
}
