package dev.redisratelimit.client;

/**
 * One named limit's state after a decision, as the HTTP headers show it:
 * {@code q} its limit, {@code w} its window in seconds (-1: none, an in-flight
 * limit), {@code r} what remains, {@code t} seconds until it resets, and
 * whether it alone refuses, with its retry-after in ms (-1: waiting cannot help
 * or not refused).
 */
public record LimitState(String name, long q, long w, long r, long t, boolean limited, long retryAfterMs) {
}
