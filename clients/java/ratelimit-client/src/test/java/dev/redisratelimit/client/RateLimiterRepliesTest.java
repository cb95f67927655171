package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.concurrent.CompletionStage;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * The command the limiter sends and how it reads RL.ALL's reply, DETAILS
 * included, against replies shaped as SPEC.md gives them (a transport that
 * records the command and answers a fixed reply).
 */
class RateLimiterRepliesTest {

    static final class Recording implements RateLimitTransport {
        final List<List<Object>> sent = new ArrayList<>();
        final List<Object> replies = new ArrayList<>();

        @Override
        public CompletionStage<Object> execute(RedisCall call) {
            List<Object> c = new ArrayList<>();
            c.add(call.command());
            c.addAll(call.args());
            sent.add(c);
            Object r = replies.isEmpty() ? List.of(0L, 1L, 1L, 1L, -1L, 0L) : replies.remove(0);
            return r instanceof Throwable t ? CompletableFuture.failedFuture(t) : CompletableFuture.completedFuture(r);
        }
    }

    static Limit window(String name, long count, long seconds) {
        return new Limit(name, Limit.Kind.SLIDING_WINDOW, count, Duration.ofSeconds(seconds), 0, null, null, null, null, false, null, null);
    }

    static List<Object> rule(long limited, long rule, long limit, long remaining, long retry, long reset) {
        return List.of(limited, rule, limit, remaining, retry, reset);
    }

