package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.time.ZoneId;
import org.junit.jupiter.api.Test;

/**
 * The local backend without Redis: the README's example as written, and what
 * the sequence cases cannot drive against the real module (a lockout lifting
 * by the clock). ratelimit-it's SequencesTest shows it decides as the module does.
 */
class LocalRateLimitTransportTest {

    @Test
    void theReadmeExample() {
        LocalRateLimitTransport local = new LocalRateLimitTransport(new LocalRateLimitTransport.ManualClock());
        try (RateLimiter limiter = RateLimiter.builder(local).build()) {
            Policy sms = Policy.builder("sms").limits("2/minute").build();
            limiter.acquire(PolicyCall.of(sms, "+100")).close();
            limiter.acquire(PolicyCall.of(sms, "+100")).close();
            assertThatThrownBy(() -> limiter.acquire(PolicyCall.of(sms, "+100"))).isInstanceOfSatisfying(
                    RateLimitRefusedException.class, e -> assertThat(e.getDecision().retryAfterMs()).isEqualTo(60_000));
            local.advance(Duration.ofMinutes(1));
            assertThat(limiter.acquire(PolicyCall.of(sms, "+100")).decision().admitted()).isTrue();
        }
    }

    @Test
    void aLockoutLiftsWhenTheClockPassesItsLockTime() {
        LocalRateLimitTransport local = new LocalRateLimitTransport(new LocalRateLimitTransport.ManualClock());
        try (RateLimiter limiter = RateLimiter.builder(local).build()) {
            Policy login = Policy.builder("login").lockout("l", 2, Duration.ofMinutes(1), Duration.ofSeconds(30)).build();
            limiter.acquire(PolicyCall.of(login, "ann")).close();
            limiter.acquire(PolicyCall.of(login, "ann")).close();
            assertThatThrownBy(() -> limiter.acquire(PolicyCall.of(login, "ann"))).isInstanceOf(RateLimitRefusedException.class);
            local.advance(Duration.ofMillis(29_999));
            assertThatThrownBy(() -> limiter.acquire(PolicyCall.of(login, "ann"))).isInstanceOfSatisfying(
                    RateLimitRefusedException.class, e -> assertThat(e.getDecision().retryAfterMs()).isEqualTo(1));
            local.advance(Duration.ofMillis(1));
            assertThat(limiter.acquire(PolicyCall.of(login, "ann")).decision().admitted()).isTrue();
        }
    }

    @Test
    void aQuotaTurnsOverAtLocalMidnightAndResetForgetsEveryKey() {
        // 2025-12-31T23:00Z = 2026-01-01T00:00+01:00 in Paris
        LocalRateLimitTransport local = new LocalRateLimitTransport(new LocalRateLimitTransport.ManualClock(1_767_225_600_000L - 3_600_000));
        try (RateLimiter limiter = RateLimiter.builder(local).build()) {
            Policy q = Policy.builder("q").quota("day", ZoneId.of("Europe/Paris"), QuotaPeriod.DAY, 1).build();
            limiter.acquire(PolicyCall.of(q, "k")).close();
            assertThatThrownBy(() -> limiter.acquire(PolicyCall.of(q, "k"))).isInstanceOfSatisfying(
                    RateLimitRefusedException.class, e -> assertThat(e.getDecision().retryAfterMs()).isEqualTo(86_400_000));
            local.reset();
            limiter.acquire(PolicyCall.of(q, "k")).close();
            local.advance(Duration.ofDays(1));
            assertThat(limiter.acquire(PolicyCall.of(q, "k")).decision().admitted()).isTrue();
        }
    }
}
