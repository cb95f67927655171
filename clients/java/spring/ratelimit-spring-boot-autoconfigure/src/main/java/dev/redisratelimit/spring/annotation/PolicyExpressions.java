package dev.redisratelimit.spring.annotation;

import dev.redisratelimit.client.RateLimitConfigurationException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;

/**
 * A {@code @RateLimited} policy's SpEL expressions (key, zone, cost, settle)
 * evaluated the same way by the MVC and the WebFlux interceptors: a key that
 * fails or is empty, or a cost that is not an integer of 1 or more, is a
 * configuration error; a settle expression that cannot be read leaves the
 * estimate standing.
 */
public final class PolicyExpressions {

    private static final Logger log = LoggerFactory.getLogger(PolicyExpressions.class);

    private PolicyExpressions() {
    }

    public static String string(Expression e, EvaluationContext ctx, String what, String policy) {
        Object v;
        try {
            v = e.getValue(ctx);
        } catch (RuntimeException ex) {
            throw new RateLimitConfigurationException("policy '" + policy + "': " + what + " expression '" + e.getExpressionString()
                    + "' failed: " + ex.getMessage(), ex);
        }
        if (v == null || v.toString().isEmpty()) {
            throw new RateLimitConfigurationException("policy '" + policy + "': " + what + " expression '" + e.getExpressionString()
                    + "' evaluated to " + (v == null ? "null" : "an empty string"));
        }
        return v.toString();
    }

    public static long cost(Expression e, EvaluationContext ctx, String policy) {
        Object v = e.getValue(ctx);
        if (!(v instanceof Number n) || n.longValue() < 1 || n.doubleValue() != n.longValue()) {
            throw new RateLimitConfigurationException("policy '" + policy + "': cost expression '" + e.getExpressionString()
                    + "' must give an integer of 1 or more, gave " + v);
        }
        return n.longValue();
    }

    // The usage reported by the result; if it cannot be read, the estimate stands (nothing settled).
    public static long usage(Expression e, EvaluationContext ctx, long estimate, String policy) {
        try {
            Object v = e.getValue(ctx);
            if (v instanceof Number n && n.longValue() >= 0) {
                return n.longValue();
            }
            log.warn("policy '{}': settle expression '{}' gave {}; the estimate {} stands", policy, e.getExpressionString(), v, estimate);
        } catch (RuntimeException ex) {
            log.warn("policy '{}': settle expression '{}' failed ({}); the estimate {} stands", policy, e.getExpressionString(),
                    ex.getMessage(), estimate);
        }
        return estimate;
    }
}
