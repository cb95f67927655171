package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * CLIENTS.md §3: a single budget overrun (one slow reply: a GC pause, a busy
 * machine) does not open a circuit — the request it delays gets the Redis-down
 * mode, the next one is decided by Redis; {@value RedisAvailability#OVERRUNS}
 * overruns in a row do open it (the same in Python and Node).
 */
class OverrunCircuitTest {

    /** Answers each RL call at once, or holds it unanswered (past the budget) when told to. */
    static final class Stalling implements RateLimitTransport {
        final List<String> decisions = new ArrayList<>();
        volatile boolean stall;

        @Override
        public synchronized CompletionStage<Object> execute(RedisCall call) {
            if (!call.command().startsWith("RL.")) {
                return CompletableFuture.completedFuture("PONG"); // the probe's PING (not reached: 30 s interval)
            }
            decisions.add(call.command());
            // RL.CHECK's six integers: admitted, rule 1, limit 10, 9 left, no retry, reset 60 s
            return stall ? new CompletableFuture<>() : CompletableFuture.completedFuture(List.of(0L, 1L, 10L, 9L, -1L, 60000L));
        }

        synchronized int sent() {
            return decisions.size();
        }
    }

    final Stalling transport = new Stalling();
    final RedisAvailability availability = new RedisAvailability(transport, Duration.ofSeconds(30), Duration.ofMillis(100));
    final RateLimiter limiter = new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", 100),
            availability, null, "p:", Duration.ofMillis(100), FailMode.CLOSED);
    final Policy policy = new Policy("once", List.of(RateLimiterRepliesTest.window("w", 10, 60)), null, null, null, false);

    @AfterEach
    void close() {
        availability.close();
    }

    /** A decision Redis makes: sent, and answered with its remaining count. */
    private void decidedByRedis() {
        int before = transport.sent();
        Permit p = limiter.acquire(PolicyCall.of(policy, "k"));
        assertThat(p.decision()).isNotNull();
        assertThat(p.decision().limits().get(0).r()).isEqualTo(9);
        assertThat(transport.sent()).isEqualTo(before + 1);
        assertThat(availability.isDown()).isFalse();
    }

    /** A decision whose reply does not come within the budget: the Redis-down mode (closed: unavailable). */
    private void overruns() {
        transport.stall = true;
        try {
            int before = transport.sent();
            assertThatThrownBy(() -> limiter.acquire(PolicyCall.of(policy, "k"))).isInstanceOf(RateLimitUnavailableException.class);
            assertThat(transport.sent()).isEqualTo(before + 1); // it was sent: Redis was slow, not skipped
        } finally {
            transport.stall = false;
        }
    }

    @Test
    void oneOverrunDoesNotOpenTheCircuitThreeInARowDo() {
        decidedByRedis();
        overruns();
        decidedByRedis(); // the very next decision: straight back to Redis, the circuit stayed closed

        overruns();
        overruns();
        decidedByRedis(); // two, then an answer: the count starts again

        overruns();
        overruns();
        assertThat(availability.isDown()).isFalse();
        overruns(); // the third in a row
        assertThat(availability.isDown()).isTrue();
        int before = transport.sent();
        assertThatThrownBy(() -> limiter.acquire(PolicyCall.of(policy, "k"))).isInstanceOf(RateLimitUnavailableException.class);
        assertThat(transport.sent()).isEqualTo(before); // open: the Redis-down mode at once, nothing sent
    }
}
