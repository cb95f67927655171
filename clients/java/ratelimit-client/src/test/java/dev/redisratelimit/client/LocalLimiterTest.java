package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The LOCAL Redis-down mode exact within one instance (issue 35): costs and
 * estimates charged and settled, the module's algorithms, retry-after from
 * the local state, and bounded memory that refuses rather than forgets a
 * spent key. A clock of its own: no sleeping.
 */
class LocalLimiterTest {

    // 2026-12-07T10:20:00Z: a minute, an hour and a day already under way
    final AtomicLong now = new AtomicLong(Instant.parse("2026-12-07T10:20:00Z").toEpochMilli());
    final RuntimeLimits runtime = new RuntimeLimits(null, "", 100);

    LocalLimiter local(int maxKeys, int maxEntries) {
        return new LocalLimiter(maxKeys, maxEntries, now::get);
    }

    static PolicyDecision refused(Runnable call) {
        RateLimitRefusedException e = catchThrowableOfType(RateLimitRefusedException.class, call::run);
        assertThat(e).as("refused").isNotNull();
        return e.getDecision();
    }

    @Test
    void estimatesAreChargedAndSettledToTheUsageReported() {
        LocalLimiter l = local(100, 1000);
        Policy llm = Policy.builder("llm").limit(Limit.slidingWindow("tokens", 10_000, Duration.ofMinutes(1)).estimated()).build();
        PolicyCall call = PolicyCall.of(llm, "customer:7").withEstimate(5_000);
        // the case: 10 calls estimating 5,000 against 10,000 a minute, none closed yet: 2 admitted
        long start = now.get();
        int admitted = 0;
        LocalLimiter.Held first = null;
        for (int i = 0; i < 10; i++) {
            try {
                LocalLimiter.Held h = l.acquire(List.of(call), runtime);
                first = first == null ? h : first;
                admitted++;
            } catch (RateLimitRefusedException e) {
                // until the first call leaves the window
                assertThat(e.getDecision().retryAfterMs()).isEqualTo(60_000 - (now.get() - start));
            }
            now.addAndGet(1000);
        }
        assertThat(admitted).isEqualTo(2);
        assertThat(first.estimateClauses()).containsExactly(0);
        // the first used 1,000 of its 5,000: 4,000 come back, so one more 4,000 fits and nothing beyond
        l.release(first, Map.of(0, 1_000L));
        l.acquire(List.of(PolicyCall.of(llm, "customer:7").withEstimate(4_000)), runtime);
        PolicyDecision d = refused(() -> l.acquire(List.of(PolicyCall.of(llm, "customer:7").withEstimate(1)), runtime));
        // the oldest call (1,000 settled) leaves the window 60 s after it came, 10 s ago
        assertThat(d.retryAfterMs()).isEqualTo(50_000);
        assertThat(d.bindingLimit().name()).isEqualTo("tokens");
        // an estimate above the limit can never pass: no Retry-After
        assertThat(refused(() -> l.acquire(List.of(PolicyCall.of(llm, "x").withEstimate(10_001)), runtime)).waitingCannotHelp())
                .isTrue();
    }

    @Test
    void aSlidingWindowSlidesRatherThanResetting() {
        LocalLimiter l = local(100, 1000);
        Policy p = Policy.builder("p").slidingWindow("w", 2, Duration.ofSeconds(10)).build();
        l.acquire(List.of(PolicyCall.of(p, "k")), runtime);
        now.addAndGet(3_000);
        l.acquire(List.of(PolicyCall.of(p, "k")), runtime);
        now.addAndGet(1_000);
        assertThat(refused(() -> l.acquire(List.of(PolicyCall.of(p, "k")), runtime)).retryAfterMs()).isEqualTo(6_000);
        now.addAndGet(6_000); // the first left the window; the second has 3 s to go
        l.acquire(List.of(PolicyCall.of(p, "k")), runtime);
        assertThat(refused(() -> l.acquire(List.of(PolicyCall.of(p, "k")), runtime)).retryAfterMs()).isEqualTo(3_000);
    }

    @Test
    void costsChargeBucketsAndQuotasAndTheRetryComesFromTheirState() {
        LocalLimiter l = local(100, 1000);
        Policy bucket = Policy.builder("b").limit(Limit.tokenBucket("rate", 10, Duration.ofSeconds(10), 5).costedBy("n")).build();
        l.acquire(List.of(PolicyCall.of(bucket, "k").withCost(5)), runtime); // the whole burst at once
        // 1 per second refills: 3 units wait 3 s
        assertThat(refused(() -> l.acquire(List.of(PolicyCall.of(bucket, "k").withCost(3)), runtime)).retryAfterMs()).isEqualTo(3_000);
        now.addAndGet(3_000);
        l.acquire(List.of(PolicyCall.of(bucket, "k").withCost(3)), runtime);

        Policy quota = Policy.builder("q").limit(Limit.quota("hourly", ZoneId.of("UTC"), QuotaPeriod.HOUR, 100).costedBy("n")).build();
        l.acquire(List.of(PolicyCall.of(quota, "k").withCost(60)), runtime);
        PolicyDecision d = refused(() -> l.acquire(List.of(PolicyCall.of(quota, "k").withCost(41)), runtime));
        // 10:20:03 now: the hour ends at 11:00
        assertThat(d.retryAfterMs()).isEqualTo(Duration.ofMinutes(39).plusSeconds(57).toMillis());
        l.acquire(List.of(PolicyCall.of(quota, "k").withCost(40)), runtime);
        now.addAndGet(d.retryAfterMs());
        l.acquire(List.of(PolicyCall.of(quota, "k").withCost(100)), runtime); // a new hour
    }

