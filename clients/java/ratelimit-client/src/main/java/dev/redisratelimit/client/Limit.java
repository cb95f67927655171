package dev.redisratelimit.client;

import java.time.Duration;
import java.time.ZoneId;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * One named limit of a {@link Policy}. Built by the policy builder's methods
 * ({@code slidingWindow}, {@code tokenBucket}, {@code quota},
 * {@code concurrency}, {@code lockout}); {@link #quota()} and
 * {@link #window()} are what the {@code RateLimit-Policy} header shows
 * ({@code q}, {@code w}).
 */
public final class Limit {

    /** Which limiter decides it. */
    public enum Kind {
        /** RL.CHECK: at most {@code count} in any {@code window}. */
        SLIDING_WINDOW,
        /** RL.THROTTLE: {@code rate} per {@code per}, bursts of {@code burst}. */
        TOKEN_BUCKET,
        /** RL.QUOTA: {@code limit} per calendar period in a zone. */
        QUOTA,
        /** RL.LEASE: at most {@code limit} in flight. */
        CONCURRENCY,
        /** RL.LOCKCOUNT: {@code max} per {@code window}, then locked for {@code lockTime}. */
        LOCKOUT
    }

    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9_.\\-]{1,64}");

    private final String name;
    private final Kind kind;
    private final SlidingWindow slidingWindow;
    private final TokenBucket tokenBucket;
    private final ZoneId zone;
    private final QuotaLimit quotaLimit;
    private final long limit;
    private final Duration ttl;
    private final Duration window;
    private final Duration lockTime;

    private Limit(String name, Kind kind, SlidingWindow slidingWindow, TokenBucket tokenBucket, ZoneId zone, QuotaLimit quotaLimit,
            long limit, Duration ttl, Duration window, Duration lockTime) {
        if (name == null || !NAME.matcher(name).matches()) {
            throw new IllegalArgumentException("invalid limit name '" + name + "': 1 to 64 letters, digits, '_', '.', '-'");
        }
        this.name = name;
        this.kind = kind;
        this.slidingWindow = slidingWindow;
        this.tokenBucket = tokenBucket;
        this.zone = zone;
        this.quotaLimit = quotaLimit;
        this.limit = limit;
        this.ttl = ttl;
        this.window = window;
        this.lockTime = lockTime;
    }

    static Limit slidingWindow(String name, long count, Duration window) {
        SlidingWindow rule = SlidingWindow.of(count, window);
        return new Limit(name, Kind.SLIDING_WINDOW, rule, null, null, null, count, null, window, null);
    }

    static Limit tokenBucket(String name, long rate, Duration per, long burst) {
        TokenBucket rule = TokenBucket.of(rate, per, burst);
        return new Limit(name, Kind.TOKEN_BUCKET, null, rule, null, null, rate, null, per, null);
    }

    static Limit quota(String name, ZoneId zone, QuotaPeriod period, long limit) {
        Zones.toArgument(zone);
        return new Limit(name, Kind.QUOTA, null, null, zone, QuotaLimit.of(period, limit), limit, null, null, null);
    }

    static Limit concurrency(String name, long limit, Duration ttl) {
        Limits.positive("limit", limit);
        Limits.millis("ttl", ttl);
        return new Limit(name, Kind.CONCURRENCY, null, null, null, null, limit, ttl, null, null);
    }

    static Limit lockout(String name, long max, Duration window, Duration lockTime) {
        Limits.nonNegative("max", max);
        Limits.millis("window", window);
        Limits.millis("locktime", lockTime);
        return new Limit(name, Kind.LOCKOUT, null, null, null, null, max, null, window, lockTime);
    }

    public String name() {
        return name;
    }

    public Kind kind() {
        return kind;
    }

    /** The header's {@code q}: the count, rate, quota, in-flight or lockout limit. */
    public long quota() {
        return limit;
    }

    /**
     * The header's {@code w}: the window, the bucket's refill period, the quota's
     * calendar period (its nominal length: a day is 86400 s), the lockout's
     * counting window; empty for a concurrency limit.
     */
    public Optional<Duration> window() {
        if (kind == Kind.QUOTA) {
            return Optional.of(switch (quotaLimit.period()) {
                case MINUTE -> Duration.ofMinutes(1);
                case HOUR -> Duration.ofHours(1);
                case DAY -> Duration.ofDays(1);
                case WEEK -> Duration.ofDays(7);
                case MONTH -> Duration.ofDays(30);
                case YEAR -> Duration.ofDays(365);
            });
        }
        return Optional.ofNullable(window);
    }

    SlidingWindow slidingWindowRule() {
        return slidingWindow;
    }

    TokenBucket tokenBucketRule() {
        return tokenBucket;
    }

    ZoneId zone() {
        return zone;
    }

    QuotaLimit quotaLimit() {
        return quotaLimit;
    }

    Duration ttl() {
        return ttl;
    }

    Duration lockTime() {
        return lockTime;
    }

    @Override
    public String toString() {
        return "Limit[" + name + ", " + kind + ", q=" + limit + window().map(w -> ", w=" + w).orElse("") + "]";
    }
}
