package dev.redisratelimit.client;

/** At most {@code limit} units per calendar {@code period} (0 refuses everything: an off switch). */
public record QuotaLimit(QuotaPeriod period, long limit) {

    public QuotaLimit {
        if (period == null) {
            throw new IllegalArgumentException("period is required");
        }
        Limits.nonNegative("limit", limit);
    }

    public static QuotaLimit of(QuotaPeriod period, long limit) {
        return new QuotaLimit(period, limit);
    }
}
