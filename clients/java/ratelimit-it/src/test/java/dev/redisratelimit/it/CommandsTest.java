package dev.redisratelimit.it;

import static dev.redisratelimit.it.support.Raw.assertState;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.AllDecision;
import dev.redisratelimit.client.Clause;
import dev.redisratelimit.client.DayHourDecision;
import dev.redisratelimit.client.Decision;
import dev.redisratelimit.client.LeaseDecision;
import dev.redisratelimit.client.LockoutDecision;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.QuotaLimit;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.SlidingWindow;
import dev.redisratelimit.client.TokenBucket;
import dev.redisratelimit.it.support.Raw;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every command's decision object against the raw reply of the same command
 * written by hand, on a twin key in the same state, at the same explicit
 * {@code now} (so replies are exact), over plain Lettuce.
 */
@ExtendWith(RedisServers.class)
class CommandsTest {

    private static final long T = 1_780_000_000_000L; // a fixed now (2026-05-28T20:26:40Z)
    private static final Instant NOW = Instant.ofEpochMilli(T);
    private static final Options AT = Options.none().withNow(NOW);

    static RedisClient redis;
    static RateLimitClient rl;
    static RateLimitTransport raw;

    @BeforeAll
    static void connect(RedisServers.Standalone server) {
        redis = RedisClient.create(server.uri());
        raw = LettuceTransport.create(redis);
        rl = new RateLimitClient(LettuceTransport.create(redis));
    }

    @AfterAll
    static void close() {
        rl.close();
        raw.close();
        redis.shutdown();
    }

    private static String key(String name) {
        return name + ":" + UUID.randomUUID();
    }

    @Test
    void checkAndPeek() {
        String typed = key("check");
        String hand = key("check-raw");
        List<SlidingWindow> rules = List.of(SlidingWindow.of(2, Duration.ofSeconds(1)), SlidingWindow.of(3, Duration.ofMinutes(1)));
        for (int i = 0; i < 3; i++) {
            Decision d = rl.check(typed, rules, AT);
            List<?> r = Raw.call(raw, "RL.CHECK", hand, Long.toString(T), "2", "1000", "3", "60000");
            assertState(r, d);
        }
        Decision third = rl.peek(typed, rules, AT.withCost(0));
        assertState(Raw.call(raw, "RL.PEEK", hand, Long.toString(T), "2", "1000", "3", "60000", "COST", "0"), third);
        Decision refused = rl.check(typed, rules, AT);
        assertTrue(refused.limited());
        assertEquals(1, refused.rule());
        assertEquals(Duration.ofSeconds(1), refused.retryAfter().orElseThrow());
        assertFalse(refused.waitingCannotHelp());
        Decision first = rl.check(key("check"), rules, AT);
        assertEquals(List.of(false, 1, 2L, 1L, -1L, 1000L),
                List.of(first.limited(), first.rule(), first.limit(), first.remaining(), first.retryAfterMillis(), first.resetAfterMillis()));
        // refund and debit: the state now, as the peek with COST 0 answers
        assertState(Raw.call(raw, "RL.CHECK", hand, Long.toString(T), "2", "1000", "3", "60000", "REFUND"),
                rl.check(typed, rules, AT.withRefund()));
        assertState(Raw.call(raw, "RL.CHECK", hand, Long.toString(T), "2", "1000", "3", "60000", "COST", "5", "DEBIT"),
                rl.check(typed, rules, AT.withCost(5).withDebit()));
    }

    @Test
    void throttleAsTheSpecExample() {
        String typed = key("throttle");
        String hand = key("throttle-raw");
        TokenBucket bucket = new TokenBucket(2, 2, Duration.ofSeconds(1));
        List<List<Long>> expected = List.of(List.of(0L, 1L, 2L, 1L, -1L, 500L), List.of(0L, 1L, 2L, 0L, -1L, 1000L),
                List.of(1L, 1L, 2L, 0L, 500L, 1000L));
        for (List<Long> want : expected) {
            Decision d = rl.throttle(typed, List.of(bucket), AT);
            List<?> r = Raw.call(raw, "RL.THROTTLE", hand, Long.toString(T), "2", "2", "1000");
            assertEquals(want, r);
            assertState(r, d);
        }
        assertState(Raw.call(raw, "RL.THROTTLEPEEK", hand, Long.toString(T), "2", "2", "1000", "COST", "0"),
                rl.throttlePeek(typed, List.of(bucket), AT.withCost(0)));
        Decision reserved = rl.throttle(typed, List.of(bucket), AT.withReserve(Duration.ofSeconds(2)));
        assertState(Raw.call(raw, "RL.THROTTLE", hand, Long.toString(T), "2", "2", "1000", "RESERVE", "2000"), reserved);
        assertTrue(reserved.admitted());
        assertEquals(Duration.ofMillis(500), reserved.retryAfter().orElseThrow());
    }

