package dev.redisratelimit.spring.annotation;

import dev.redisratelimit.client.RateLimitArgumentException;
import dev.redisratelimit.client.RateLimitConfigurationException;
import dev.redisratelimit.spring.http.BadInput;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;

/**
 * A {@code @RateLimited} policy's SpEL expressions (key, zone, cost, settle)
 * evaluated the same way by the MVC and the WebFlux interceptors: a key or
 * zone the request does not give (null, empty, or a value the expression
 * could not parse) and a cost that is not an integer are the request's
 * mistake, 400 ({@link BadInput}); an expression that fails otherwise is the
 * app's, 500; a settle expression that cannot be read leaves the estimate
 * standing.
 */
public final class PolicyExpressions {

    private static final Logger log = LoggerFactory.getLogger(PolicyExpressions.class);

    private static final double MAX_USAGE = 9007199254740991d; // 2^53-1

    private PolicyExpressions() {
    }

    public static String string(Expression e, EvaluationContext ctx, String what, String policy) {
        Object v;
        try {
            v = e.getValue(ctx);
        } catch (RuntimeException ex) {
            if (BadInput.isValidationError(ex)) { // the request's input, not the app's expression (§5): 400
                throw new RateLimitArgumentException(what, "policy '" + policy + "': invalid " + what + " (expression '"
                        + e.getExpressionString() + "'): " + ex.getMessage(), ex);
            }
            throw new RateLimitConfigurationException("policy '" + policy + "': " + what + " expression '" + e.getExpressionString()
                    + "' failed: " + ex.getMessage(), ex);
        }
        if (v == null || v.toString().isEmpty()) {
            // The request gives no key (a header or parameter it lacks): a 400, as a route answers it.
            throw new RateLimitArgumentException(what, "policy '" + policy + "': the request gives no " + what + " (expression '"
                    + e.getExpressionString() + "' evaluated to " + (v == null ? "null" : "an empty string") + ")");
        }
        return v.toString();
    }

    public static long cost(Expression e, EvaluationContext ctx, String policy) {
        Object v;
        try {
            v = e.getValue(ctx);
        } catch (RuntimeException ex) {
            if (BadInput.isValidationError(ex)) {
                throw new RateLimitArgumentException("cost", "policy '" + policy + "': invalid cost (expression '"
                        + e.getExpressionString() + "'): " + ex.getMessage(), ex);
            }
            throw new RateLimitConfigurationException("policy '" + policy + "': cost expression '" + e.getExpressionString()
                    + "' failed: " + ex.getMessage(), ex);
        }
        // A client-chosen cost: not an integer is a 400; 0, negatives and costs above the clause are refused by the client (400).
        return BadInput.cost(v, "policy '" + policy + "'");
    }

    // The usage reported by the result; if it cannot be read, the estimate stands (nothing settled).
    public static long usage(Expression e, EvaluationContext ctx, long estimate, String policy) {
        try {
            Object v = e.getValue(ctx);
            // An integer from 0 to 2^53-1 (CLIENTS.md §4; above the limit's q it counts as q): a BigInteger
            // such as 10**20, a fraction or a negative is refused, and the estimate stands.
            if ((v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte
                    || v instanceof java.math.BigInteger) && ((Number) v).doubleValue() >= 0 && ((Number) v).doubleValue() <= MAX_USAGE) {
                return ((Number) v).longValue();
            }
            log.warn("policy '{}': settle expression '{}' gave {}; the estimate {} stands", policy, e.getExpressionString(), v, estimate);
        } catch (RuntimeException ex) {
            log.warn("policy '{}': settle expression '{}' failed ({}); the estimate {} stands", policy, e.getExpressionString(),
                    ex.getMessage(), estimate);
        }
        return estimate;
    }
}
