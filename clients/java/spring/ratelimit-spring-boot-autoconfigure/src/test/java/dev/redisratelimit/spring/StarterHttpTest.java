package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.AnnotationHttpContract;
import dev.redisratelimit.spring.test.SharedRedis;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.net.http.HttpResponse;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The starter on Spring MVC (Tomcat, random port) over real HTTP against a
 * real redis-server with the module: the HTTP contract both stacks run
 * ({@link AnnotationHttpContract}), and what only a servlet container does.
 */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class StarterHttpTest extends AnnotationHttpContract {

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

    @Override
    protected String prefix() {
        return PREFIX;
    }

    @Test
    void closingAPermitNeverDelaysTheResponseWhenRedisIsSlow() throws Exception {
        // CLIENTS.md §3/§4: the release and settlement are sent, not waited for. Redis stalls (every client
        // paused 4 s) while the 1 s method runs; the answer comes when the method ends, not when Redis
        // answers or the 5 s budget ends; the lease is released once Redis runs again.
        String k = key();
        CompletableFuture<HttpResponse<String>> call = CompletableFuture.supplyAsync(
                () -> http().post("/work?estimate=10&used=5&delayMs=1000", "{}", "X-Key", k));
        long admitted = System.currentTimeMillis() + 5000;
        while (held("work:{" + k + "}:inflight") != 1 && System.currentTimeMillis() < admitted) {
            Thread.sleep(10);
        }
        assertThat(held("work:{" + k + "}:inflight")).isEqualTo(1); // the method runs
        long paused = System.nanoTime();
        SharedRedis.get().cli("CLIENT", "PAUSE", "4000", "ALL");
        assertThat(call.get(10, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        long ms = (System.nanoTime() - paused) / 1_000_000;
        assertThat(ms).as("answered when the method ended (<= 1 s after the pause), not after Redis (4 s)").isLessThan(3000);
        long released = System.currentTimeMillis() + 8000;
        while (held("work:{" + k + "}:inflight") != 0 && System.currentTimeMillis() < released) {
            Thread.sleep(50);
        }
        assertThat(held("work:{" + k + "}:inflight")).isZero();
    }

    @Test
    void leaseReleasedAndEstimateKeptWhenTheClientDisconnectsWhileTheMethodRuns() throws Exception {
        String k = key();
        try (Socket s = new Socket("127.0.0.1", port)) {
            OutputStream out = s.getOutputStream();
            out.write(("POST /work?estimate=100&used=40&delayMs=2000 HTTP/1.1\r\nHost: x\r\nX-Key: " + k
                    + "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            long admitted = System.currentTimeMillis() + 1500; // admitted, however loaded the machine
            while (held("work:{" + k + "}:inflight") != 1 && System.currentTimeMillis() < admitted) {
                Thread.sleep(20);
            }
            assertThat(held("work:{" + k + "}:inflight")).isEqualTo(1); // in flight
        } // the client goes away mid-call
        long deadline = System.currentTimeMillis() + 4000;
        while (held("work:{" + k + "}:inflight") != 0 && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        assertThat(held("work:{" + k + "}:inflight")).isZero();
        // the method ran to its end: its usage (40) is what the day counted
        assertThat(quotaRemaining("work:{" + k + "}:tokens")).isEqualTo(1000 - 40);
    }

    @Test
    void aStreamsLeaseIsReleasedWhenItsClientLeavesMidStream() throws Exception {
        // CLIENTS.md §4: a streamed body holds its permit to the last byte, and a client that leaves frees
        // it. When the client has gone, Tomcat may recycle the response before the stream's writer ends;
        // closing the permit read the response then, threw, and the lease stayed until its 60 s TTL
        // (1 stream in ~8 in examples/services-test). Ten streams, each left after its first line.
        for (int i = 0; i < 10; i++) {
            String k = key();
            try (Socket s = new Socket("127.0.0.1", port)) {
                OutputStream out = s.getOutputStream();
                out.write(("POST /stream?lines=20&gapMs=" + (i % 2 == 0 ? 100 : 300) + " HTTP/1.1\r\nHost: x\r\nX-Key: " + k
                        + "\r\nContent-Length: 0\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                out.flush();
                java.io.InputStream in = s.getInputStream();
                String got = "";
                byte[] buf = new byte[4096];
                while (!got.contains("\"}\n")) { // the first line whole
                    int n = in.read(buf);
                    assertThat(n).as("the stream's first line").isPositive();
                    got += new String(buf, 0, n, StandardCharsets.US_ASCII);
                }
                assertThat(got).startsWith("HTTP/1.1 200");
                assertThat(held("stream:{" + k + "}:inflight")).isEqualTo(1);
            } // the client goes away after the first line
            long deadline = System.currentTimeMillis() + 3000;
            while (held("stream:{" + k + "}:inflight") != 0 && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
            }
            assertThat(held("stream:{" + k + "}:inflight")).as("stream %d: its lease after the client left", i).isZero();
        }
    }
}
