package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.client.QuotaLimit;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.client.TokenBucket;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** A policy decided in one call; a permit that releases its lease and settles its estimate on close. */
@ExtendWith(RedisServers.class)
class PolicyTest {

    static RedisClient redis;
    static LettuceTransport lettuce;
    static final List<RedisCall> SENT = new ArrayList<>();
    static RateLimitClient rl;

    @BeforeAll
    static void connect(RedisServers.Standalone server) {
        redis = RedisClient.create(server.uri());
        lettuce = LettuceTransport.create(redis);
        rl = new RateLimitClient(new RateLimitTransport() {
            @Override
            public CompletionStage<Object> execute(RedisCall call) {
                synchronized (SENT) {
                    SENT.add(call);
                }
                return lettuce.execute(call);
            }
        });
    }

    @AfterAll
    static void close() {
        lettuce.close();
        redis.shutdown();
    }

    private static List<RedisCall> sent(Runnable r) {
        synchronized (SENT) {
            SENT.clear();
        }
        r.run();
        synchronized (SENT) {
            return List.copyOf(SENT);
        }
    }

    static final ZoneId UTC = ZoneId.of("UTC");

    @Test
    void manyLimitsOneRlAllWithEveryLimitsState() {
        Policy api = Policy.builder("api")
                .slidingWindow("short", 2, Duration.ofSeconds(10))
                .quota("daily", UTC, QuotaPeriod.DAY, 100)
                .slidingWindow("long", 5, Duration.ofHours(1))
                .concurrency("inflight", 3, Duration.ofSeconds(30))
                .build();
        String user = "user:" + UUID.randomUUID();
        PolicyDecision[] d = new PolicyDecision[3];
        List<RedisCall> calls = sent(() -> {
            for (int i = 0; i < 3; i++) {
                d[i] = api.decide(rl, user);
            }
        });
        assertEquals(3, calls.size(), "one call per decision");
        assertEquals("RL.ALL", calls.get(0).command());
        assertEquals(List.of("3", "rl:api:{" + user + "}:short", "rl:api:{" + user + "}:daily", "rl:api:{" + user + "}:inflight"),
                calls.get(0).args().subList(0, 4));
        assertEquals(List.of("short", "daily", "long", "inflight"), d[0].limits().stream().map(LimitState::name).toList());
        assertTrue(d[0].admitted() && d[1].admitted());
        assertEquals(List.of(1L, 99L, 4L, 2L), d[0].limits().stream().map(s -> s.state().remaining()).toList());
        assertEquals("short", d[1].binding().name());
        assertTrue(d[2].limited());
        assertEquals("short", d[2].binding().name());
        assertTrue(d[2].retryAfter().orElseThrow().compareTo(Duration.ofSeconds(9)) > 0);
        // a refusal's DETAILS are each rule's peek at this cost (100 - 2 used - 1); it charged nothing anywhere:
        assertEquals(97, d[2].limits().get(1).state().remaining());
        assertEquals(98, rl.quotaPeek("rl:api:{" + user + "}:daily", UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 100)),
                Options.none().withCost(0)).remaining());
        assertEquals(Duration.ofSeconds(10), api.limits().get(0).window().orElseThrow());
        assertTrue(api.limits().get(3).window().isEmpty());
    }

    @Test
    void aSingleLimitIsItsOwnCommand() {
        Policy one = Policy.builder("one").tokenBucket("rate", 10, Duration.ofSeconds(1), 20).build();
        List<RedisCall> calls = sent(() -> assertEquals(19, one.decide(rl, "k:" + UUID.randomUUID()).binding().state().remaining()));
        assertEquals(List.of("RL.THROTTLE"), calls.stream().map(RedisCall::command).toList());
        Policy lock = Policy.builder("login").lockout("fails", 2, Duration.ofMinutes(1), Duration.ofMinutes(5)).build();
        String ip = "ip:" + UUID.randomUUID();
        assertEquals(1, lock.decide(rl, ip).binding().state().remaining());
        assertEquals(0, lock.decide(rl, ip).binding().state().remaining());
        PolicyDecision locked = lock.decide(rl, ip);
        assertTrue(locked.limited());
        assertTrue(locked.retryAfter().orElseThrow().compareTo(Duration.ofMinutes(4)) > 0);
    }

    @Test
    void aPermitSettlesItsEstimateAndReleasesItsLease() {
        Policy llm = Policy.builder("llm")
                .tokenBucket("tpm", 1000, Duration.ofMinutes(1), 1000)
                .quota("daily", UTC, QuotaPeriod.DAY, 10_000)
                .concurrency("inflight", 1, Duration.ofSeconds(30))
                .build();
        String user = "user:" + UUID.randomUUID();
        String quotaKey = "rl:llm:{" + user + "}:daily";
        String leaseKey = "rl:llm:{" + user + "}:inflight";
        long started = System.nanoTime();
        try (Permit p = llm.acquire(rl, user, 500)) {
            assertTrue(p.admitted());
            assertEquals(9_500, rl.quotaPeek(quotaKey, UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 10_000)), Options.none().withCost(0)).remaining());
            try (Permit second = llm.acquire(rl, user, 1)) {
                assertFalse(second.admitted(), "the one in-flight slot is held");
                assertEquals("inflight", second.decision().binding().name());
            }
            p.used(730);
        }
        assertEquals(10_000 - 730, rl.quotaPeek(quotaKey, UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 10_000)), Options.none().withCost(0)).remaining());
        assertEquals(1, rl.leasePeek(leaseKey, 1, Options.none().withCost(0)).remaining(), "the lease was released");
        // on an exception, with nothing reported: the whole estimate is refunded, the lease released
        assertThrows(IllegalStateException.class, () -> {
            try (Permit p = llm.acquire(rl, user, 200)) {
                assertTrue(p.admitted());
                throw new IllegalStateException("the model call failed");
            }
        });
        assertEquals(10_000 - 730, rl.quotaPeek(quotaKey, UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 10_000)), Options.none().withCost(0)).remaining());
        assertEquals(1, rl.leasePeek(leaseKey, 1, Options.none().withCost(0)).remaining());
        // a bucket estimate above its burst is refused before any call
        assertThrows(IllegalArgumentException.class, () -> llm.acquire(rl, user, 1001));
        // the bucket holds 1000 - 730 used, plus what refilled since the first charge (one unit per 60 ms)
        long left = rl.throttlePeek("rl:llm:{" + user + "}:tpm", List.of(TokenBucket.of(1000, Duration.ofMinutes(1), 1000)),
                Options.none().withCost(0)).remaining();
        long refilled = Duration.ofNanos(System.nanoTime() - started).toMillis() / 60 + 1;
        assertTrue(left >= 270 && left <= 270 + refilled, "bucket left " + left + ", refilled at most " + refilled);
    }

    @Test
    void badPoliciesFailWhenBuilt() {
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").slidingWindow("a", 1, Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").build());
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").slidingWindow("a", 1, Duration.ofSeconds(1))
                .slidingWindow("a", 2, Duration.ofSeconds(2)).build());
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").lockout("l", 1, Duration.ofSeconds(1), Duration.ofSeconds(1))
                .slidingWindow("a", 1, Duration.ofSeconds(1)).build());
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").cost(5).tokenBucket("b", 1, Duration.ofSeconds(1), 2).build());
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("bad name"));
    }
}
