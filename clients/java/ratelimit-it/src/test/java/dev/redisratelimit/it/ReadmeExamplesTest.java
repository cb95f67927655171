package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.Calls;
import dev.redisratelimit.client.Decision;
import dev.redisratelimit.client.Limit;
import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.client.SlidingWindow;
import dev.redisratelimit.client.TokenBucket;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.time.ZoneId;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's examples, as written there (keys made unique per run). */
@ExtendWith(RedisServers.class)
class ReadmeExamplesTest {

    @Test
    void fiveMinutesWithLettuceAndPoliciesAndPipelining(RedisServers.Standalone server) throws Exception {
        String run = UUID.randomUUID().toString();
        RedisClient redis = RedisClient.create(server.uri());
        try (RateLimitClient rl = new RateLimitClient(LettuceTransport.create(redis))) {
            rl.verifyModule();
            Decision d = rl.check("rl:{user:42}:api:" + run,
                    SlidingWindow.of(10, Duration.ofSeconds(1)),
                    SlidingWindow.of(1000, Duration.ofHours(1)));
            assertFalse(d.limited());
            assertEquals(9, d.remaining());
            assertEquals(8, rl.async().check("rl:{user:42}:api:" + run, SlidingWindow.of(10, Duration.ofSeconds(1)))
                    .toCompletableFuture().get().remaining());

            List<Object> replies = rl.pipeline(List.of(
                    Calls.check("rl:{a}" + run, List.of(SlidingWindow.of(5, Duration.ofSeconds(1))), Options.none()),
                    Calls.throttle("rl:{b}" + run, List.of(TokenBucket.of(10, Duration.ofSeconds(1), 10)), Options.none())));
            assertEquals(4, ((Decision) replies.get(0)).remaining());
            assertEquals(9, ((Decision) replies.get(1)).remaining());

            RateLimiter limiter = RateLimiter.builder(LettuceTransport.create(redis))
                    .budget(Duration.ofMillis(500))
                    .policy(Policy.builder("api")
                            .slidingWindow("short", 2, Duration.ofSeconds(10))
                            .slidingWindow("long", 5, Duration.ofHours(1))
                            .quota("daily", ZoneId.of("Europe/Paris"), QuotaPeriod.DAY, 1000)
                            .concurrency("inflight", 2, Duration.ofSeconds(30))
                            .build())
                    .build();
            try (Permit p = limiter.acquire("api", "user:42:" + run)) {
                PolicyDecision pd = p.decision();
                assertEquals(List.of("short", "long", "daily", "inflight"), pd.limits().stream().map(LimitState::name).toList());
                // admitted: the fewest left (short 1, inflight 1), ties to the longer reset (inflight 30 s)
                assertEquals("inflight", pd.bindingLimit().name());
            }

            Policy llm = Policy.builder("llm")
                    .limit(Limit.tokenBucket("tpm", 10_000, Duration.ofMinutes(1), 10_000).estimated())
                    .concurrency("inflight", 4, Duration.ofMinutes(2))
                    .build();
            limiter.register(llm);
            try (Permit p = limiter.acquire(PolicyCall.of(llm, "customer:7:" + run).withEstimate(1_000))) {
                assertTrue(p.decision().admitted());
                p.used(1_200);
            }
            long left = rl.throttlePeek("llm:{customer:7:" + run + "}:tpm", List.of(TokenBucket.of(10_000, Duration.ofMinutes(1), 10_000)),
                    Options.none().withCost(0)).remaining();
            assertTrue(left >= 8_800 && left < 10_000, "1200 used: " + left);
            limiter.close();
        } finally {
            redis.shutdown();
        }
    }
}
