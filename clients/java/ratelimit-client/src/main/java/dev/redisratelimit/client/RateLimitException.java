package dev.redisratelimit.client;

/**
 * A Redis error reply to an RL command, carrying the server's text unchanged
 * (for example {@code ERR invalid window '0' for rule 2: ...} or
 * {@code WRONGTYPE Operation against a key holding the wrong kind of value}),
 * or a reply this client cannot read.
 */
public class RateLimitException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public RateLimitException(String message) {
        super(message);
    }

    public RateLimitException(String message, Throwable cause) {
        super(message, cause);
    }
}
