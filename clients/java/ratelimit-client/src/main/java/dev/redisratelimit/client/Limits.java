package dev.redisratelimit.client;

import java.time.Duration;
import java.time.Instant;

/** The module's argument ranges (SPEC "Conventions"), checked before any call. */
final class Limits {

    /** 2^53-1: the largest integer, duration and time the module accepts. */
    static final long MAX = 9_007_199_254_740_991L;
    /** The largest COST of RL.CHECK, RL.LEASE (one member per unit). */
    static final long COST_CAP = 10_000;
    /** At most 64 rules (clauses' rules), keys and tokens per call. */
    static final int RULE_CAP = 64;
    /** RL.QUOTA's latest {@code now}: the end of year 9999 UTC. */
    static final long QUOTA_NOW_MAX = 253_402_300_799_999L;

    private Limits() {
    }

    static long positive(String what, long value) {
        if (value < 1 || value > MAX) {
            throw new IllegalArgumentException("invalid " + what + " '" + value + "': expected an integer from 1 to " + MAX);
        }
        return value;
    }

    static long nonNegative(String what, long value) {
        if (value < 0 || value > MAX) {
            throw new IllegalArgumentException("invalid " + what + " '" + value + "': expected an integer from 0 to " + MAX);
        }
        return value;
    }

    /** A duration in whole ms within [1, 2^53-1] (the module's time unit). */
    static long millis(String what, Duration duration) {
        if (duration == null) {
            throw new IllegalArgumentException(what + " is required");
        }
        if (duration.isNegative() || duration.isZero()) {
            throw new IllegalArgumentException("invalid " + what + " '" + duration.toMillis() + "' ms: expected an integer from 1 to " + MAX + " ms");
        }
        if (duration.getNano() % 1_000_000 != 0) {
            throw new IllegalArgumentException("invalid " + what + " " + duration + ": the module counts whole milliseconds");
        }
        long ms;
        try {
            ms = duration.toMillis();
        } catch (ArithmeticException e) {
            ms = Long.MAX_VALUE;
        }
        return positive(what + " (ms)", ms);
    }

    /** A duration in whole ms within [0, 2^53-1] (RESERVE's max wait). */
    static long millisOrZero(String what, Duration duration) {
        if (duration != null && duration.isZero()) {
            return 0;
        }
        return millis(what, duration);
    }

    static String now(Instant now) {
        if (now == null) {
            return "*";
        }
        long ms;
        try {
            ms = now.toEpochMilli();
        } catch (ArithmeticException e) {
            ms = -1;
        }
        if (ms < 0 || ms > MAX) {
            throw new IllegalArgumentException("invalid now '" + now + "': expected a Unix time in ms from 0 to " + MAX);
        }
        return Long.toString(ms);
    }

    /** TOKEN: 1 to 64 bytes, each printable ASCII other than space and '#'. */
    static String token(String token) {
        if (token == null || token.isEmpty() || token.length() > 64) {
            throw new IllegalArgumentException("invalid token '" + token + "': expected 1 to 64 printable ASCII characters other than space and '#'");
        }
        for (int i = 0; i < token.length(); i++) {
            char c = token.charAt(i);
            if (c <= ' ' || c > '~' || c == '#') {
                throw new IllegalArgumentException("invalid token '" + token + "': expected 1 to 64 printable ASCII characters other than space and '#'");
            }
        }
        return token;
    }

    static String key(String what, String key) {
        if (key == null) {
            throw new IllegalArgumentException(what + " is required");
        }
        return key;
    }
}
