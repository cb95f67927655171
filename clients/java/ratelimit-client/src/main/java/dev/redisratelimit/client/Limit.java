package dev.redisratelimit.client;

import java.time.Duration;
import java.time.ZoneId;

/**
 * One named limit of a {@link Policy}, validated as the module would validate
 * it (so a window of 0 fails when the policy is built, not on the first
 * call). Build it with {@link #slidingWindow}, {@link #tokenBucket},
 * {@link #quota}, {@link #concurrency} or {@link #lockout}, then
 * {@link #asShared()} (one counter for every key), {@link #costedBy(String)}
 * or {@link #estimated()}.
 *
 * <p>{@code count} is the configured value — a window's or quota's limit, a
 * bucket's rate, a concurrency limit, a lockout's max: the {@code q} of the
 * {@code RateLimit-Policy} header; a runtime override replaces it (see
 * {@link RuntimeLimits}).
 *
 * <p>{@code cost} and {@code settle} label where a call's charge and usage
 * come from (the Spring starter puts its SpEL text there): limits charged by
 * different costs are decided by different clauses, as are limits whose
 * charge is an estimate settled afterwards ({@code settle} set) and limits
 * charged a fixed cost. Null {@code cost}: the call's cost (default 1).
 */
public record Limit(
        String name,
        Kind kind,
        long count,
        Duration window,
        long burst,
        QuotaPeriod period,
        ZoneId zone,
        Duration ttl,
        Duration lockTime,
        boolean shared,
        String cost,
        String settle) {

    /** Which limiter decides it, and the RL command. */
    public enum Kind {
        /** RL.CHECK: at most {@code count} in any {@code window} (a CHECK clause). */
        SLIDING_WINDOW,
        /** RL.THROTTLE: {@code count} per {@code window}, bursts of {@code burst} (a THROTTLE clause). */
        TOKEN_BUCKET,
        /** RL.QUOTA: {@code count} per calendar {@code period} in {@code zone} (a QUOTA clause). */
        QUOTA,
        /** RL.LEASE: at most {@code count} in flight, a lease of {@code ttl} per call (a LEASE clause). */
        CONCURRENCY,
        /** RL.LOCKCOUNT: {@code count} calls per {@code window}, then locked for {@code lockTime} (alone in its policy). */
        LOCKOUT
    }

    /** The label of the estimate a plain-Java {@link PolicyCall#withEstimate(long)} charges. */
    public static final String ESTIMATE = "estimate";

    static final long MAX = (1L << 53) - 1;

    public Limit {
        require(name != null && !name.isBlank() && name.matches("[A-Za-z0-9_.-]+"), "limit_name",
                "a limit needs a name of letters, digits, '_', '.' or '-' (it names a RateLimit header item), got '" + name + "'");
        require(kind != null, "kind", "limit '" + name + "': a type");
        cost = cost == null || cost.isBlank() ? null : cost;
        settle = settle == null || settle.isBlank() ? null : settle;
        switch (kind) {
            case SLIDING_WINDOW -> {
                positiveCount(name, "count", count, 1);
                positiveDuration(name, "window", window);
            }
            case TOKEN_BUCKET -> {
                positiveCount(name, "rate", count, 1);
                positiveDuration(name, "per", window);
                if (burst == 0) {
                    burst = count;
                }
                require(burst >= 1 && burst <= MAX, "burst", "limit '" + name + "': burst " + burst + " must be from 1 to 2^53-1");
                require(window.toMillis() * 1_000_000L / count >= 1, "rate",
                        "limit '" + name + "': " + count + " per " + window + " is under one nanosecond per call");
            }
            case QUOTA -> {
                positiveCount(name, "limit", count, 0);
                require(period != null, "period", "limit '" + name + "': a quota needs a period");
                // A null zone stays null: each call names it (PolicyCall.withZone), else the call is refused.
            }
            case CONCURRENCY -> {
                positiveCount(name, "limit", count, 1);
                positiveDuration(name, "ttl", ttl);
                require(cost == null && settle == null, "cost",
                        "limit '" + name + "': an in-flight limit takes one lease per call (no cost/settle)");
            }
            case LOCKOUT -> {
                positiveCount(name, "max", count, 0);
                positiveDuration(name, "window", window);
                positiveDuration(name, "lock_time", lockTime);
                require(cost == null && settle == null, "cost", "limit '" + name + "': a lockout counts calls (no cost/settle)");
                require(!shared, "limits", "limit '" + name + "': a lockout counts per key (not shared)");
            }
        }
        require(settle == null || cost != null, "cost", "limit '" + name + "': settle needs a cost (the estimate it settles)");
    }

    /** At most {@code count} units in any {@code window} (RL.CHECK). */
    public static Limit slidingWindow(String name, long count, Duration window) {
        return new Limit(name, Kind.SLIDING_WINDOW, count, window, 0, null, null, null, null, false, null, null);
    }

    /** {@code rate} units per {@code per}, {@code burst} (1 or more) at once (GCRA, RL.THROTTLE). */
    public static Limit tokenBucket(String name, long rate, Duration per, long burst) {
        require(burst >= 1, "burst", "limit '" + name + "': burst " + burst + " must be from 1 to 2^53-1");
        return new Limit(name, Kind.TOKEN_BUCKET, rate, per, burst, null, null, null, null, false, null, null);
    }

    /**
     * At most {@code limit} per natural {@code period} in {@code zone} (RL.QUOTA); a call may name another
     * zone. A null {@code zone}: each call names it ({@link PolicyCall#withZone}); a call without one is
     * refused (field {@code zone}), as in the Python and Node clients.
     */
    public static Limit quota(String name, ZoneId zone, QuotaPeriod period, long limit) {
        return new Limit(name, Kind.QUOTA, limit, null, 0, period, zone, null, null, false, null, null);
    }

    /** At most {@code limit} in flight: a lease of {@code ttl} per call, released when its permit closes (RL.LEASE). */
    public static Limit concurrency(String name, long limit, Duration ttl) {
        return new Limit(name, Kind.CONCURRENCY, limit, null, 0, null, null, ttl, null, false, null, null);
    }

    /** {@code max} calls per fixed {@code window}, then locked for {@code lockTime} (RL.LOCKCOUNT; alone in its policy). */
    public static Limit lockout(String name, long max, Duration window, Duration lockTime) {
        return new Limit(name, Kind.LOCKOUT, max, window, 0, null, null, null, lockTime, false, null, null);
    }

    /** The same limit with one counter for every key (a global budget); its policy needs a tag. */
    public Limit asShared() {
        return new Limit(name, kind, count, window, burst, period, zone, ttl, lockTime, true, cost, settle);
    }

    /** The same limit charged by the call's cost labelled {@code cost} (limits of different labels: different clauses). */
    public Limit costedBy(String cost) {
        return new Limit(name, kind, count, window, burst, period, zone, ttl, lockTime, shared, cost, settle);
    }

    /** The same limit charged with the call's estimate, settled to the usage reported when its permit closes. */
    public Limit estimated() {
        return new Limit(name, kind, count, window, burst, period, zone, ttl, lockTime, shared, ESTIMATE, ESTIMATE);
    }

    /** The same limit with its charge settled afterwards from the usage labelled {@code settle}. */
    public Limit settledBy(String cost, String settle) {
        return new Limit(name, kind, count, window, burst, period, zone, ttl, lockTime, shared, cost, settle);
    }

    /** The smallest value the module accepts for this limit's count (0 for quotas and lockouts). */
    public long minCount() {
        return kind == Kind.QUOTA || kind == Kind.LOCKOUT ? 0 : 1;
    }

    /** The RateLimit-Policy {@code w} in seconds, or -1 for none (an in-flight limit). */
    public long windowSeconds() {
        return switch (kind) {
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

    /** Milliseconds as whole seconds, rounded up (the headers' unit). */
    public static long ceilSeconds(long ms) {
        return ms <= 0 ? 0 : (ms + 999) / 1000;
    }

    private static void positiveCount(String name, String field, long count, long min) {
        require(count >= min && count <= MAX, field, "limit '" + name + "': " + field + " " + count + " must be from " + min + " to 2^53-1");
    }

    private static void positiveDuration(String name, String field, Duration d) {
        require(d != null && d.toMillis() >= 1, field, "limit '" + name + "': " + field + " must be at least 1 ms, got " + d);
    }

    static void require(boolean ok, String message) {
        if (!ok) {
            throw new IllegalArgumentException(message);
        }
    }

    /** Refuses naming {@code field} as the three clients name it ({@link RateLimitArgumentException#field()}). */
    static void require(boolean ok, String field, String message) {
        if (!ok) {
            throw new RateLimitArgumentException(field, message);
        }
    }
}
