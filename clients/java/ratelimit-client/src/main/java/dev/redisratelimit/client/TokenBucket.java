package dev.redisratelimit.client;

import java.math.BigInteger;
import java.time.Duration;

/**
 * One GCRA token-bucket rule of RL.THROTTLE: {@code burst} units at once,
 * refilled at {@code count} units per {@code window}. Checked when built: the
 * emission interval {@code window/count} must be at least 1 ns and the bucket
 * depth {@code burst * window/count} at most 2^53-1 ms, as the module requires.
 */
public record TokenBucket(long burst, long count, Duration window) {

    private static final BigInteger MILLION = BigInteger.valueOf(1_000_000);

    public TokenBucket {
        Limits.positive("burst", burst);
        Limits.positive("count", count);
        long ms = Limits.millis("window", window);
        BigInteger interval = BigInteger.valueOf(ms).multiply(MILLION).divide(BigInteger.valueOf(count));
        if (interval.signum() < 1) {
            throw new IllegalArgumentException("invalid rule: " + count + " per " + ms + " ms is under 1 ns between units");
        }
        if (interval.multiply(BigInteger.valueOf(burst)).compareTo(BigInteger.valueOf(Limits.MAX).multiply(MILLION)) > 0) {
            throw new IllegalArgumentException("invalid rule: a bucket of " + burst + " at " + count + " per " + ms + " ms takes longer than 2^53-1 ms to refill");
        }
    }

    /** {@code rate} units per {@code per}, bursts of up to {@code burst}. */
    public static TokenBucket of(long rate, Duration per, long burst) {
        return new TokenBucket(burst, rate, per);
    }

    long windowMillis() {
        return window.toMillis();
    }
}
