package dev.redisratelimit.spring.web;

import dev.redisratelimit.client.PolicyCall;
import jakarta.servlet.http.HttpServletRequest;
import java.util.List;

/**
 * Route decisions handed from the MVC route interceptor to the
 * {@code @RateLimited} method interceptor through a request attribute, so a
 * request matched by routes whose handler is annotated is decided in one
 * RL.ALL (free of Spring MVC types: the method interceptor loads it).
 */
public final class DeferredRoutes {

    static final String ATTRIBUTE = DeferredRoutes.class.getName();

    private DeferredRoutes() {
    }

    static void defer(HttpServletRequest request, List<PolicyCall> calls) {
        request.setAttribute(ATTRIBUTE, calls);
    }

    /** The route calls waiting for this request's first {@code @RateLimited} call, taken; null when none. */
    @SuppressWarnings("unchecked")
    public static List<PolicyCall> take(HttpServletRequest request) {
        Object v = request.getAttribute(ATTRIBUTE);
        if (v == null) {
            return null;
        }
        request.removeAttribute(ATTRIBUTE);
        return (List<PolicyCall>) v;
    }
}
