package dev.redisratelimit.client;

/**
 * A rate limit that cannot be applied as configured (a key expression that
 * evaluates to null, a cost out of range): the call is not served unlimited,
 * it fails with this (500 in MVC) and the message says what to fix.
 */
public class RateLimitConfigurationException extends RuntimeException {
    public RateLimitConfigurationException(String message) {
        super(message);
    }

    public RateLimitConfigurationException(String message, Throwable cause) {
        super(message, cause);
    }
}