    @Test
    void quotaInAZoneAndItsPeek() {
        String typed = key("quota");
        String hand = key("quota-raw");
        ZoneId shanghai = ZoneId.of("Asia/Shanghai");
        List<QuotaLimit> limits = List.of(QuotaLimit.of(QuotaPeriod.DAY, 2), QuotaLimit.of(QuotaPeriod.HOUR, 5));
        for (int i = 0; i < 3; i++) {
            Decision d = rl.quota(typed, shanghai, limits, AT);
            assertState(Raw.call(raw, "RL.QUOTA", hand, Long.toString(T), "Asia/Shanghai", "DAY", "2", "HOUR", "5"), d);
        }
        Decision peek = rl.quotaPeek(typed, shanghai, limits, AT.withCost(0));
        assertState(Raw.call(raw, "RL.QUOTAPEEK", hand, Long.toString(T), "Asia/Shanghai", "DAY", "2", "HOUR", "5", "COST", "0"), peek);
        Decision refused = rl.quota(typed, shanghai, limits, AT);
        assertTrue(refused.limited());
        // the day bucket in Shanghai (UTC+8) ends at the next local midnight
        Instant end = NOW.atZone(shanghai).toLocalDate().plusDays(1).atStartOfDay(shanghai).toInstant();
        assertEquals(Duration.between(NOW, end), refused.retryAfter().orElseThrow());
        Decision off = rl.quota(key("quota"), ZoneId.of("UTC"), List.of(QuotaLimit.of(QuotaPeriod.DAY, 0)), AT);
        assertTrue(off.limited() && off.waitingCannotHelp() && off.retryAfter().isEmpty());
        // a fixed offset goes as +HH:MM
        Decision offset = rl.quota(key("quota"), java.time.ZoneOffset.ofHours(-5), List.of(QuotaLimit.of(QuotaPeriod.HOUR, 1)), AT);
        assertTrue(offset.admitted());
    }

    @Test
    void dayhour() {
        String day = key("day");
        String hour = key("hour");
        DayHourDecision first = rl.dayhour(day, hour, 1, 5, Duration.ofHours(10), Duration.ofMinutes(30));
        assertEquals(new DayHourDecision(1, 1, 1, 5), first);
        assertTrue(first.admitted());
        DayHourDecision second = rl.dayhour(day, hour, 1, 5, Duration.ofHours(10), Duration.ofMinutes(30));
        List<?> r = Raw.call(raw, "RL.DAYHOUR", day, hour, "1", "5", "36000000", "1800000");
        assertEquals(List.of(second.dayCount(), second.hourCount()), r);
        assertTrue(second.limited() && second.dayRefused() && !second.hourRefused());
    }

    @Test
    void lockcount() {
        String typed = key("lock");
        String hand = key("lock-raw");
        for (int i = 0; i < 3; i++) {
            LockoutDecision d = rl.lockcount(typed, typed + ":count", Duration.ofMinutes(1), 1, Duration.ofMinutes(5));
            List<?> r = Raw.call(raw, "RL.LOCKCOUNT", hand, hand + ":count", "60000", "1", "300000");
            assertEquals(r.get(0), d.limited() ? 1L : 0L);
            assertEquals(r.get(1), d.count());
            // ttl is ms left, read a moment apart: within a second of the raw one
            assertTrue(Math.abs((Long) r.get(2) - d.ttlMillis()) < 1000, d + " vs " + r);
        }
        LockoutDecision locked = rl.lockcount(typed, typed + ":count", Duration.ofMinutes(1), 1, Duration.ofMinutes(5));
        assertTrue(locked.limited());
        assertTrue(locked.retryAfter().orElseThrow().compareTo(Duration.ofMinutes(4)) > 0);
    }

