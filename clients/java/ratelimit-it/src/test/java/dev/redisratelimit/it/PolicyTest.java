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
import dev.redisratelimit.client.Limit;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimiter;
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

/** The decision core over a real Redis: a policy decided in one call; a permit that releases its lease and settles its estimate on close. */
@ExtendWith(RedisServers.class)
class PolicyTest {

    static RedisClient redis;
    static LettuceTransport lettuce;
    static final List<RedisCall> SENT = new ArrayList<>();
    static RateLimitClient rl;
    static RateLimiter limiter;

    @BeforeAll
    static void connect(RedisServers.Standalone server) {
        redis = RedisClient.create(server.uri());
        lettuce = LettuceTransport.create(redis);
        RateLimitTransport recording = new RateLimitTransport() {
            @Override
            public CompletionStage<Object> execute(RedisCall call) {
                synchronized (SENT) {
                    SENT.add(call);
                }
                return lettuce.execute(call);
            }
        };
        rl = new RateLimitClient(recording);
        limiter = RateLimiter.builder(recording).budget(Duration.ofSeconds(2)).refreshInterval(Duration.ofHours(1)).build();
    }

    @AfterAll
    static void close() {
        limiter.close();
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
        limiter.register(api);
        String user = "user:" + UUID.randomUUID();
        PolicyDecision[] d = new PolicyDecision[3];
        List<RedisCall> calls = sent(() -> {
            for (int i = 0; i < 2; i++) {
                d[i] = limiter.acquire("api", user).decision(); // the leases stay held (not closed)
            }
            d[2] = assertThrows(RateLimitRefusedException.class, () -> limiter.acquire("api", user)).getDecision();
        });
        assertEquals(3, calls.size(), "one call per decision");
        assertEquals("RL.ALL", calls.get(0).command());
        assertEquals(List.of("3", "api:{" + user + "}:short+long", "api:{" + user + "}:daily", "api:{" + user + "}:inflight"),
                calls.get(0).args().subList(0, 4));
        assertEquals(List.of("short", "daily", "long", "inflight"), d[0].limits().stream().map(LimitState::name).toList());
        assertTrue(d[0].admitted() && d[1].admitted());
        assertEquals(List.of(1L, 99L, 4L, 2L), d[0].limits().stream().map(LimitState::r).toList());
        assertEquals("short", d[1].bindingLimit().name());
        assertFalse(d[2].admitted());
        assertEquals("short", d[2].bindingLimit().name());
        assertTrue(d[2].retryAfterMs() > 9_000, "retry after " + d[2].retryAfterMs());
        // a refusal's DETAILS are each rule's peek at this cost (100 - 2 used - 1); it charged nothing anywhere:
        assertEquals(97, d[2].limits().get(1).r());
        assertEquals(98, rl.quotaPeek("api:{" + user + "}:daily", UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 100)),
                Options.none().withCost(0)).remaining());
        assertEquals(10, api.limits().get(0).windowSeconds());
        assertEquals(-1, api.limits().get(3).windowSeconds());
    }

    @Test
    void aLockoutIsItsOwnCommand() {
        limiter.register(Policy.builder("login").lockout("fails", 2, Duration.ofMinutes(1), Duration.ofMinutes(5)).build());
        String ip = "ip:" + UUID.randomUUID();
        List<RedisCall> calls = sent(() -> assertEquals(1, limiter.acquire("login", ip).decision().bindingLimit().r()));
        assertEquals(List.of("RL.LOCKCOUNT"), calls.stream().map(RedisCall::command).toList());
        assertEquals(0, limiter.acquire("login", ip).decision().bindingLimit().r());
        PolicyDecision locked = assertThrows(RateLimitRefusedException.class, () -> limiter.acquire("login", ip)).getDecision();
        assertEquals(PolicyDecision.Kind.LOCKED, locked.kind());
        assertTrue(locked.retryAfterMs() > Duration.ofMinutes(4).toMillis());
    }

    @Test
    void aPermitSettlesItsEstimateAndReleasesItsLease() {
        Policy llm = Policy.builder("llm")
                .limit(Limit.tokenBucket("tpm", 1000, Duration.ofMinutes(1), 1000).estimated())
                .limit(Limit.quota("daily", UTC, QuotaPeriod.DAY, 10_000).estimated())
                .concurrency("inflight", 1, Duration.ofSeconds(30))
                .build();
        limiter.register(llm);
        String user = "user:" + UUID.randomUUID();
        String quotaKey = "llm:{" + user + "}:daily";
        String leaseKey = "llm:{" + user + "}:inflight";
        long started = System.nanoTime();
        try (Permit p = limiter.acquire(PolicyCall.of(llm, user).withEstimate(500))) {
            assertTrue(p.decision().admitted());
            assertEquals(9_500, rl.quotaPeek(quotaKey, UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 10_000)), Options.none().withCost(0)).remaining());
            PolicyDecision second = assertThrows(RateLimitRefusedException.class,
                    () -> limiter.acquire(PolicyCall.of(llm, user).withEstimate(1))).getDecision();
            assertEquals("inflight", second.bindingLimit().name(), "the one in-flight slot is held");
            p.used(730);
        }
        assertEquals(10_000 - 730, rl.quotaPeek(quotaKey, UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 10_000)), Options.none().withCost(0)).remaining());
        assertEquals(1, rl.leasePeek(leaseKey, 1, Options.none().withCost(0)).remaining(), "the lease was released");
        // on an exception, with nothing reported: the whole estimate is refunded, the lease released
        assertThrows(IllegalStateException.class, () -> {
            try (Permit p = limiter.acquire(PolicyCall.of(llm, user).withEstimate(200))) {
                assertTrue(p.decision().admitted());
                throw new IllegalStateException("the model call failed");
            }
        });
        assertEquals(10_000 - 730, rl.quotaPeek(quotaKey, UTC, List.of(QuotaLimit.of(QuotaPeriod.DAY, 10_000)), Options.none().withCost(0)).remaining());
        assertEquals(1, rl.leasePeek(leaseKey, 1, Options.none().withCost(0)).remaining());
        // usage after close is an error, never dropped
        Permit closed = limiter.acquire(PolicyCall.of(llm, user).withEstimate(1));
        closed.close();
        assertThrows(IllegalStateException.class, () -> closed.used(1));
        // the bucket holds 1000 - 730 - 1 used, plus what refilled since the first charge (one unit per 60 ms)
        long left = rl.throttlePeek("llm:{" + user + "}:tpm", List.of(TokenBucket.of(1000, Duration.ofMinutes(1), 1000)),
                Options.none().withCost(0)).remaining();
        long refilled = Duration.ofNanos(System.nanoTime() - started).toMillis() / 60 + 1;
        assertTrue(left >= 269 && left <= 269 + refilled, "bucket left " + left + ", refilled at most " + refilled);
    }

    @Test
    void badPoliciesFailWhenBuilt() {
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").slidingWindow("a", 1, Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").build());
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").slidingWindow("a", 1, Duration.ofSeconds(1))
                .slidingWindow("a", 2, Duration.ofSeconds(2)).build());
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("p").lockout("l", 1, Duration.ofSeconds(1), Duration.ofSeconds(1))
                .slidingWindow("a", 1, Duration.ofSeconds(1)).build());
        assertThrows(IllegalArgumentException.class, () -> Policy.builder("bad{name}").slidingWindow("a", 1, Duration.ofSeconds(1)).build());
        assertThrows(IllegalArgumentException.class, () -> limiter.acquire("never-registered", "k"));
    }
}
