package dev.redisratelimit.client;

/**
 * A definition (policy, limit, prefix) or a call's input (key, cost,
 * estimate, zone, subkey) refused before anything is sent to Redis.
 * {@link #field()} names what was refused with the name the Java, Python and
 * Node clients share (Python's and Node's {@code error.field}; the table in
 * {@code clients/conformance/README.md}): {@code name}, {@code prefix},
 * {@code tag}, {@code limits}, {@code limit_name}, a limit's parameter
 * ({@code count}, {@code window}, {@code rate}, {@code per}, {@code burst},
 * {@code period}, {@code limit}, {@code zone}, {@code ttl}, {@code max},
 * {@code lock_time}), or a call's {@code key}, {@code cost}, {@code estimate},
 * {@code zone}, {@code subkeys}. Code can branch on the field (a form's error
 * message, a 400's pointer) instead of parsing the message, whose wording is
 * free.
 */
public class RateLimitArgumentException extends IllegalArgumentException {

    private static final long serialVersionUID = 1L;

    private final String field;

    public RateLimitArgumentException(String field, String message) {
        super(message);
        this.field = field;
    }

    public RateLimitArgumentException(String field, String message, Throwable cause) {
        super(message, cause);
        this.field = field;
    }

    /** The refused field, as the three clients name it (snake_case: {@code limit_name}, {@code lock_time}). */
    public String field() {
        return field;
    }
}
