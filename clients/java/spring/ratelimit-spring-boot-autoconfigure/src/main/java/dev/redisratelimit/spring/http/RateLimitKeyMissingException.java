package dev.redisratelimit.spring.http;

/**
 * A route's key resolver found nothing to count the caller by: no principal
 * (401), no such header (401: it names the caller, like an API key), or a key
 * expression that gave null or "" (400). The request is answered with a
 * problem, never let through unlimited.
 */
public class RateLimitKeyMissingException extends RuntimeException {

    private final boolean identity;

    public RateLimitKeyMissingException(String message, boolean identity) {
        super(message, null, false, false);
        this.identity = identity;
    }

    /** True when the missing key names the caller (401); false for a bad request (400). */
    public boolean isIdentity() {
        return identity;
    }
}
