package dev.redisratelimit.webflux;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.reactive.ReactiveOffload;
import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.SharedRedis;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.support.GenericApplicationContext;
import reactor.blockhound.BlockHound;

/**
 * BlockHound (installed for this JVM only: its own Surefire execution)
 * records every blocking call on a non-blocking thread — Reactor Netty's
 * event loops, Lettuce's Netty threads. Rate-limited WebFlux calls (decide,
 * run, release, settle) over the Lettuce driver record none; over the Jedis
 * driver none either, as the adapter sends from boundedElastic — and the
 * same Jedis app with that offload turned off does record Jedis's socket
 * I/O, so the check can fail.
 */
class WebFluxBlockHoundTest {

    static final List<String> blocked = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void install() {
        // Lettuce guards each write with a ReentrantLock held for a few
        // instructions (SharedLock); two threads writing at once make one park
        // for that long. Not I/O (the same park is reported in
        // redis/lettuce#2510), so it is allowed; everything else is recorded.
        BlockHound.install(b -> b.allowBlockingCallsInside("io.lettuce.core.protocol.SharedLock", "incrementWriters")
                .allowBlockingCallsInside("io.lettuce.core.protocol.SharedLock", "doExclusive")
                .blockingMethodCallback(m -> blocked.add(Thread.currentThread().getName() + " " + m + "\n    "
                + Arrays.stream(new Throwable().getStackTrace()).skip(2).limit(25).map(Object::toString)
                        .collect(Collectors.joining("\n    ")))));
    }

    static ConfigurableApplicationContext app(String client, boolean noOffload) {
        SpringApplicationBuilder b = new SpringApplicationBuilder(ReactiveTestApp.class).properties("server.port=0",
                "spring.main.web-application-type=reactive", "spring.data.redis.url=" + SharedRedis.get().url(),
                "spring.data.redis.client-type=" + client, "ratelimit.decision-budget=5s", "ratelimit.prefix=bh" + UUID.randomUUID().toString().substring(0, 6) + ":");
        if (noOffload) {
            b.initializers(ctx -> ((GenericApplicationContext) ctx).registerBean(ReactiveOffload.class, () -> new ReactiveOffload(false)));
        }
        return b.run();
    }

    // Admitted, refused, leased, settled, failed and streamed calls, several at once.
    static void traffic(ConfigurableApplicationContext app) {
        Http http = new Http(Integer.parseInt(app.getEnvironment().getProperty("local.server.port")));
        String k = UUID.randomUUID().toString();
        CompletableFuture<?>[] calls = new CompletableFuture<?>[4];
        for (int i = 0; i < calls.length; i++) {
            int n = i;
            calls[i] = CompletableFuture.runAsync(() -> {
                assertThat(http.get("/two", "X-Key", k + n % 2).statusCode()).isIn(200, 429);
                assertThat(http.post("/work?estimate=10&used=3", null, "X-Key", k).statusCode()).isIn(200, 429);
                assertThat(http.post("/work?estimate=10&used=3&fail=true", null, "X-Key", k).statusCode()).isIn(500, 429);
                assertThat(http.get("/stream?n=5", "X-Key", k + n).statusCode()).isEqualTo(200);
                assertThat(http.get("/user", "X-User", k + n).statusCode()).isEqualTo(200);
            });
        }
        CompletableFuture.allOf(calls).join();
    }

    static String report() {
        return blocked.size() + " blocking calls on non-blocking threads:\n" + String.join("\n", blocked.subList(0, Math.min(3, blocked.size())));
    }

    @Test
    void theDecisionNeverBlocksAnEventLoop() {
        long t0 = System.nanoTime();
        try (ConfigurableApplicationContext lettuce = app("lettuce", false)) {
            System.out.printf("blockhound: lettuce app started in %d ms%n", (System.nanoTime() - t0) / 1_000_000);
            Http http = new Http(Integer.parseInt(lettuce.getEnvironment().getProperty("local.server.port")));
            blocked.clear();
            // sanity: BlockHound watches the event loop (an unlimited endpoint that sleeps on it)
            http.get("/sleepy");
            assertThat(blocked).as("BlockHound saw the sleep on the event loop").anySatisfy(b -> assertThat(b).contains("sleep"));
            blocked.clear();

            t0 = System.nanoTime();
            traffic(lettuce);
            System.out.printf("blockhound: lettuce traffic in %d ms%n", (System.nanoTime() - t0) / 1_000_000);
            assertThat(blocked).as(WebFluxBlockHoundTest::report).isEmpty();
        }
    }

    @Test
    void jedisCallsAreSentFromBoundedElastic() {
        try (ConfigurableApplicationContext jedis = app("jedis", false)) {
            assertThat(jedis.getBean(ReactiveOffload.class).blocking()).isTrue();
            blocked.clear();
            traffic(jedis);
            assertThat(blocked).as(WebFluxBlockHoundTest::report).isEmpty();
        }
        try (ConfigurableApplicationContext jedis = app("jedis", true)) {
            blocked.clear();
            Http http = new Http(Integer.parseInt(jedis.getEnvironment().getProperty("local.server.port")));
            assertThat(http.get("/two", "X-Key", UUID.randomUUID().toString()).statusCode()).isEqualTo(200);
            assertThat(blocked).as("without the offload, Jedis blocks the event loop").anySatisfy(b -> assertThat(b).contains("redis.clients.jedis"));
        }
    }
}
