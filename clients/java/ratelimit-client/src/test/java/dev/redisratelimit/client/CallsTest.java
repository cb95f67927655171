package dev.redisratelimit.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The exact arguments each call sends, and the replies read back (no server: the wire form by SPEC). */
class CallsTest {

    private static final Options AT = Options.none().withNow(Instant.ofEpochMilli(1000));

    private static List<String> words(Call<?> call) {
        List<String> out = new java.util.ArrayList<>();
        out.add(call.command().command());
        out.addAll(call.command().args());
        return out;
    }

    @Test
    void argumentsAsTheModuleReadsThem() {
        assertEquals(List.of("RL.CHECK", "k", "*", "2", "1000", "5", "3600000"),
                words(Calls.check("k", List.of(SlidingWindow.of(2, Duration.ofSeconds(1)), SlidingWindow.of(5, Duration.ofHours(1))), Options.none())));
        assertEquals(List.of("RL.CHECK", "k", "1000", "2", "1000", "COST", "50", "DEBIT"),
                words(Calls.check("k", List.of(SlidingWindow.of(2, Duration.ofSeconds(1))), AT.withCost(50).withDebit())));
        assertEquals(List.of("RL.THROTTLE", "k", "*", "20", "10", "1000", "RESERVE", "0"),
                words(Calls.throttle("k", List.of(TokenBucket.of(10, Duration.ofSeconds(1), 20)), Options.none().withReserve(Duration.ZERO))));
        assertEquals(List.of("RL.QUOTA", "k", "*", "+05:30", "DAY", "100", "HOUR", "0", "REFUND"),
                words(Calls.quota("k", ZoneOffset.ofHoursMinutes(5, 30), List.of(QuotaLimit.of(QuotaPeriod.DAY, 100), QuotaLimit.of(QuotaPeriod.HOUR, 0)),
                        Options.none().withRefund())));
        assertEquals("+00:00", Calls.quota("k", ZoneId.of("Z"), List.of(QuotaLimit.of(QuotaPeriod.DAY, 1)), Options.none()).command().args().get(2));
        assertEquals("-03:00", Calls.quota("k", ZoneId.of("UTC-03:00"), List.of(QuotaLimit.of(QuotaPeriod.DAY, 1)), Options.none()).command().args().get(2));
        assertEquals("Europe/Paris", Calls.quota("k", ZoneId.of("Europe/Paris"), List.of(QuotaLimit.of(QuotaPeriod.DAY, 1)), Options.none()).command().args().get(2));
        assertEquals(List.of("RL.LEASE", "k", "1000", "3", "30000", "TOKEN", "job-7", "COST", "2"),
                words(Calls.lease("k", 3, Duration.ofSeconds(30), AT.withCost(2).withToken("job-7"))));
        assertEquals(List.of("RL.RENEW", "k", "*", "5000", "a", "b"), words(Calls.renew("k", Duration.ofSeconds(5), List.of("a", "b"), Options.none())));
        assertEquals(List.of("RL.DAYHOUR", "d", "h", "10", "2", "86400000", "3600000"),
                words(Calls.dayhour("d", "h", 10, 2, Duration.ofDays(1), Duration.ofHours(1))));
        assertEquals(List.of("RL.LOCKCOUNT", "l", "c", "60000", "5", "900000"),
                words(Calls.lockcount("l", "c", Duration.ofMinutes(1), 5, Duration.ofMinutes(15))));
        Call<AllDecision> all = Calls.all(List.of(Clause.check("{u}:w", SlidingWindow.of(2, Duration.ofSeconds(10))),
                Clause.lease("{u}:l", 2, Duration.ofSeconds(30), "r1").withCost(2)), Options.none().withRefund().withDetails());
        assertEquals(List.of("RL.ALL", "2", "{u}:w", "{u}:l", "*", "CHECK", "1", "2", "10000", "LEASE", "2", "2", "30000", "TOKEN", "r1",
                "COST", "2", "REFUND", "DETAILS"), words(all));
        assertEquals("{u}:w", all.command().routingKey(), "RL.ALL routes by its first key");
        assertEquals(-1, Calls.moduleLoaded().command().keyIndex());
    }

