package dev.redisratelimit.spring.web;

import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.spring.http.DefaultRateLimitAnswers;
import jakarta.servlet.http.HttpServletResponse;
import java.time.Duration;

/**
 * The MVC adapter's answers: {@link DefaultRateLimitAnswers} (the same
 * headers and problem bodies as every adapter, clients/DESIGN.md) written to
 * the servlet response.
 */
public class DefaultRateLimitHttpAnswers extends DefaultRateLimitAnswers implements RateLimitHttpAnswers {

    public static final String PROBLEMS = DefaultRateLimitAnswers.PROBLEMS;

    public DefaultRateLimitHttpAnswers(boolean ietf, boolean legacy, Duration concurrencyRetryAfter) {
        super(ietf, legacy, concurrencyRetryAfter);
    }

    @Override
    public void writeHeaders(HttpServletResponse response, PolicyDecision d) {
        headers(d).forEach((name, values) -> response.setHeader(name, values.get(0)));
    }
}
