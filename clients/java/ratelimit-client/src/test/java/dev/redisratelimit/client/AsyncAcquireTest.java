package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link RateLimiter#acquireAsync}: it returns before Redis answers (the
 * caller's thread never waits), completes when the reply comes, and past the
 * decision budget applies the Redis-down behaviour through a timeout; the
 * sync {@code acquire} is the same path, waited for.
 */
class AsyncAcquireTest {

    /** Answers nothing until the test completes the pending replies. */
    static final class Pending implements RateLimitTransport {
        final List<CompletableFuture<Object>> pending = new ArrayList<>();

        @Override
        public synchronized CompletionStage<Object> execute(RedisCall call) {
            CompletableFuture<Object> f = new CompletableFuture<>();
            pending.add(f);
            return f;
        }
    }

    Pending transport = new Pending();

    RateLimiter limiter(FailMode down) {
        return new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", 200),
                new RedisAvailability(transport, Duration.ofSeconds(30), Duration.ofMillis(200)), null, "p:",
                Duration.ofMillis(200), down);
    }

    Policy policy = new Policy("sms", List.of(RateLimiterRepliesTest.window("short", 2, 10)), null, null, null, false);

    @Test
    void returnsBeforeTheReplyAndCompletesWithIt() throws Exception {
        CompletableFuture<Permit> f = limiter(FailMode.CLOSED).acquireAsync(new PolicyCall(policy, "1", null, new long[] {1}, null))
                .toCompletableFuture();
        assertThat(f).isNotDone();
        assertThat(transport.pending).hasSize(1);
        transport.pending.get(0).complete(List.of(0L, 1L, 2L, 1L, -1L, 10_000L));
        Permit p = f.get(1, TimeUnit.SECONDS);
        assertThat(p.decision().admitted()).isTrue();
        assertThat(p.decision().limits()).extracting(LimitState::r).containsExactly(1L);
    }

    @Test
    void pastTheBudgetTheRedisDownBehaviourAnswersThroughATimeout() throws Exception {
        long t0 = System.nanoTime();
        CompletableFuture<Permit> open = limiter(FailMode.OPEN).acquireAsync(new PolicyCall(policy, "1", null, new long[] {1}, null))
                .toCompletableFuture();
        assertThat(open).isNotDone();
        Permit p = open.get(5, TimeUnit.SECONDS);
        assertThat(p.decision()).isNull(); // let through, nothing decided
        assertThat(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)).isGreaterThanOrEqualTo(200);

        CompletableFuture<Permit> closed = limiter(FailMode.CLOSED).acquireAsync(new PolicyCall(policy, "1", null, new long[] {1}, null))
                .toCompletableFuture();
        assertThat(closed).isNotDone();
        assertThat(closed).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(java.util.concurrent.ExecutionException.class)
                .withCauseInstanceOf(RateLimitUnavailableException.class);
    }

    @Test
    void aRefusalFailsTheStageAndTheSyncAcquireThrowsIt() {
        RateLimiter limiter = limiter(FailMode.CLOSED);
        CompletableFuture<Permit> f = limiter.acquireAsync(new PolicyCall(policy, "1", null, new long[] {1}, null)).toCompletableFuture();
        transport.pending.get(0).complete(List.of(1L, 1L, 2L, 0L, 4000L, 10_000L));
        assertThat(f).isCompletedExceptionally();
        CompletionException e = org.junit.jupiter.api.Assertions.assertThrows(CompletionException.class, f::join);
        assertThat(e.getCause()).isInstanceOf(RateLimitRefusedException.class);
        assertThat(((RateLimitRefusedException) e.getCause()).getDecision().retryAfterMs()).isEqualTo(4000);
    }
}
