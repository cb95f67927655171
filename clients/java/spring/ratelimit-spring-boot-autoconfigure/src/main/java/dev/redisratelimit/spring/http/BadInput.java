package dev.redisratelimit.spring.http;

import dev.redisratelimit.client.RateLimitArgumentException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Set;

/**
 * What a request brought that the rate limit cannot take (CLIENTS.md §5),
 * answered 400 {@code .../bad-request} by both stacks, never 500: a call's
 * key, cost, estimate, zone or subkey refused by the client before anything
 * is sent ({@link RateLimitArgumentException} naming one of those fields), a
 * cost expression that gives no integer, or an expression of the app's that
 * fails with a validation error (a value it could not parse or convert). Any
 * other failure of an app's expression is a bug, and a 500.
 */
public final class BadInput {

    private static final Set<String> CALL_FIELDS = Set.of("key", "cost", "estimate", "zone", "subkeys");

    private BadInput() {
    }

    /** A refusal of what this call brought (not of a definition, which would be the app's own mistake). */
    public static boolean isCallInput(Throwable e) {
        return e instanceof RateLimitArgumentException a && CALL_FIELDS.contains(a.field());
    }

    /** The app's expression failed on the request's input: a number or a value that could not be read. */
    public static boolean isValidationError(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof IllegalArgumentException // NumberFormatException among them
                    || t instanceof org.springframework.core.convert.ConversionException
                    || t.getClass().getName().equals("jakarta.validation.ValidationException")
                    || t.getClass().getName().equals("jakarta.validation.ConstraintViolationException")) {
                return true;
            }
        }
        return false;
    }

    /**
     * A client-chosen cost as a long: an integral number, or a text of
     * decimal digits (a header or a query parameter); the bounds are the
     * client's to check (it refuses 0, negatives and costs above the clause,
     * naming the field). Anything else: a 400 naming {@code cost}.
     */
    public static long cost(Object v, String where) {
        if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
            return ((Number) v).longValue();
        }
        try {
            BigDecimal d = v instanceof CharSequence s ? new BigDecimal(s.toString().trim())
                    : v instanceof BigInteger b ? new BigDecimal(b)
                    : v instanceof Number n ? new BigDecimal(n.toString()) : null;
            if (d != null) {
                return d.longValueExact(); // fractional or beyond a long: ArithmeticException
            }
        } catch (NumberFormatException | ArithmeticException e) {
            // below
        }
        throw new RateLimitArgumentException("cost", "invalid cost '" + v + "' (" + where + "): expected an integer");
    }
}
