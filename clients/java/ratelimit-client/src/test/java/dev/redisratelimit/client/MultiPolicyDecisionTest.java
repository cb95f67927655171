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
 * Several policies decided for one request ({@link RateLimiter#acquireAsync(List)}):
 * one RL.ALL on one slot; slot by slot with refunds under Cluster; each
 * policy's Redis-down behaviour when Redis does not answer.
 */
class MultiPolicyDecisionTest {

    /** Records every call; answers nothing until the test completes it. */
    static final class Recording implements RateLimitTransport {
        final List<RedisCall> calls = new ArrayList<>();
        final List<CompletableFuture<Object>> pending = new ArrayList<>();

        @Override
        public synchronized CompletionStage<Object> execute(RedisCall call) {
            CompletableFuture<Object> f = new CompletableFuture<>();
            calls.add(call);
            pending.add(f);
            return f;
        }
    }

    Recording transport = new Recording();

    RateLimiter limiter() {
        return new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", 200),
                new RedisAvailability(transport, Duration.ofSeconds(30), Duration.ofMillis(200)), null, "p:",
                Duration.ofMillis(200), FailMode.CLOSED);
    }

    static Policy policy(String name, String limit, long count, FailMode down) {
        return new Policy(name, List.of(RateLimiterRepliesTest.window(limit, count, 60)), null, null, down, false);
    }

    Policy byIp = policy("by-ip", "ip", 3, null);
    Policy byKey = policy("by-key", "key", 2, null);

    static List<Object> admitted(long limit, long remaining) {
        return List.of(0L, 1L, 1L, limit, remaining, -1L, 60_000L, List.of(RateLimiterRepliesTest.rule(0, 1, limit, remaining, -1, 60_000)));
    }

    static List<Object> refused(long limit, long retry) {
        return List.of(1L, 1L, 1L, limit, 0L, retry, 60_000L, List.of(RateLimiterRepliesTest.rule(1, 1, limit, 0, retry, 60_000)));
    }

    // Two caller keys on different slots.
    static String[] twoSlots() {
        String a = "203.0.113.7";
        for (int i = 0;; i++) {
            if (Slots.of("k" + i) != Slots.of(a)) {
                return new String[] {a, "k" + i};
            }
        }
    }

    @Test
    void onOneRedisTwoPoliciesAreOneRlAllWithBothItems() throws Exception {
        String[] k = twoSlots();
        CompletableFuture<Permit> f = limiter().acquireAsync(List.of(new PolicyCall(byIp, k[0], null, null, null),
                new PolicyCall(byKey, k[1], null, null, null))).toCompletableFuture();
        assertThat(transport.calls).hasSize(1);
        RedisCall call = transport.calls.get(0);
        assertThat(call.command()).isEqualTo("RL.ALL");
        assertThat(call.args().subList(0, 3)).containsExactly("2", "p:by-ip:{" + k[0] + "}:ip", "p:by-key:{" + k[1] + "}:key");
        // DETAILS: one array per clause after the seven integers, each holding its rules
        transport.pending.get(0).complete(List.of(0L, 2L, 1L, 2L, 1L, -1L, 60_000L,
                List.of(RateLimiterRepliesTest.rule(0, 1, 3, 2, -1, 60_000)), List.of(RateLimiterRepliesTest.rule(0, 1, 2, 1, -1, 60_000))));
        PolicyDecision d = f.get(1, TimeUnit.SECONDS).decision();
        assertThat(d.admitted()).isTrue();
        assertThat(d.limits()).extracting(LimitState::name).containsExactly("ip", "key");
        assertThat(d.limits()).extracting(LimitState::r).containsExactly(2L, 1L);
        assertThat(d.bindingLimit().name()).isEqualTo("key");
        assertThat(d.policy()).isEqualTo("by-key");
    }

    @Test
    void underClusterEachSlotIsOneRlAllAndTheAdmittingSlotIsRefundedWhenAnotherRefuses() throws Exception {
        String[] k = twoSlots();
        RateLimiter limiter = limiter();
        limiter.setClustered(true);
        CompletableFuture<Permit> f = limiter.acquireAsync(List.of(new PolicyCall(byIp, k[0], null, null, null),
                new PolicyCall(byKey, k[1], null, null, null))).toCompletableFuture();
        assertThat(transport.calls).hasSize(2); // sent together
        assertThat(transport.calls.get(0).args().subList(0, 2)).containsExactly("1", "p:by-ip:{" + k[0] + "}:ip");
        assertThat(transport.calls.get(1).args().subList(0, 2)).containsExactly("1", "p:by-key:{" + k[1] + "}:key");
        transport.pending.get(0).complete(admitted(3, 2));
        assertThat(f).isNotDone();
        transport.pending.get(1).complete(refused(2, 40_000));
        // the IP's slot admitted: given back; its items keep the admission's state, as one server
        // reports the same refusal (CLIENTS.md §5, conformance case d-cluster-refuse-refund)
        assertThat(transport.calls).hasSize(3);
        RedisCall refund = transport.calls.get(2);
        assertThat(refund.args()).startsWith("1", "p:by-ip:{" + k[0] + "}:ip").contains("REFUND");
        assertThat(f).isNotDone();
        transport.pending.get(2).complete(admitted(3, 3));
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class, () -> f.get(1, TimeUnit.SECONDS));
        PolicyDecision d = ((RateLimitRefusedException) e.getCause()).getDecision();
        assertThat(d.admitted()).isFalse();
        assertThat(d.bindingLimit().name()).isEqualTo("key");
        assertThat(d.retryAfterMs()).isEqualTo(40_000);
        assertThat(d.limits()).extracting(LimitState::r).containsExactly(2L, 0L);
    }

    @Test
    void underClusterTheBindingClauseIsChosenAcrossSlots() throws Exception {
        String[] k = twoSlots();
        RateLimiter limiter = limiter();
        limiter.setClustered(true);
        CompletableFuture<Permit> f = limiter.acquireAsync(List.of(new PolicyCall(byIp, k[0], null, null, null),
                new PolicyCall(byKey, k[1], null, null, null))).toCompletableFuture();
        transport.pending.get(0).complete(admitted(3, 0)); // the fewest left binds
        transport.pending.get(1).complete(admitted(2, 1));
        PolicyDecision d = f.get(1, TimeUnit.SECONDS).decision();
        assertThat(transport.calls).hasSize(2); // no refund
        assertThat(d.bindingLimit().name()).isEqualTo("ip");
        assertThat(d.limits()).extracting(LimitState::r).containsExactly(0L, 1L);
    }

    @Test
    void redisDownAppliesEachPolicysBehaviourAndOneFailClosedAnswers503() throws Exception {
        Policy open = policy("open", "o", 3, FailMode.OPEN);
        Policy local = policy("local", "l", 1, FailMode.LOCAL);
        Policy closed = policy("closed", "c", 3, FailMode.CLOSED);
        RateLimiter limiter = limiter();
        Permit p = limiter.acquireAsync(List.of(new PolicyCall(open, "a", null, null, null),
                new PolicyCall(local, "a", null, null, null))).toCompletableFuture().get(5, TimeUnit.SECONDS);
        // past the budget: let through by 'open', decided by 'local' on the local backend (its decision, its headers)
        assertThat(p.decision().policy()).isEqualTo("local");
        assertThat(p.decision().limits()).extracting(LimitState::r).containsExactly(0L);
        CompletableFuture<Permit> second = limiter.acquireAsync(List.of(new PolicyCall(open, "a", null, null, null),
                new PolicyCall(local, "a", null, null, null))).toCompletableFuture();
        assertThat(second).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(RateLimitRefusedException.class); // the local window of 1 is full
        CompletableFuture<Permit> third = limiter.acquireAsync(List.of(new PolicyCall(open, "b", null, null, null),
                new PolicyCall(closed, "b", null, null, null))).toCompletableFuture();
        assertThat(third).failsWithin(5, TimeUnit.SECONDS).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(RateLimitUnavailableException.class);
    }
}
