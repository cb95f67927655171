package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.net.ConnectException;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.Test;

/**
 * The LOCAL Redis-down mode (issues 35 and 40): decided by the limiter's own
 * decision path on the local backend ({@link LocalRateLimitTransport}, the one
 * the golden sequences check against the module), so exact within one
 * instance — costs and estimates charged and settled, the module's
 * algorithms, retry-after from the local state — with bounded memory that
 * refuses rather than forgets a spent key; and Redis deciding again once it
 * answers. A clock of its own: no sleeping (but for the probe in the last test).
 */
class LocalModeTest {

    // 2026-12-07T10:20:00Z: a minute, an hour and a day already under way
    final LocalRateLimitTransport.ManualClock clock = new LocalRateLimitTransport.ManualClock(Instant.parse("2026-12-07T10:20:00Z").toEpochMilli());

    /** Redis: a local backend of its own behind a switch (down: every command fails to connect). */
    static final class Redis implements RateLimitTransport {
        final LocalRateLimitTransport server;
        volatile boolean down;

        Redis(LocalRateLimitTransport.ManualClock clock) {
            server = new LocalRateLimitTransport(clock);
        }

        @Override
        public CompletionStage<Object> execute(RedisCall call) {
            return down ? CompletableFuture.failedFuture(new ConnectException("Connection refused")) : server.execute(call);
        }

        @Override
        public void close() {
        }
    }

    final Redis redis = new Redis(clock);
    LocalRateLimitTransport backend;

    /** A limiter whose policies fall back to LOCAL, Redis down from the start. */
    RateLimiter limiter(int maxKeys, int maxEntries) {
        redis.down = true;
        backend = new LocalRateLimitTransport(clock, maxKeys, maxEntries);
        return RateLimiter.builder(redis).onRedisDown(FailMode.LOCAL).localBackend(backend).budget(Duration.ofMillis(200))
                .probeInterval(Duration.ofMillis(50)).build();
    }

    static PolicyDecision refused(Runnable call) {
        RateLimitRefusedException e = catchThrowableOfType(RateLimitRefusedException.class, call::run);
        assertThat(e).as("refused").isNotNull();
        return e.getDecision();
    }

    @Test
    void estimatesAreChargedAndSettledToTheUsageReported() {
        RateLimiter l = limiter(100, 100_000);
        Policy llm = Policy.builder("llm").limit(Limit.slidingWindow("tokens", 10_000, Duration.ofMinutes(1)).estimated()).build();
        PolicyCall call = PolicyCall.of(llm, "customer:7").withEstimate(5_000);
        // the case: 10 calls estimating 5,000 against 10,000 a minute, none closed yet: 2 admitted
        long start = clock.millis();
        int admitted = 0;
        Permit first = null;
        for (int i = 0; i < 10; i++) {
            try {
                Permit p = l.acquire(call);
                first = first == null ? p : first;
                admitted++;
            } catch (RateLimitRefusedException e) {
                // until the first call leaves the window
                assertThat(e.getDecision().retryAfterMs()).isEqualTo(60_000 - (clock.millis() - start));
            }
            clock.advance(Duration.ofSeconds(1));
        }
        assertThat(admitted).isEqualTo(2);
        assertThat(first.estimateClauses()).containsExactly(0);
        assertThat(first.decision().limits().get(0).r()).isEqualTo(5_000); // the local state, for the headers
        // the first used 1,000 of its 5,000: 4,000 come back, so one more 4,000 fits and nothing beyond
        first.used(1_000).close();
        l.acquire(PolicyCall.of(llm, "customer:7").withEstimate(4_000));
        PolicyDecision d = refused(() -> l.acquire(PolicyCall.of(llm, "customer:7").withEstimate(1)));
        // the oldest units (the first call's, settled to 1,000) leave the window 60 s after it came, 10 s ago
        assertThat(d.retryAfterMs()).isEqualTo(50_000);
        assertThat(d.bindingLimit().name()).isEqualTo("tokens");
        // an estimate above the limit is refused before anything is decided, as when Redis is up
        assertThatThrownBy(() -> l.acquire(PolicyCall.of(llm, "x").withEstimate(10_001))).isInstanceOf(RateLimitArgumentException.class);
        assertThat(redis.server.size()).isZero(); // Redis saw none of it
    }

