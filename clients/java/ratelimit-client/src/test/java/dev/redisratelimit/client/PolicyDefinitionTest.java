package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.time.ZoneId;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What a policy may hold (the Python client's refusals are the rule for all
 * three, CLIENTS.md §2), how its limits group into clauses and name their
 * keys, and the argv one decision sends — through the registry's
 * programmatic API by policy name.
 */
class PolicyDefinitionTest {

    static final Duration MINUTE = Duration.ofMinutes(1);
    static final ZoneId UTC = ZoneId.of("UTC");

    @Test
    void refusedDefinitionsNameWhatIsWrong() {
        assertThatThrownBy(() -> Policy.builder("p").tokenBucket("a", 10, MINUTE, 10).tokenBucket("b", 20, MINUTE, 20).build())
                .hasMessageContaining("token buckets 'a' and 'b' have the same period");
        assertThatThrownBy(() -> Policy.builder("p").quota("d1", UTC, QuotaPeriod.DAY, 10).quota("d2", UTC, QuotaPeriod.DAY, 20).build())
                .hasMessageContaining("quotas 'd1' and 'd2' have the same period");
        assertThatThrownBy(() -> Policy.builder("p").concurrency("a", 1, MINUTE).concurrency("b", 2, MINUTE).build())
                .hasMessageContaining("at most one per-key concurrency limit");
        assertThatThrownBy(() -> Policy.builder("p").limit(Limit.slidingWindow("all", 5, MINUTE).asShared()).build())
                .hasMessageContaining("a shared limit needs the policy's tag");
        assertThatThrownBy(() -> Policy.builder("p").slidingWindow("a", 1, MINUTE).tag("x{y").build()).hasMessageContaining("tag");
        assertThatThrownBy(() -> Policy.builder("p{").slidingWindow("a", 1, MINUTE).build()).hasMessageContaining("braces");
        assertThatThrownBy(() -> RateLimiter.builder(new Recording()).prefix("rl{")).hasMessageContaining("prefix");
        // a quota of another zone, a bucket of another period: another clause or the same one, never a refusal
        Policy ok = Policy.builder("p").tokenBucket("a", 10, MINUTE, 10).tokenBucket("b", 100, Duration.ofHours(1), 100)
                .quota("d", UTC, QuotaPeriod.DAY, 10).quota("h", UTC, QuotaPeriod.HOUR, 5).quota("paris", ZoneId.of("Europe/Paris"), QuotaPeriod.DAY, 7)
                .build();
        assertThat(ok.clauses()).extracting(PolicyClause::keyName).containsExactly("a", "d", "paris");
    }

    @Test
    void aRefusalNamesItsFieldAsTheOtherClientsDo() {
        // RateLimitArgumentException.field(): Python's and Node's error.field (the golden cases compare it too)
        assertThatThrownBy(() -> Limit.lockout("login", 5, MINUTE, Duration.ZERO)).isInstanceOf(RateLimitArgumentException.class)
                .extracting(e -> ((RateLimitArgumentException) e).field()).isEqualTo("lock_time");
        assertThatThrownBy(() -> Limit.tokenBucket("b", 0, MINUTE, 5)).extracting(e -> ((RateLimitArgumentException) e).field())
                .isEqualTo("rate");
        assertThatThrownBy(() -> Policy.builder("p").slidingWindow("a", 1, MINUTE).slidingWindow("a", 2, MINUTE).build())
                .extracting(e -> ((RateLimitArgumentException) e).field()).isEqualTo("limit_name");
        // a quota without a zone is a definition; each call names the zone, a call without one is refused before sending
        Recording redis = new Recording();
        Policy perCall = Policy.builder("q").quota("day", null, QuotaPeriod.DAY, 10).build();
        try (RateLimiter limiter = RateLimiter.builder(redis).refreshInterval(Duration.ofHours(1)).policy(perCall).build()) {
            redis.sent.clear();
            assertThatThrownBy(() -> limiter.acquire(PolicyCall.of(perCall, "u1"))).isInstanceOf(RateLimitArgumentException.class)
                    .extracting(e -> ((RateLimitArgumentException) e).field()).isEqualTo("zone");
            assertThat(redis.sent).isEmpty();
            redis.next = List.of(0L, 1L, 10L, 9L, -1L, 60_000L);
            limiter.acquire(PolicyCall.of(perCall, "u1").withZone("Europe/Paris")).close();
            assertThat(redis.sent.get(0)).containsExactly("RL.QUOTA", "q:{u1}:day", "*", "Europe/Paris", "DAY", "10");
        }
    }