    @Test
    void decisionsFromReplies() {
        Decision d = Replies.decision(List.of(1L, 2L, 5L, 0L, 1500L, 60000L));
        assertTrue(d.limited());
        assertEquals(2, d.rule());
        assertEquals(Duration.ofMillis(1500), d.retryAfter().orElseThrow());
        assertFalse(d.waitingCannotHelp());
        Decision never = Replies.decision(List.of(1L, 1L, 0L, 0L, -1L, 3600000L));
        assertTrue(never.waitingCannotHelp());
        assertTrue(never.retryAfter().isEmpty());
        Decision admitted = Replies.decision(List.of(0L, 1L, 5L, 4L, -1L, 1000L));
        assertFalse(admitted.waitingCannotHelp());
        java.util.ArrayList<Object> leaseReply = new java.util.ArrayList<>(List.of(1L, 1L, 2L, 0L, 700L, 900L));
        leaseReply.add(null);
        assertTrue(Replies.lease(leaseReply).token().isEmpty());
        assertThrows(RateLimitException.class, () -> Replies.decision(List.of(1L, 2L)));
        assertThrows(RateLimitException.class, () -> Replies.decision("OK"));
    }

    @Test
    void detailsAsSpecShapesThem() {
        // SPEC: seven integers, then one array per clause, one six-integer array per rule
        List<Object> reply = List.of(1L, 1L, 1L, 2L, 0L, 4000L, 10000L,
                List.of(List.of(1L, 1L, 2L, 0L, 4000L, 10000L), List.of(0L, 2L, 5L, 3L, -1L, 3600000L)),
                List.of(List.of(0L, 1L, 2L, 2L, -1L, 0L)));
        AllDecision all = Replies.all(reply, true);
        assertTrue(all.limited());
        assertEquals(1, all.clause());
        assertEquals(1, all.rule());
        assertEquals(Duration.ofSeconds(4), all.retryAfter().orElseThrow());
        assertEquals(2, all.details().size());
        assertEquals(2, all.details().get(0).size());
        RuleState hourly = all.details().get(0).get(1);
        assertEquals(List.of(false, 2, 5L, 3L, -1L, 3600000L),
                List.of(hourly.limited(), hourly.rule(), hourly.limit(), hourly.remaining(), hourly.retryAfterMillis(), hourly.resetAfterMillis()));
        // the binding clause's binding rule equals the seven integers less the clause index
        RuleState binding = all.details().get(all.clause() - 1).get(all.rule() - 1);
        assertEquals(List.of(binding.limited(), binding.limit(), binding.remaining(), binding.retryAfterMillis(), binding.resetAfterMillis()),
                List.of(all.limited(), all.limit(), all.remaining(), all.retryAfterMillis(), all.resetAfterMillis()));
        AllDecision plain = Replies.all(reply.subList(0, 7), false);
        assertFalse(plain.hasDetails());
        assertEquals(List.of(), plain.details());
    }

    @Test
    void tokenBucketRanges() {
        assertThrows(IllegalArgumentException.class, () -> new TokenBucket(1, 2_000_000, Duration.ofMillis(1)), "under 1 ns per unit");
        assertThrows(IllegalArgumentException.class, () -> new TokenBucket(Long.MAX_VALUE / 2, 1, Duration.ofDays(365)), "refills past 2^53-1 ms");
        assertThrows(IllegalArgumentException.class, () -> Options.none().withToken(""));
        assertThrows(IllegalArgumentException.class, () -> Calls.check("k", List.of(SlidingWindow.of(1, Duration.ofSeconds(1))),
                Options.none().withNow(Instant.ofEpochMilli(-1))));
    }
}