    @Test
    void aSlidingWindowSlidesRatherThanResetting() {
        RateLimiter l = limiter(100, 1000);
        Policy p = Policy.builder("p").slidingWindow("w", 2, Duration.ofSeconds(10)).build();
        l.acquire(PolicyCall.of(p, "k"));
        clock.advance(Duration.ofSeconds(3));
        l.acquire(PolicyCall.of(p, "k"));
        clock.advance(Duration.ofSeconds(1));
        assertThat(refused(() -> l.acquire(PolicyCall.of(p, "k"))).retryAfterMs()).isEqualTo(6_000);
        clock.advance(Duration.ofSeconds(6)); // the first left the window; the second has 3 s to go
        l.acquire(PolicyCall.of(p, "k"));
        assertThat(refused(() -> l.acquire(PolicyCall.of(p, "k"))).retryAfterMs()).isEqualTo(3_000);
    }

    @Test
    void costsChargeBucketsAndQuotasAndTheRetryComesFromTheirState() {
        RateLimiter l = limiter(100, 1000);
        Policy bucket = Policy.builder("b").limit(Limit.tokenBucket("rate", 10, Duration.ofSeconds(10), 5).costedBy("n")).build();
        l.acquire(PolicyCall.of(bucket, "k").withCost(5)); // the whole burst at once
        // 1 per second refills: 3 units wait 3 s
        assertThat(refused(() -> l.acquire(PolicyCall.of(bucket, "k").withCost(3))).retryAfterMs()).isEqualTo(3_000);
        clock.advance(Duration.ofSeconds(3));
        l.acquire(PolicyCall.of(bucket, "k").withCost(3));

        Policy quota = Policy.builder("q").limit(Limit.quota("hourly", ZoneId.of("UTC"), QuotaPeriod.HOUR, 100).costedBy("n")).build();
        l.acquire(PolicyCall.of(quota, "k").withCost(60));
        PolicyDecision d = refused(() -> l.acquire(PolicyCall.of(quota, "k").withCost(41)));
        // 10:20:03 now: the hour ends at 11:00
        assertThat(d.retryAfterMs()).isEqualTo(Duration.ofMinutes(39).plusSeconds(57).toMillis());
        l.acquire(PolicyCall.of(quota, "k").withCost(40));
        clock.advance(Duration.ofMillis(d.retryAfterMs()));
        l.acquire(PolicyCall.of(quota, "k").withCost(100)); // a new hour
    }

    @Test
    void aSpentKeyIsNeverForgottenBeforeItsWindowEndsPastTheBoundNewKeysAreRefused() {
        RateLimiter l = limiter(100, 10_000);
        Policy hourly = Policy.builder("h").slidingWindow("per-hour", 1, Duration.ofHours(1)).build();
        l.acquire(PolicyCall.of(hourly, "victim"));
        // a flood of distinct keys: 99 fit, the rest are refused (retry once the earliest key ends), never admitted by forgetting
        int admitted = 0;
        int refusedFlood = 0;
        for (int i = 0; i < 1_000; i++) {
            try {
                l.acquire(PolicyCall.of(hourly, "flood" + i));
                admitted++;
            } catch (RateLimitRefusedException e) {
                refusedFlood++;
                assertThat(e.getDecision().retryAfterMs()).isEqualTo(Duration.ofHours(1).toMillis());
                // the backend is full: the policy's first limit named, nothing left, the wait as its reset
                assertThat(e.getDecision().bindingLimit().name()).isEqualTo("per-hour");
                assertThat(e.getDecision().bindingLimit().r()).isZero();
            }
        }
        assertThat(admitted).isEqualTo(99);
        assertThat(refusedFlood).isEqualTo(901);
        assertThat(backend.size()).isEqualTo(100);
        assertThat(refused(() -> l.acquire(PolicyCall.of(hourly, "victim"))).retryAfterMs()).isEqualTo(Duration.ofHours(1).toMillis());
        // once the hour has passed every key has ended: swept, and the victim and new keys pass again
        clock.advance(Duration.ofHours(1));
        l.acquire(PolicyCall.of(hourly, "victim"));
        l.acquire(PolicyCall.of(hourly, "new"));
        assertThat(backend.size()).isEqualTo(2);
    }

    @Test
    void theSlidingLogIsBoundedToo() {
        RateLimiter l = limiter(1_000, 50);
        Policy p = Policy.builder("p").slidingWindow("w", 1_000, Duration.ofMinutes(1)).build();
        for (int i = 0; i < 50; i++) {
            l.acquire(PolicyCall.of(p, "k"));
        }
        assertThat(backend.entries()).isEqualTo(50);
        assertThat(refused(() -> l.acquire(PolicyCall.of(p, "k"))).retryAfterMs()).isEqualTo(60_000);
        assertThat(backend.entries()).isEqualTo(50); // the refused call was undone
        clock.advance(Duration.ofMinutes(1));
        l.acquire(PolicyCall.of(p, "k"));
        assertThat(backend.entries()).isEqualTo(1);
    }

