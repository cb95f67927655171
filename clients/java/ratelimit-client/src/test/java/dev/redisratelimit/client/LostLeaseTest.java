package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A decision with a lease whose reply is lost (the connection reset, the
 * driver's command timeout): Redis may have run it, so the lease is released
 * by the token the client chose once Redis answers again (CLIENTS.md §3),
 * never held until its TTL. The real-server case (SIGSTOP past Lettuce's
 * command timeout) is ratelimit-it's LostLeaseReleaseTest.
 */
class LostLeaseTest {

    /** Answers PING and RL.RELEASE; holds the other calls until the test completes them. */
    static final class Transport implements RateLimitTransport {
        final List<List<String>> sent = new ArrayList<>();
        final List<CompletableFuture<Object>> held = new ArrayList<>();
        volatile boolean up = true;

        @Override
        public synchronized CompletionStage<Object> execute(RedisCall call) {
            List<String> c = new ArrayList<>();
            c.add(call.command());
            c.addAll(call.args());
            sent.add(c);
            if (call.command().equals("PING") || call.command().equals("RL.RELEASE")) {
                return up ? CompletableFuture.completedFuture(call.command().equals("PING") ? "PONG" : List.of(1L))
                        : CompletableFuture.failedFuture(new java.io.IOException("Connection refused"));
            }
            CompletableFuture<Object> f = new CompletableFuture<>();
            held.add(f);
            return f;
        }

        synchronized List<List<String>> releases() {
            return sent.stream().filter(c -> c.get(0).equals("RL.RELEASE")).toList();
        }

        synchronized List<String> first() {
            return sent.get(0);
        }
    }

    final Transport transport = new Transport();
    final Limit inflight = new Limit("inflight", Limit.Kind.CONCURRENCY, 2, null, 0, null, null, Duration.ofSeconds(60), null, false, null, null);
    final Policy both = new Policy("llm", List.of(inflight, RateLimiterRepliesTest.window("minute", 10, 60)), null, null, null, false);
    final Policy leaseOnly = new Policy("jobs", List.of(inflight), null, null, null, false);

    RateLimiter limiter(long budgetMs) {
        return new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", budgetMs),
                new RedisAvailability(transport, Duration.ofMillis(50), Duration.ofMillis(budgetMs)), null, "p:",
                Duration.ofMillis(budgetMs), FailMode.CLOSED);
    }

    @Test
    void aConnectionResetWithinTheBudgetReleasesTheLeaseByTokenOnceRedisAnswers() throws Exception {
        RateLimiter limiter = limiter(5_000);
        transport.up = false;
        CompletableFuture<Permit> f = limiter.acquireAsync(new PolicyCall(both, "k", null, new long[] {1, 1}, null)).toCompletableFuture();
        transport.held.get(0).completeExceptionally(new java.io.IOException("Connection reset by peer"));
        assertThat(f).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(RateLimitUnavailableException.class);
        List<String> all = transport.first();
        String token = all.get(all.indexOf("TOKEN") + 1);
        assertThat(limiter.lostLeasesWaiting()).isEqualTo(1);
        Thread.sleep(200); // the circuit is open and Redis still refuses: the release waits
        assertThat(limiter.lostLeasesWaiting()).isEqualTo(1);

        transport.up = true;
        List<String> release = awaitRelease();
        assertThat(release).contains("p:llm:{k}:inflight", token);
        assertThat(limiter.lostLeasesWaiting()).isZero();
    }

    @Test
    void aReplyLostAfterTheBudgetReleasesTheLeaseWithoutACircuitOpen() throws Exception {
        RateLimiter limiter = limiter(100);
        CompletableFuture<Permit> f = limiter.acquireAsync(new PolicyCall(leaseOnly, "k", null, null, null)).toCompletableFuture();
        assertThat(f).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(RateLimitUnavailableException.class);
        List<String> lease = transport.first();
        assertThat(lease.get(0)).isEqualTo("RL.LEASE");
        assertThat(transport.releases()).isEmpty();

        // The driver gives the reply up (its command timeout): Redis may have run the RL.LEASE.
        transport.held.get(0).completeExceptionally(new TimeoutExceptionOfTheDriver());
        List<String> release = awaitRelease();
        assertThat(release).contains("p:jobs:{k}:inflight", lease.get(lease.indexOf("TOKEN") + 1));
    }

    @Test
    void anErrorReplyRanNothingAndReleasesNothing() throws Exception {
        RateLimiter limiter = limiter(5_000);
        CompletableFuture<Permit> f = limiter.acquireAsync(new PolicyCall(leaseOnly, "k", null, null, null)).toCompletableFuture();
        transport.held.get(0).completeExceptionally(new RateLimitException("ERR wrong number of arguments"));
        assertThat(f).failsWithin(5, TimeUnit.SECONDS);
        Thread.sleep(200);
        assertThat(limiter.lostLeasesWaiting()).isZero();
        assertThat(transport.releases()).isEmpty();
    }

    private List<String> awaitRelease() throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (transport.releases().isEmpty()) {
            assertThat(System.nanoTime()).as("RL.RELEASE sent once Redis answers").isLessThan(until);
            Thread.sleep(10);
        }
        return transport.releases().get(0);
    }

    /** What Lettuce's RedisCommandTimeoutException is to the core: a driver failure, not a reply. */
    static final class TimeoutExceptionOfTheDriver extends RuntimeException {
        TimeoutExceptionOfTheDriver() {
            super("Command timed out after 10 second(s)");
        }
    }
}