    @Test
    void aSpentKeyIsNeverForgottenBeforeItsWindowEndsPastTheBoundNewKeysAreRefused() {
        LocalLimiter l = local(100, 10_000);
        Policy hourly = Policy.builder("h").slidingWindow("per-hour", 1, Duration.ofHours(1)).build();
        l.acquire(List.of(PolicyCall.of(hourly, "victim")), runtime);
        // a flood of distinct keys: 99 fit, the rest are refused (retry once the earliest key ends), never admitted by forgetting
        int admitted = 0;
        int refusedFlood = 0;
        for (int i = 0; i < 1_000; i++) {
            try {
                l.acquire(List.of(PolicyCall.of(hourly, "flood" + i)), runtime);
                admitted++;
            } catch (RateLimitRefusedException e) {
                refusedFlood++;
                assertThat(e.getDecision().retryAfterMs()).isEqualTo(Duration.ofHours(1).toMillis());
            }
        }
        assertThat(admitted).isEqualTo(99);
        assertThat(refusedFlood).isEqualTo(901);
        assertThat(l.size()).isEqualTo(100);
        assertThat(refused(() -> l.acquire(List.of(PolicyCall.of(hourly, "victim")), runtime)).retryAfterMs())
                .isEqualTo(Duration.ofHours(1).toMillis());
        // once the hour has passed every key has ended: swept, and the victim and new keys pass again
        now.addAndGet(Duration.ofHours(1).toMillis());
        l.acquire(List.of(PolicyCall.of(hourly, "victim")), runtime);
        l.acquire(List.of(PolicyCall.of(hourly, "new")), runtime);
        assertThat(l.size()).isEqualTo(2);
    }

    @Test
    void theSlidingLogIsBoundedToo() {
        LocalLimiter l = local(1_000, 50);
        Policy p = Policy.builder("p").slidingWindow("w", 1_000, Duration.ofMinutes(1)).build();
        for (int i = 0; i < 50; i++) {
            l.acquire(List.of(PolicyCall.of(p, "k")), runtime);
        }
        assertThat(refused(() -> l.acquire(List.of(PolicyCall.of(p, "k")), runtime)).retryAfterMs()).isEqualTo(60_000);
        now.addAndGet(60_000);
        l.acquire(List.of(PolicyCall.of(p, "k")), runtime);
    }

    @Test
    void leasesAreHeldUntilReleasedAndARefusalGivesEveryPolicyBack() {
        LocalLimiter l = local(100, 1000);
        Policy inFlight = Policy.builder("c").concurrency("running", 1, Duration.ofMinutes(1)).build();
        Policy window = Policy.builder("w").slidingWindow("w", 5, Duration.ofMinutes(1)).build();
        LocalLimiter.Held h = l.acquire(List.of(PolicyCall.of(window, "k"), PolicyCall.of(inFlight, "k")), runtime);
        PolicyDecision d = refused(() -> l.acquire(List.of(PolicyCall.of(window, "k"), PolicyCall.of(inFlight, "k")), runtime));
        assertThat(d.bindingKind()).isEqualTo(Limit.Kind.CONCURRENCY);
        l.release(h, Map.of());
        l.acquire(List.of(PolicyCall.of(window, "k"), PolicyCall.of(inFlight, "k")), runtime);
        // 2 charged to the window (the refused call's charge was given back): 3 more fit
        for (int i = 0; i < 3; i++) {
            l.acquire(List.of(PolicyCall.of(window, "k")), runtime);
        }
        refused(() -> l.acquire(List.of(PolicyCall.of(window, "k")), runtime));
    }

    @Test
    void aLockoutLocksForItsLockTime() {
        LocalLimiter l = local(100, 1000);
        Policy login = Policy.builder("login").limit(Limit.lockout("attempts", 2, Duration.ofMinutes(1), Duration.ofMinutes(15))).build();
        l.acquire(List.of(PolicyCall.of(login, "alice")), runtime);
        l.acquire(List.of(PolicyCall.of(login, "alice")), runtime);
        PolicyDecision d = refused(() -> l.acquire(List.of(PolicyCall.of(login, "alice")), runtime));
        assertThat(d.kind()).isEqualTo(PolicyDecision.Kind.LOCKED);
        assertThat(d.retryAfterMs()).isEqualTo(Duration.ofMinutes(15).toMillis());
        now.addAndGet(Duration.ofMinutes(5).toMillis());
        assertThat(refused(() -> l.acquire(List.of(PolicyCall.of(login, "alice")), runtime)).retryAfterMs())
                .isEqualTo(Duration.ofMinutes(10).toMillis());
        now.addAndGet(Duration.ofMinutes(10).toMillis());
        l.acquire(List.of(PolicyCall.of(login, "alice")), runtime);
    }

    @Test
    void calendarPeriodsEndInTheirZone() {
        long t = Instant.parse("2026-12-07T10:20:00Z").toEpochMilli(); // a Monday
        assertThat(Instant.ofEpochMilli(LocalLimiter.periodEnd(t, QuotaPeriod.DAY, ZoneId.of("America/New_York"))))
                .isEqualTo(Instant.parse("2026-12-08T05:00:00Z"));
        assertThat(Instant.ofEpochMilli(LocalLimiter.periodEnd(t, QuotaPeriod.WEEK, ZoneId.of("UTC"))))
                .isEqualTo(Instant.parse("2026-12-14T00:00:00Z"));
        assertThat(Instant.ofEpochMilli(LocalLimiter.periodEnd(t, QuotaPeriod.MONTH, ZoneId.of("Asia/Kolkata"))))
                .isEqualTo(Instant.parse("2026-12-31T18:30:00Z"));
        assertThatThrownBy(() -> new LocalLimiter(0, 1)).isInstanceOf(IllegalArgumentException.class);
    }
}