    @Test
    void leasesAreHeldUntilReleasedAndARefusalGivesEveryPolicyBack() {
        RateLimiter l = limiter(100, 1000);
        Policy inFlight = Policy.builder("c").concurrency("running", 1, Duration.ofMinutes(1)).build();
        Policy window = Policy.builder("w").slidingWindow("w", 5, Duration.ofMinutes(1)).build();
        Permit h = l.acquire(List.of(PolicyCall.of(window, "k"), PolicyCall.of(inFlight, "k")));
        PolicyDecision d = refused(() -> l.acquire(List.of(PolicyCall.of(window, "k"), PolicyCall.of(inFlight, "k"))));
        assertThat(d.bindingKind()).isEqualTo(Limit.Kind.CONCURRENCY);
        h.close();
        l.acquire(List.of(PolicyCall.of(window, "k"), PolicyCall.of(inFlight, "k")));
        // 2 charged to the window (the refused call charged nothing): 3 more fit
        for (int i = 0; i < 3; i++) {
            l.acquire(PolicyCall.of(window, "k"));
        }
        refused(() -> l.acquire(PolicyCall.of(window, "k")));
    }

    @Test
    void aLockoutLocksForItsLockTime() {
        RateLimiter l = limiter(100, 1000);
        Policy login = Policy.builder("login").limit(Limit.lockout("attempts", 2, Duration.ofMinutes(1), Duration.ofMinutes(15))).build();
        l.acquire(PolicyCall.of(login, "alice"));
        l.acquire(PolicyCall.of(login, "alice"));
        PolicyDecision d = refused(() -> l.acquire(PolicyCall.of(login, "alice")));
        assertThat(d.kind()).isEqualTo(PolicyDecision.Kind.LOCKED);
        assertThat(d.retryAfterMs()).isEqualTo(Duration.ofMinutes(15).toMillis());
        clock.advance(Duration.ofMinutes(5));
        assertThat(refused(() -> l.acquire(PolicyCall.of(login, "alice"))).retryAfterMs()).isEqualTo(Duration.ofMinutes(10).toMillis());
        clock.advance(Duration.ofMinutes(10));
        l.acquire(PolicyCall.of(login, "alice"));
    }

    @Test
    void calendarPeriodsEndInTheirZone() {
        long t = Instant.parse("2026-12-07T10:20:00Z").toEpochMilli(); // a Monday
        assertThat(Instant.ofEpochMilli(LocalRateLimitTransport.periodEnd(t, "day", ZoneId.of("America/New_York"))))
                .isEqualTo(Instant.parse("2026-12-08T05:00:00Z"));
        assertThat(Instant.ofEpochMilli(LocalRateLimitTransport.periodEnd(t, "week", ZoneId.of("UTC"))))
                .isEqualTo(Instant.parse("2026-12-14T00:00:00Z"));
        assertThat(Instant.ofEpochMilli(LocalRateLimitTransport.periodEnd(t, "month", ZoneId.of("Asia/Kolkata"))))
                .isEqualTo(Instant.parse("2026-12-31T18:30:00Z"));
        assertThatThrownBy(() -> new LocalRateLimitTransport(clock, 0, 1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void redisBackDecidesAgainWithItsOwnCounters() throws Exception {
        RateLimiter l = limiter(100, 1000);
        Policy p = Policy.builder("p").slidingWindow("w", 2, Duration.ofMinutes(1)).build();
        l.acquire(PolicyCall.of(p, "k"));
        l.acquire(PolicyCall.of(p, "k"));
        refused(() -> l.acquire(PolicyCall.of(p, "k"))); // local: 2 of 2
        assertThat(backend.size()).isEqualTo(1);
        redis.down = false;
        // the probe (every 50 ms) closes the circuit; Redis then decides with its own counters (none of the local ones)
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (true) {
            try {
                l.acquire(PolicyCall.of(p, "k"));
                break;
            } catch (RateLimitRefusedException e) {
                assertThat(System.nanoTime()).as("Redis decides again").isLessThan(deadline);
                Thread.sleep(20);
            }
        }
        assertThat(l.acquire(PolicyCall.of(p, "k")).decision().limits().get(0).r()).isZero();
        refused(() -> l.acquire(PolicyCall.of(p, "k")));
        assertThat(redis.server.size()).isEqualTo(1);
        l.close();
    }
}
