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
 * A decision Redis makes after the budget (a stall, or a command Lettuce
 * re-sends after a reconnect): the request was answered by the Redis-down
 * behaviour already, so an admission that lands late is given back with one
 * RL.ALL ... REFUND of the same clauses — its lease released, its charges
 * and estimate refunded — instead of holding the lease for its TTL.
 */
class LateDecisionGiveBackTest {

    /** Records every call; answers only when the test completes the reply. */
    static final class Held implements RateLimitTransport {
        final List<List<String>> sent = new ArrayList<>();
        final List<CompletableFuture<Object>> replies = new ArrayList<>();

        @Override
        public synchronized CompletionStage<Object> execute(RedisCall call) {
            List<String> c = new ArrayList<>();
            c.add(call.command());
            c.addAll(call.args());
            sent.add(c);
            CompletableFuture<Object> f = new CompletableFuture<>();
            replies.add(f);
            return f;
        }

        synchronized int count() {
            return sent.size();
        }
    }

    final Held transport = new Held();

    RateLimiter limiter(FailMode down) {
        return limiter(down, 150);
    }

    RateLimiter limiter(FailMode down, long budgetMs) {
        return new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", budgetMs),
                new RedisAvailability(transport, Duration.ofSeconds(30), Duration.ofMillis(budgetMs)), null, "p:",
                Duration.ofMillis(budgetMs), down);
    }

    final Limit inflight = new Limit("inflight", Limit.Kind.CONCURRENCY, 2, null, 0, null, null, Duration.ofSeconds(60), null, false, null, null);
    final Policy llm = new Policy("llm", List.of(inflight, RateLimiterRepliesTest.window("minute", 10, 60)), null, null, null, false);

    static List<Object> admitted() {
        return List.of(0L, 1L, 1L, 2L, 1L, -1L, 60000L, List.of(RateLimiterRepliesTest.rule(0, 1, 2, 1, -1, 60000)),
                List.of(RateLimiterRepliesTest.rule(0, 1, 10, 9, -1, 60000)));
    }

    static List<Object> refused() {
        return List.of(1L, 2L, 1L, 10L, 0L, 500L, 60000L, List.of(RateLimiterRepliesTest.rule(0, 1, 2, 1, -1, 60000)),
                List.of(RateLimiterRepliesTest.rule(1, 1, 10, 0, 500, 60000)));
    }

    @Test
    void anAdmissionThatLandsAfterTheBudgetIsGivenBackWithOneRefund() throws Exception {
        CompletableFuture<Permit> f = limiter(FailMode.CLOSED).acquireAsync(new PolicyCall(llm, "k", null, new long[] {1, 1}, null))
                .toCompletableFuture();
        assertThat(f).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(RateLimitUnavailableException.class);
        List<String> decision = transport.sent.get(0);
        assertThat(decision.get(0)).isEqualTo("RL.ALL");
        assertThat(transport.count()).isEqualTo(1);

        transport.replies.get(0).complete(admitted()); // Redis ran it after all

        assertThat(transport.count()).isEqualTo(2);
        List<String> giveBack = transport.sent.get(1);
        // the same clauses (the same lease token), ending in REFUND instead of DETAILS
        assertThat(giveBack).containsExactlyElementsOf(withLast(decision, "REFUND"));
        assertThat(giveBack).contains("TOKEN", decision.get(decision.indexOf("TOKEN") + 1));
    }

    @Test
    void aRefusalThatLandsLateTookNothingAndIsLeftAlone() throws Exception {
        CompletableFuture<Permit> f = limiter(FailMode.OPEN).acquireAsync(new PolicyCall(llm, "k", null, new long[] {1, 1}, null))
                .toCompletableFuture();
        assertThat(f.get(5, TimeUnit.SECONDS).decision()).isNull(); // let through, nothing decided
        transport.replies.get(0).complete(refused());
        assertThat(transport.count()).isEqualTo(1);
    }

    @Test
    void aReplyWithinTheBudgetIsNotGivenBack() throws Exception {
        // a budget no loaded machine overruns between the call and the reply below
        CompletableFuture<Permit> f = limiter(FailMode.CLOSED, 30_000)
                .acquireAsync(new PolicyCall(llm, "k", null, new long[] {1, 1}, null)).toCompletableFuture();
        transport.replies.get(0).complete(admitted());
        assertThat(f.get(5, TimeUnit.SECONDS).decision().admitted()).isTrue();
        assertThat(transport.count()).isEqualTo(1);
    }

    private static List<String> withLast(List<String> call, String last) {
        List<String> out = new ArrayList<>(call.subList(0, call.size() - 1));
        assertThat(call.get(call.size() - 1)).isEqualTo("DETAILS");
        out.add(last);
        return out;
    }
}
