package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Counting one outcome over a real Redis, as the Python and Node clients: charged up front, given back at close. */
@ExtendWith(RedisServers.class)
class OutcomeTest {

    static RedisClient redis;
    static LettuceTransport lettuce;
    static RateLimiter limiter;

    @BeforeAll
    static void connect(RedisServers.Standalone server) {
        redis = RedisClient.create(server.uri());
        lettuce = LettuceTransport.create(redis);
        limiter = RateLimiter.builder(lettuce).budget(Duration.ofSeconds(2)).refreshInterval(Duration.ofHours(1)).build();
    }

    @AfterAll
    static void close() {
        limiter.close();
        lettuce.close();
        redis.shutdown();
    }

    @Test
    void fiftyConcurrentFailingLoginsAgainstFive() throws Exception {
        Policy login = Policy.builder("login-" + UUID.randomUUID()).limits("5 per 15 minutes").counts("failures").build();
        AtomicInteger admitted = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(50);
        CountDownLatch go = new CountDownLatch(1);
        for (int i = 0; i < 50; i++) {
            pool.submit(() -> {
                go.await();
                try (Permit p = limiter.acquire(PolicyCall.of(login, "alice"))) {
                    admitted.incrementAndGet();
                    Thread.sleep(10);
                    p.failed(); // the wrong password
                } catch (RateLimitRefusedException refused) {
                    // locked out
                }
                return null;
            });
        }
        go.countDown();
        pool.shutdown();
        pool.awaitTermination(30, TimeUnit.SECONDS);
        assertEquals(5, admitted.get());
        assertEquals(0, limiter.state(login, "alice").limits().get(0).r());
    }

    @Test
    void successesGivenBackUnderFailuresOnly() {
        Policy login = Policy.builder("ok-" + UUID.randomUUID()).limits("3/minute").counts("failures").build();
        for (int i = 0; i < 10; i++) {
            try (Permit p = limiter.acquire(PolicyCall.of(login, "bob"))) {
                p.succeeded();
            }
        }
        assertEquals(3, limiter.state(login, "bob").limits().get(0).r());
        limiter.acquire(PolicyCall.of(login, "bob")).failed().close();
        assertEquals(2, limiter.state(login, "bob").limits().get(0).r());
        Policy signup = Policy.builder("s-" + UUID.randomUUID()).limits("1/minute").counts("successes").build();
        limiter.acquire(PolicyCall.of(signup, "ip")).failed().close();
        limiter.acquire(PolicyCall.of(signup, "ip")).close(); // a success (nothing said)
        assertThrows(RateLimitRefusedException.class, () -> limiter.acquire(PolicyCall.of(signup, "ip")));
        assertThrows(IllegalArgumentException.class,
                () -> Policy.builder("l").lockout("x", 1, Duration.ofSeconds(1), Duration.ofSeconds(1)).counts("failures").build());
    }
    @Test
    void severalPoliciesDecidedTogetherEachCountAndSettleOnTheirOwn() {
        String id = UUID.randomUUID().toString();
        // One counting failures only, one every call: a success gives back the first's unit, the second's stays.
        Policy failures = Policy.builder("f-" + id).limits("3/minute").counts("failures").build();
        Policy every = Policy.builder("e-" + id).limits("5/minute").build();
        PolicyCall f = PolicyCall.of(failures, "carol");
        PolicyCall e = PolicyCall.of(every, "carol");
        limiter.acquire(java.util.List.of(f, e)).succeeded().close();
        assertEquals(3, limiter.state(failures, "carol").limits().get(0).r());
        assertEquals(4, limiter.state(every, "carol").limits().get(0).r());
        limiter.acquire(java.util.List.of(f, e)).failed().close();
        assertEquals(2, limiter.state(failures, "carol").limits().get(0).r());
        assertEquals(3, limiter.state(every, "carol").limits().get(0).r());

        // Two estimated quotas (clause 0 of each): each settled to its own usage by call, not one clause index for both.
        Policy a = Policy.builder("qa-" + id).limit(dev.redisratelimit.client.Limit.quota("day", java.time.ZoneOffset.UTC,
                dev.redisratelimit.client.QuotaPeriod.DAY, 1_000).estimated()).build();
        Policy b = Policy.builder("qb-" + id).limit(dev.redisratelimit.client.Limit.quota("day", java.time.ZoneOffset.UTC,
                dev.redisratelimit.client.QuotaPeriod.DAY, 1_000).estimated()).build();
        PolicyCall ca = PolicyCall.of(a, "dave").withEstimate(100);
        PolicyCall cb = PolicyCall.of(b, "dave").withEstimate(200);
        Permit p = limiter.acquire(java.util.List.of(ca, cb));
        assertEquals(java.util.List.of(0), p.estimateClauses(ca));
        assertEquals(java.util.List.of(0), p.estimateClauses(cb));
        assertEquals(900, limiter.state(a, "dave").limits().get(0).r());
        assertEquals(800, limiter.state(b, "dave").limits().get(0).r());
        p.closeAsyncByCall(java.util.Map.of(ca, java.util.Map.of(0, 30L), cb, java.util.Map.of(0, 250L))).toCompletableFuture().join();
        assertEquals(970, limiter.state(a, "dave").limits().get(0).r());
        assertEquals(750, limiter.state(b, "dave").limits().get(0).r());
        // Closed with a refusal of the usage report: each estimate stands as its own call charged it.
        Permit q = limiter.acquire(java.util.List.of(ca, cb));
        assertThrows(dev.redisratelimit.client.RateLimitArgumentException.class, () -> q.used(-1));
        q.close();
        assertEquals(870, limiter.state(a, "dave").limits().get(0).r());
        assertEquals(550, limiter.state(b, "dave").limits().get(0).r());
    }
}