    @Test
    void leaseReleaseRenewAndPeek() {
        String typed = key("lease");
        String hand = key("lease-raw");
        LeaseDecision held = rl.lease(typed, 1, Duration.ofSeconds(30), AT.withToken("job-1"));
        List<?> r = Raw.call(raw, "RL.LEASE", hand, Long.toString(T), "1", "30000", "TOKEN", "job-1");
        assertEquals(7, r.size());
        assertState(r.subList(0, 6), held);
        assertEquals("job-1", r.get(6));
        assertEquals("job-1", held.token().orElseThrow());
        LeaseDecision refused = rl.lease(typed, 1, Duration.ofSeconds(30), AT.withToken("job-2"));
        List<?> r2 = Raw.call(raw, "RL.LEASE", hand, Long.toString(T), "1", "30000", "TOKEN", "job-2");
        assertState(r2.subList(0, 6), refused);
        assertEquals(null, r2.get(6));
        assertTrue(refused.limited() && refused.token().isEmpty());
        assertEquals(Duration.ofSeconds(30), refused.retryAfter().orElseThrow());
        assertState(Raw.call(raw, "RL.LEASEPEEK", hand, Long.toString(T), "1", "COST", "0"), rl.leasePeek(typed, 1, AT.withCost(0)));
        assertEquals(List.of(1L), rl.renew(typed, Duration.ofSeconds(60), List.of("job-1"), AT));
        assertEquals(List.of(1L, 0L), rl.release(typed, List.of("job-1", "never"), AT));
        assertEquals(List.of(0L), rl.release(typed, List.of("job-1"), AT));
        LeaseDecision named = rl.lease(typed, 1, Duration.ofSeconds(30), AT);
        assertEquals(8, named.token().orElseThrow().length(), "the module names a lease with 8 characters");
    }

    @Test
    void allAndAllPeekWithDetails() {
        String tag = "{" + UUID.randomUUID() + "}";
        String h = "{" + UUID.randomUUID() + "}";
        List<Clause> clauses = List.of(Clause.check(tag + ":w", SlidingWindow.of(2, Duration.ofSeconds(10)), SlidingWindow.of(5, Duration.ofHours(1))),
                Clause.throttle(tag + ":b", new TokenBucket(3, 1, Duration.ofSeconds(1))),
                Clause.quota(tag + ":q", ZoneId.of("UTC"), QuotaLimit.of(QuotaPeriod.DAY, 10)),
                Clause.lease(tag + ":l", 2, Duration.ofSeconds(30), "req-1"));
        String[] rawArgs = {"4", h + ":w", h + ":b", h + ":q", h + ":l", Long.toString(T), "CHECK", "1", "2", "10000", "5", "3600000",
            "THROTTLE", "2", "3", "1", "1000", "QUOTA", "3", "UTC", "DAY", "10", "LEASE", "4", "2", "30000", "TOKEN", "req-1"};
        for (int i = 0; i < 3; i++) {
            AllDecision plain = rl.all(clauses, AT);
            List<?> r = Raw.call(raw, "RL.ALL", rawArgs);
            assertEquals(7, r.size());
            assertEquals(r.get(1), (long) plain.clause());
            assertState(List.of(r.get(0), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6)), plain);
            assertFalse(plain.hasDetails());
        }
        String[] withDetails = java.util.Arrays.copyOf(rawArgs, rawArgs.length + 1);
        withDetails[rawArgs.length] = "DETAILS";
        String[] peekArgs = withDetails.clone();
        AllDecision peek = rl.allPeek(clauses, AT.withDetails());
        List<?> rp = Raw.call(raw, "RL.ALLPEEK", peekArgs);
        AllDecision d = rl.all(clauses, AT.withDetails());
        List<?> r = Raw.call(raw, "RL.ALL", withDetails);
        for (Object[] pair : new Object[][] {{peek, rp}, {d, r}}) {
            AllDecision decision = (AllDecision) pair[0];
            List<?> reply = (List<?>) pair[1];
            assertEquals(7 + 4, reply.size());
            assertEquals(List.of(2, 1, 1, 1), decision.details().stream().map(List::size).toList());
            for (int c = 0; c < 4; c++) {
                List<?> clause = (List<?>) reply.get(7 + c);
                for (int rule = 0; rule < clause.size(); rule++) {
                    assertState((List<?>) clause.get(rule), decision.details().get(c).get(rule));
                }
            }
        }
        // the fourth call is refused by the 2-per-10 s window: clause 1, and nothing written anywhere
        assertTrue(d.limited());
        assertEquals(1, d.clause());
        assertEquals(1, d.details().get(0).get(0).rule());
        assertTrue(d.details().get(0).get(0).limited());
        assertFalse(d.details().get(1).get(0).limited());
    }
}
