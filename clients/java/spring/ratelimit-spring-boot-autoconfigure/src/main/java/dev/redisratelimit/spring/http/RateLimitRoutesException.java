package dev.redisratelimit.spring.http;

/**
 * A {@code ratelimit.routes} entry that cannot work (an unknown policy, a path
 * pattern or SpEL that does not parse, a header resolver without a header):
 * thrown at start-up so the application does not run with a route unlimited;
 * {@code RateLimitRoutesFailureAnalyzer} prints it with what to change.
 */
public class RateLimitRoutesException extends IllegalStateException {

    private final String property;

    public RateLimitRoutesException(String property, String problem, Throwable cause) {
        super(property + ": " + problem, cause);
        this.property = property;
    }

    /** The offending property, e.g. {@code ratelimit.routes[2].paths[0]}. */
    public String getProperty() {
        return property;
    }
}
