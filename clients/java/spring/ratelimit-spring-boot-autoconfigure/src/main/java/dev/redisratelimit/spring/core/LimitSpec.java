package dev.redisratelimit.spring.core;

import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.client.QuotaPeriod;
import java.time.Duration;
import java.time.ZoneId;

/**
 * One named limit, validated as the module would validate it (so a window of
 * 0 fails the application's start, not the first request). {@code count} is
 * the base value; a value set at run time replaces it (see RuntimeLimits).
 */
public record LimitSpec(
        String name,
        LimitType type,
        long count,
        Duration window,
        long burst,
        QuotaPeriod period,
        String zone,
        Duration ttl,
        Duration lockTime,
        boolean global,
        String cost,
        String settle) {

    static final long MAX = (1L << 53) - 1;

    public LimitSpec {
        require(name != null && !name.isBlank() && name.matches("[A-Za-z0-9_.-]+"),
                "a limit needs a name of letters, digits, '_', '.' or '-' (it names a RateLimit header item), got '" + name + "'");
        require(type != null, "limit '" + name + "': a type");
        cost = cost == null || cost.isBlank() ? null : cost;
        settle = settle == null || settle.isBlank() ? null : settle;
        switch (type) {
            case SLIDING_WINDOW -> {
                positiveCount(name, count, 1);
                positiveDuration(name, "window", window);
            }
            case TOKEN_BUCKET -> {
                positiveCount(name, count, 1);
                positiveDuration(name, "window", window);
                if (burst == 0) {
                    burst = count;
                }
                require(burst >= 1 && burst <= MAX, "limit '" + name + "': burst " + burst + " must be from 1 to 2^53-1");
                require(window.toMillis() * 1_000_000L / count >= 1,
                        "limit '" + name + "': " + count + " per " + window + " is under one nanosecond per call");
            }
            case QUOTA -> {
                positiveCount(name, count, 0);
                require(period != null, "limit '" + name + "': a quota needs a period");
                try {
                    ZoneId.of(zone);
                } catch (RuntimeException e) {
                    throw new IllegalArgumentException("limit '" + name + "': unknown zone '" + zone + "'");
                }
            }
            case CONCURRENCY -> {
                positiveCount(name, count, 1);
                positiveDuration(name, "ttl", ttl);
                require(cost == null && settle == null, "limit '" + name + "': an in-flight limit takes one lease per call (no cost/settle)");
            }
            case LOCKOUT -> {
                positiveCount(name, count, 0);
                positiveDuration(name, "window", window);
                positiveDuration(name, "lock-time", lockTime);
                require(cost == null && settle == null, "limit '" + name + "': a lockout counts calls (no cost/settle)");
            }
        }
        require(settle == null || cost != null, "limit '" + name + "': settle needs a cost (the estimate it settles)");
    }

    /** The smallest value the module accepts for this limit's count (0 for quotas and lockouts). */
    public long minCount() {
        return type == LimitType.QUOTA || type == LimitType.LOCKOUT ? 0 : 1;
    }

    /** The RateLimit-Policy {@code w} in seconds, or -1 for none (an in-flight limit). */
    public long windowSeconds() {
        return switch (type) {
            case QUOTA -> nominalSeconds(period);
            case CONCURRENCY -> -1;
            default -> ceilSeconds(window.toMillis());
        };
    }

    /** A calendar period's nominal length (a natural day 86400 s, an hour 3600 s): the RateLimit-Policy {@code w}. */
    static long nominalSeconds(QuotaPeriod p) {
        return switch (p) {
            case MINUTE -> 60;
            case HOUR -> 3600;
            case DAY -> 86400;
            case WEEK -> 604800;
            case MONTH -> 2592000;
            case YEAR -> 31536000;
        };
    }

    public static long ceilSeconds(long ms) {
        return ms <= 0 ? 0 : (ms + 999) / 1000;
    }

    private static void positiveCount(String name, long count, long min) {
        require(count >= min && count <= MAX, "limit '" + name + "': count " + count + " must be from " + min + " to 2^53-1");
    }

    private static void positiveDuration(String name, String what, Duration d) {
        require(d != null && d.toMillis() >= 1, "limit '" + name + "': " + what + " must be at least 1 ms, got " + d);
    }

    static void require(boolean ok, String message) {
        if (!ok) {
            throw new IllegalArgumentException(message);
        }
    }
}
