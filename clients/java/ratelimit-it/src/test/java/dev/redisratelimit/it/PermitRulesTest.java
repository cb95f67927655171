package dev.redisratelimit.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.redisratelimit.client.FailMode;
import dev.redisratelimit.client.Limit;
import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.RateLimitArgumentException;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimitUnavailableException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.math.BigInteger;
import java.time.Duration;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * CLIENTS.md §3 and §4 against a real redis-server: a late reply given back
 * whole for every clause kind; {@code used(n)}'s bounds (the estimate stands
 * when refused, a usage above q counts as q, usage after close is an error);
 * a lease renewed while the work runs past its TTL (and, opted out, not).
 */
@ExtendWith(RedisServers.class)
class PermitRulesTest {

    static String key() {
        return UUID.randomUUID().toString().substring(0, 12);
    }

    static Map<String, Long> remaining(RateLimiter l, Policy p, String key) {
        return l.peek(p, key).limits().stream().collect(Collectors.toMap(LimitState::name, LimitState::r));
    }

    final Policy llm = Policy.builder("llm").limit(Limit.concurrency("inflight", 2, Duration.ofSeconds(60)))
            .limit(Limit.quota("tokens", ZoneOffset.UTC, QuotaPeriod.DAY, 1000).estimated()).build();

    @Test
    void usedOutOfBoundsIsRefusedAndTheEstimateStandsAboveQCountsAsQAfterCloseIsAnError(RedisServers.Standalone server) {
        RedisClient redis = RedisClient.create(server.uri());
        try (LettuceTransport t = LettuceTransport.create(redis);
                RateLimiter l = RateLimiter.builder(t).prefix("used:").policy(llm).build()) {
            String k = key();
            Permit p = l.acquire(PolicyCall.of(llm, k).withEstimate(100));
            for (Runnable bad : List.<Runnable>of(() -> p.used(-1), () -> p.used(Long.MAX_VALUE), () -> p.used((1L << 53)),
                    () -> p.used(new BigInteger("100000000000000000000")), () -> p.used(2.5), () -> p.used(Double.NaN))) {
                assertThatThrownBy(bad::run).isInstanceOf(RateLimitArgumentException.class)
                        .satisfies(e -> assertThat(((RateLimitArgumentException) e).field()).isEqualTo("used"));
            }
            p.close(); // closes normally: the lease released, the estimate (100) stands
            assertThat(remaining(l, llm, k)).containsEntry("tokens", 900L).containsEntry("inflight", 2L);
            assertThatThrownBy(() -> p.used(10)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");

            Permit big = l.acquire(PolicyCall.of(llm, k).withEstimate(100));
            big.used(new BigInteger("5000")); // above the quota's q: counts as q (1000)
            big.close();
            assertThat(remaining(l, llm, k)).containsEntry("tokens", 0L);

            String k2 = key();
            Permit fine = l.acquire(PolicyCall.of(llm, k2).withEstimate(100));
            fine.used(30L);
            fine.close();
            assertThat(remaining(l, llm, k2)).containsEntry("tokens", 970L);
        } finally {
            redis.shutdown();
        }
    }

    @Test
    void aLeaseIsRenewedWhileTheWorkRunsPastItsTtlAndNotWhenOptedOut(RedisServers.Standalone server) throws Exception {
        Policy one = Policy.builder("job").limit(Limit.concurrency("slot", 1, Duration.ofMillis(900))).build();
        RedisClient redis = RedisClient.create(server.uri());
        try (LettuceTransport t = LettuceTransport.create(redis);
                RateLimiter l = RateLimiter.builder(t).prefix("renew:").budget(Duration.ofSeconds(2)).policy(one).build()) {
            String k = key();
            try (Permit p = l.acquire(PolicyCall.of(one, k))) {
                Thread.sleep(2_500); // nearly three TTLs
                assertThatThrownBy(() -> l.acquire(PolicyCall.of(one, k))).as("the slot is still held")
                        .isInstanceOf(RateLimitRefusedException.class);
            }
            l.acquire(PolicyCall.of(one, k)).close(); // released at close

            l.setRenewLeases(false);
            String k2 = key();
            Permit held = l.acquire(PolicyCall.of(one, k2));
            Thread.sleep(1_500);
            Permit newcomer = l.acquire(PolicyCall.of(one, k2)); // the old lease expired by its TTL
            newcomer.close();
            held.close();
        } finally {
            redis.shutdown();
        }
    }

    @Test
    void aDecisionAnsweredAfterTheBudgetIsGivenBackWholeForEveryClauseKind(RedisServers.Standalone server) throws Exception {
        List<Policy> policies = List.of(
                Policy.builder("w").slidingWindow("w", 10, Duration.ofMinutes(1)).build(),
                Policy.builder("b").tokenBucket("b", 10, Duration.ofMinutes(1), 10).build(),
                Policy.builder("q").limit(Limit.quota("q", ZoneOffset.UTC, QuotaPeriod.DAY, 1000).estimated()).build(),
                Policy.builder("c").concurrency("c", 2, Duration.ofSeconds(60)).build(),
                Policy.builder("d").preventDuplicates(Duration.ofMinutes(1)).build(),
                // every kind in one RL.ALL
                Policy.builder("all").slidingWindow("w", 10, Duration.ofMinutes(1)).tokenBucket("b", 10, Duration.ofMinutes(1), 10)
                        .limit(Limit.quota("q", ZoneOffset.UTC, QuotaPeriod.DAY, 1000).estimated())
                        .concurrency("c", 2, Duration.ofSeconds(60)).build());
        RedisClient redis = RedisClient.create(server.uri());
        LettuceTransport t = LettuceTransport.create(redis);
        RateLimiter.Builder b = RateLimiter.builder(t).prefix("late:")
                .budget(Duration.ofMillis(300)).probeInterval(Duration.ofMillis(50)).onRedisDown(FailMode.CLOSED);
        policies.forEach(b::policy);
        try (RateLimiter l = b.build()) {
            String k = key();
            Map<String, Map<String, Long>> before = new java.util.HashMap<>();
            for (Policy p : policies) {
                if (!p.name().equals("d")) {
                    before.put(p.name(), remaining(l, p, k));
                }
            }
            // Redis stalls (every client paused) for longer than the budget, then runs what it read.
            server.server().cli("CLIENT", "PAUSE", "1500", "ALL");
            List<CompletableFuture<Permit>> answered = new ArrayList<>();
            for (Policy p : policies) {
                PolicyCall call = PolicyCall.of(p, k);
                call = p.name().equals("d") ? call.withSubkey("body-digest")
                        : p.name().equals("q") || p.name().equals("all") ? call.withEstimate(100) : call;
                answered.add(l.acquireAsync(call).toCompletableFuture());
            }
            for (CompletableFuture<Permit> f : answered) {
                assertThat(f).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(java.util.concurrent.ExecutionException.class)
                        .withCauseInstanceOf(RateLimitUnavailableException.class); // answered 503 within the budget
            }
            // Once Redis has answered (and the give-backs landed), every counter is as if nothing came.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (true) {
                try {
                    boolean same = true;
                    for (Policy p : policies) {
                        if (!p.name().equals("d")) {
                            same &= remaining(l, p, k).equals(before.get(p.name()));
                        }
                    }
                    if (same) {
                        break;
                    }
                } catch (RateLimitUnavailableException circuitStillOpen) {
                    // the overruns opened the circuit: its probe closes it
                }
                assertThat(System.nanoTime()).as("late admissions given back").isLessThan(deadline);
                Thread.sleep(50);
            }
            for (Policy p : policies) {
                if (!p.name().equals("d")) {
                    assertThat(remaining(l, p, k)).as(p.name()).isEqualTo(before.get(p.name()));
                }
            }
            // the duplicate's subkey was given back too: the same body is admitted once more
            l.acquire(PolicyCall.of(policies.get(4), k).withSubkey("body-digest")).close();
        } finally {
            t.close();
            redis.shutdown();
        }
    }
}
