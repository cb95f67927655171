package dev.redisratelimit.spring.http;

import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.spring.http.RateLimitKeyMissingException;
import org.springframework.http.HttpHeaders;
import org.springframework.http.ProblemDetail;

/**
 * How decisions become HTTP, whatever the web stack: the rate-limit headers
 * of every decided response and the problem bodies of refusals
 * (clients/DESIGN.md). The MVC and WebFlux adapters both write what this
 * gives, so they answer alike. A bean of this type replaces the default
 * ({@link DefaultRateLimitAnswers}; extend it to change one piece) in either.
 */
public interface RateLimitAnswers {

    /** Headers of an admitted or refused call (RateLimit-Policy, RateLimit, opt-in X-RateLimit-*), in order. */
    HttpHeaders headers(PolicyDecision decision);

    /** Retry-After seconds of a refusal, or null for none (waiting cannot help). */
    Long retryAfterSeconds(PolicyDecision decision);

    /** The 429 body. */
    ProblemDetail refused(PolicyDecision decision);

    /** The 503 body of a fail-closed policy while Redis is down. */
    ProblemDetail unavailable(String policy);

    /** The 500 body of a rate limit that cannot be applied as configured. */
    ProblemDetail misconfigured(String message);

    /**
     * The body when a route finds no key to count the caller by: 401
     * {@code .../problems/unauthorized} when the key names the caller (no
     * principal, no API-key header), else 400 {@code .../problems/bad-request}.
     */
    default ProblemDetail missingKey(RateLimitKeyMissingException e) {
        return DefaultRateLimitAnswers.missingKeyProblem(e);
    }
}