    Recording transport = new Recording();
    RateLimiter limiter = new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", 500),
            new RedisAvailability(transport, Duration.ofMillis(100), Duration.ofMillis(100)), null, "p:",
            Duration.ofMillis(500), FailMode.CLOSED);

    Policy sms = new Policy("sms", List.of(window("short", 2, 10), window("long", 5, 3600)), Duration.ofSeconds(5), null, null, false);

    @Test
    void oneRlAllWithDetailsAndEveryItemFromIt() {
        transport.replies.add(List.of(0L, 1L, 1L, 2L, 1L, -1L, 10000L,
                List.of(rule(0, 1, 2, 1, -1, 10000), rule(0, 2, 5, 4, -1, 3600000)),
                List.of(rule(0, 1, 1, 0, -1, 5000))));
        Permit p = limiter.acquire(new PolicyCall(sms, "123", null, new long[] {1, 1}, "abc"));
        assertThat(transport.sent).hasSize(1);
        assertThat(transport.sent.get(0)).containsExactly("RL.ALL", "2", "p:sms:{123}:short", "p:sms:{123}:duplicate:abc", "*",
                "CHECK", "1", "2", "10000", "5", "3600000", "CHECK", "2", "1", "5000", "DETAILS");
        PolicyDecision d = p.decision();
        assertThat(d.admitted()).isTrue();
        assertThat(d.limits()).containsExactly(new LimitState("short", 2, 10, 1, 10, false, -1), new LimitState("long", 5, 3600, 4, 3600, false, -1),
                new LimitState("duplicate", 1, 5, 0, 5, false, -1));
        assertThat(d.bindingLimit().name()).isEqualTo("short");
    }

    @Test
    void aDuplicateRefusalIsTypedDuplicateEvenWhenAnotherRuleBinds() {
        transport.replies.add(List.of(1L, 1L, 1L, 2L, 0L, 9000L, 10000L,
                List.of(rule(1, 1, 2, 0, 9000, 10000), rule(0, 2, 5, 2, -1, 3600000)),
                List.of(rule(1, 1, 1, 0, 4000, 4000))));
        assertThatThrownBy(() -> limiter.acquire(new PolicyCall(sms, "123", null, new long[] {1, 1}, "abc")))
                .isInstanceOfSatisfying(RateLimitRefusedException.class, e -> {
                    PolicyDecision d = e.getDecision();
                    assertThat(d.kind()).isEqualTo(PolicyDecision.Kind.DUPLICATE);
                    assertThat(d.retryAfterMs()).isEqualTo(9000);
                    assertThat(d.bindingLimit().name()).isEqualTo("short");
                    assertThat(d.limits().get(1)).isEqualTo(new LimitState("long", 5, 3600, 2, 3600, false, -1));
                });
    }

    @Test
    void withoutDetailsTheBindingItemAlone() {
        transport.replies.add(new RateLimitException("ERR clause 2 (CHECK): syntax error: unknown option 'DETAILS'"));
        transport.replies.add(List.of(0L, 1L, 2L, 5L, 3L, -1L, 3600000L));
        PolicyDecision d = limiter.acquire(new PolicyCall(sms, "9", null, new long[] {1, 1}, "abc")).decision();
        assertThat(transport.sent.get(1)).doesNotContain("DETAILS");
        assertThat(d.limits()).containsExactly(new LimitState("long", 5, 3600, 3, 3600, false, -1));
    }

    @Test
    void leaseQuotaAndGlobalShareOneTagAndSettleAfterwards() {
        Limit inflight = new Limit("inflight", Limit.Kind.CONCURRENCY, 2, null, 0, null, null, Duration.ofSeconds(60), null, false, null, null);
        Limit tokens = new Limit("tokens", Limit.Kind.QUOTA, 100000, null, 0, QuotaPeriod.DAY, null, null, null, false, "#n", "#u");
        Limit global = new Limit("global", Limit.Kind.SLIDING_WINDOW, 1000, Duration.ofSeconds(60), 0, null, null, null, null, true, null, null);
        Policy llm = new Policy("llm", List.of(inflight, tokens, global), null, "llm", null, false);
        transport.replies.add(List.of(0L, 1L, 1L, 2L, 1L, -1L, 60000L, List.of(rule(0, 1, 2, 1, -1, 60000)),
                List.of(rule(0, 1, 100000, 99000, -1, 3600000)), List.of(rule(0, 1, 1000, 999, -1, 60000))));
        Permit p = limiter.acquire(new PolicyCall(llm, "k", "Asia/Shanghai", new long[] {1, 1000, 1}, null));
        List<Object> all = transport.sent.get(0);
        assertThat(all.subList(0, 6)).containsExactly("RL.ALL", "3", "p:llm:{llm}:k:inflight", "p:llm:{llm}:k:tokens", "p:llm:{llm}:global", "*");
        String token = all.get(all.indexOf("TOKEN") + 1).toString();
        assertThat(all.subList(6, all.size())).containsExactly("LEASE", "1", "2", "60000", "TOKEN", token, "QUOTA", "2", "Asia/Shanghai",
                "DAY", "100000", "COST", "1000", "CHECK", "3", "1000", "60000", "DETAILS");
        transport.replies.add(List.of(1L));
        transport.replies.add(List.of(0L, 1L, 100000L, 99700L, -1L, 3600000L));
        p.close(java.util.Map.of(1, 300L));
        assertThat(transport.sent.get(1)).containsExactly("RL.RELEASE", "p:llm:{llm}:k:inflight", "*", token);
        assertThat(transport.sent.get(2)).containsExactly("RL.QUOTA", "p:llm:{llm}:k:tokens", "*", "Asia/Shanghai", "DAY", "100000", "COST",
                "700", "REFUND");
    }

    @Test
    void settlingAboveTheEstimateDebits() {
        Limit tokens = new Limit("tokens", Limit.Kind.QUOTA, 100, null, 0, QuotaPeriod.DAY, java.time.ZoneId.of("UTC"), null, null, false, "#n", "#u");
        Policy p = new Policy("q", List.of(tokens), null, null, null, false);
        transport.replies.add(List.of(0L, 1L, 100L, 90L, -1L, 1000L)); // one limit: its own command (RL.QUOTA)
        Permit permit = limiter.acquire(new PolicyCall(p, "k", null, new long[] {10}, null));
        assertThat(transport.sent.get(0)).containsExactly("RL.QUOTA", "p:q:{k}:tokens", "*", "UTC", "DAY", "100", "COST", "10");
        assertThat(permit.decision().limits()).containsExactly(new LimitState("tokens", 100, 86400, 90, 1, false, -1));
        permit.close(java.util.Map.of(0, 25L));
        assertThat(transport.sent.get(1)).containsExactly("RL.QUOTA", "p:q:{k}:tokens", "*", "UTC", "DAY", "100", "COST", "15", "DEBIT");
    }
}