    @Test
    void aClauseIsKeyedByItsFirstLimitAndOneClauseOfOneRuleIsItsOwnCommand() {
        Recording redis = new Recording();
        try (RateLimiter limiter = RateLimiter.builder(redis).refreshInterval(Duration.ofHours(1))
                .policy(Policy.builder("sms").slidingWindow("short", 2, Duration.ofSeconds(10)).slidingWindow("long", 5, Duration.ofHours(1))
                        .build())
                .policy(Policy.builder("one").slidingWindow("w", 3, MINUTE).build())
                .policy(Policy.builder("rate").tokenBucket("b", 10, Duration.ofSeconds(1), 20).build())
                .policy(Policy.builder("jobs").concurrency("inflight", 2, MINUTE).build())
                .policy(Policy.builder("api").slidingWindow("per", 5, MINUTE).limit(Limit.slidingWindow("all", 100, MINUTE).asShared())
                        .tag("api").build())
                .build()) {
            redis.sent.clear(); // the runtime limits' first read
            redis.next = List.of(0L, 1L, 1L, 2L, 1L, -1L, 10_000L, List.of(List.of(0L, 1L, 2L, 1L, -1L, 10_000L),
                    List.of(0L, 2L, 5L, 4L, -1L, 3_600_000L)));
            limiter.acquire("sms", "u1").close();
            assertThat(redis.sent.get(0)).containsExactly("RL.ALL", "1", "sms:{u1}:short", "*", "CHECK", "1", "2", "10000", "5",
                    "3600000", "DETAILS");
            redis.next = List.of(0L, 1L, 3L, 2L, -1L, 60_000L);
            PolicyDecision d = limiter.acquire("one", "u1").decision();
            assertThat(redis.sent.get(1)).containsExactly("RL.CHECK", "one:{u1}:w", "*", "3", "60000");
            assertThat(d.limits()).containsExactly(new LimitState("w", 3, 60, 2, 60, false, -1));
            redis.next = List.of(0L, 1L, 20L, 19L, -1L, 100L);
            limiter.acquire("rate", "u1");
            assertThat(redis.sent.get(2)).containsExactly("RL.THROTTLE", "rate:{u1}:b", "*", "20", "10", "1000");
            redis.next = java.util.Arrays.asList(0L, 1L, 2L, 1L, -1L, 60_000L, null);
            Permit lease = limiter.acquire("jobs", "u1");
            List<Object> sent = redis.sent.get(3);
            assertThat(sent.subList(0, 6)).containsExactly("RL.LEASE", "jobs:{u1}:inflight", "*", "2", "60000", "TOKEN");
            String token = (String) sent.get(6);
            redis.next = List.of(1L);
            lease.close();
            assertThat(redis.sent.get(4)).containsExactly("RL.RELEASE", "jobs:{u1}:inflight", "*", token);
            redis.next = List.of(0L, 1L, 1L, 5L, 4L, -1L, 60_000L, List.of(List.of(0L, 1L, 5L, 4L, -1L, 60_000L)),
                    List.of(List.of(0L, 1L, 100L, 99L, -1L, 60_000L)));
            limiter.acquire("api", "u1");
            assertThat(redis.sent.get(5).subList(0, 4)).containsExactly("RL.ALL", "2", "api:{api}:u1:per", "api:{api}:all");
        }
    }

    /** Records each call; answers the reply the test set (a PING or HGETALL: an empty one). */
    static final class Recording implements RateLimitTransport {
        final List<List<Object>> sent = new java.util.ArrayList<>();
        volatile Object next = List.of();

        @Override
        public synchronized java.util.concurrent.CompletionStage<Object> execute(RedisCall call) {
            List<Object> c = new java.util.ArrayList<>();
            c.add(call.command());
            c.addAll(call.args());
            if (!call.command().equals("HGETALL")) {
                sent.add(c);
            }
            return java.util.concurrent.CompletableFuture.completedFuture(call.command().equals("HGETALL") ? List.of() : next);
        }
    }
}
