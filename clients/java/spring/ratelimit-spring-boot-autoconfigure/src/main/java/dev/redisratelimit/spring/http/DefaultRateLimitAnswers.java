package dev.redisratelimit.spring.http;

import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.Limit;
import dev.redisratelimit.spring.http.RateLimitKeyMissingException;
import java.net.URI;
import java.time.Duration;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;

/**
 * The answers every redis-ratelimit adapter (MVC, WebFlux) gives (clients/DESIGN.md): 429
 * RFC 9457 problems typed {@code .../rate-limited}, {@code /duplicate} or
 * {@code /locked}; Retry-After = the binding limit's retry-after rounded up
 * (none when waiting cannot help; the configured small value when an in-flight
 * limit binds); {@code RateLimit-Policy: "short";q=2;w=10, ...} and
 * {@code RateLimit: "short";r=1;t=10, ...} one item per limit in the policy's
 * order; opt-in X-RateLimit-Limit/Remaining/Reset of the binding limit.
 */
public class DefaultRateLimitAnswers implements RateLimitAnswers {

    public static final String PROBLEMS = "https://redis-ratelimit.dev/problems/";

    protected final boolean ietf;
    protected final boolean legacy;
    protected final Duration concurrencyRetryAfter;

    public DefaultRateLimitAnswers(boolean ietf, boolean legacy, Duration concurrencyRetryAfter) {
        this.ietf = ietf;
        this.legacy = legacy;
        this.concurrencyRetryAfter = concurrencyRetryAfter;
    }

    @Override
    public ProblemDetail missingKey(RateLimitKeyMissingException e) {
        return missingKeyProblem(e);
    }

    /** 401 {@code .../unauthorized} when the missing key names the caller, else 400 {@code .../bad-request}. */
    public static ProblemDetail missingKeyProblem(RateLimitKeyMissingException e) {
        ProblemDetail p = ProblemDetail.forStatus(e.isIdentity() ? HttpStatus.UNAUTHORIZED : HttpStatus.BAD_REQUEST);
        p.setType(URI.create(PROBLEMS + (e.isIdentity() ? "unauthorized" : "bad-request")));
        p.setTitle(e.isIdentity() ? "Unauthorized" : "Bad Request");
        p.setDetail(e.getMessage());
        return p;
    }

    @Override
    public HttpHeaders headers(PolicyDecision d) {
        HttpHeaders h = new HttpHeaders();
        if (d.limits().isEmpty()) {
            return h;
        }
        if (ietf) {
            StringBuilder policy = new StringBuilder();
            StringBuilder state = new StringBuilder();
            for (LimitState s : d.limits()) {
                if (!policy.isEmpty()) {
                    policy.append(", ");
                    state.append(", ");
                }
                policy.append('"').append(s.name()).append("\";q=").append(s.q());
                if (s.w() >= 0) {
                    policy.append(";w=").append(s.w());
                }
                state.append('"').append(s.name()).append("\";r=").append(s.r()).append(";t=").append(s.t());
            }
            h.set("RateLimit-Policy", policy.toString());
            h.set("RateLimit", state.toString());
        }
        LimitState b = d.bindingLimit();
        if ((legacy || d.legacyHeaders()) && b != null) {
            h.set("X-RateLimit-Limit", Long.toString(b.q()));
            h.set("X-RateLimit-Remaining", Long.toString(b.r()));
            h.set("X-RateLimit-Reset", Long.toString(b.t()));
        }
        return h;
    }

    @Override
    public Long retryAfterSeconds(PolicyDecision d) {
        if (d.admitted() || d.retryAfterMs() < 0) {
            return null;
        }
        if (d.bindingKind() == Limit.Kind.CONCURRENCY) {
            return Math.max(1, Limit.ceilSeconds(concurrencyRetryAfter.toMillis()));
        }
        return Limit.ceilSeconds(d.retryAfterMs());
    }

    @Override
    public ProblemDetail refused(PolicyDecision d) {
        ProblemDetail p = ProblemDetail.forStatus(HttpStatus.TOO_MANY_REQUESTS);
        p.setTitle("Too Many Requests");
        LimitState b = d.bindingLimit();
        switch (d.kind()) {
            case DUPLICATE -> {
                p.setType(URI.create(PROBLEMS + "duplicate"));
                p.setDetail("The same request was admitted moments ago; it is not repeated.");
            }
            case LOCKED -> {
                p.setType(URI.create(PROBLEMS + "locked"));
                p.setDetail("Too many calls: locked out" + (d.retryAfterMs() >= 0 ? " for " + Limit.ceilSeconds(d.retryAfterMs()) + " s." : "."));
            }
            default -> {
                p.setType(URI.create(PROBLEMS + "rate-limited"));
                p.setDetail("Rate limit" + (b != null ? " '" + b.name() + "'" : "") + " exceeded"
                        + (d.retryAfterMs() >= 0 ? "; retry in " + retryAfterSeconds(d) + " s." : "; waiting will not help."));
            }
        }
        return p;
    }

    @Override
    public ProblemDetail unavailable(String policy) {
        ProblemDetail p = ProblemDetail.forStatus(HttpStatus.SERVICE_UNAVAILABLE);
        p.setType(URI.create(PROBLEMS + "unavailable"));
        p.setTitle("Service Unavailable");
        p.setDetail("The rate limiter cannot decide right now; try again shortly.");
        return p;
    }

    @Override
    public ProblemDetail misconfigured(String message) {
        ProblemDetail p = ProblemDetail.forStatus(HttpStatus.INTERNAL_SERVER_ERROR);
        p.setType(URI.create(PROBLEMS + "misconfigured"));
        p.setTitle("Internal Server Error");
        p.setDetail(message);
        return p;
    }
}
