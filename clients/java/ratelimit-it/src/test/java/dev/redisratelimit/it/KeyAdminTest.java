package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Key administration over a real Redis, as the Python and Node clients': state, reset, penalty, reward. */
@ExtendWith(RedisServers.class)
class KeyAdminTest {

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

    static Map<String, Long> remaining(PolicyDecision d) {
        Map<String, Long> out = new HashMap<>();
        for (LimitState s : d.limits()) {
            out.put(s.name(), s.r());
        }
        return out;
    }

    @Test
    void stateResetPenaltyReward() {
        Policy p = Policy.builder("adm-" + UUID.randomUUID()).limits("5/minute").quota("day", java.time.ZoneOffset.UTC,
                dev.redisratelimit.client.QuotaPeriod.DAY, 100).build();
        assertEquals(Map.of("5-per-1m", 5L, "day", 100L), remaining(limiter.state(p, "u1")));
        for (int i = 0; i < 2; i++) {
            try (Permit permit = limiter.acquire(dev.redisratelimit.client.PolicyCall.of(p, "u1"))) {
                assertTrue(permit.decision().admitted());
            }
        }
        assertEquals(Map.of("5-per-1m", 3L, "day", 98L), remaining(limiter.state(p, "u1")));
        assertEquals(Map.of("5-per-1m", 0L, "day", 95L), remaining(limiter.penalty(p, "u1", 3)));
        assertThrows(RateLimitRefusedException.class, () -> limiter.acquire(dev.redisratelimit.client.PolicyCall.of(p, "u1")));
        assertEquals(Map.of("5-per-1m", 1L, "day", 96L), remaining(limiter.reward(p, "u1", 1)));
        assertEquals(2, limiter.reset(p, "u1"));
        assertEquals(Map.of("5-per-1m", 5L, "day", 100L), remaining(limiter.state(p, "u1")));
        assertThrows(IllegalArgumentException.class, () -> limiter.penalty(p, "u1", 10_001));
    }

    @Test
    void resetUnlocksALockout() {
        Policy p = Policy.builder("lock-" + UUID.randomUUID()).lockout("fails", 3, Duration.ofMinutes(1), Duration.ofMinutes(10)).build();
        for (int i = 0; i < 4; i++) {
            try {
                limiter.acquire(dev.redisratelimit.client.PolicyCall.of(p, "alice")).close();
            } catch (RateLimitRefusedException refused) {
                // the fourth locks
            }
        }
        PolicyDecision locked = limiter.state(p, "alice");
        assertFalse(locked.admitted());
        assertTrue(locked.retryAfterMs() > 590_000);
        assertTrue(limiter.reset(p, "alice") >= 1);
        PolicyDecision open = limiter.state(p, "alice");
        assertTrue(open.admitted());
        assertEquals(3, open.limits().get(0).r());
        assertThrows(IllegalArgumentException.class, () -> limiter.penalty(p, "alice", 1));
    }
}
