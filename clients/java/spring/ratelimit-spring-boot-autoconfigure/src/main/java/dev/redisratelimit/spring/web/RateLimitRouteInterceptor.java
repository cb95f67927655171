package dev.redisratelimit.spring.web;

import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.http.ExemptCallers;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitRoutes;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.util.List;
import java.util.Map;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.spel.support.StandardEvaluationContext;
import org.springframework.http.server.RequestPath;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.AsyncHandlerInterceptor;
import org.springframework.web.util.ServletRequestPathUtils;

/**
 * {@code ratelimit.routes} in Spring MVC: before the handler runs, the routes
 * the request matches are decided (one RL.ALL for all of them) and the
 * rate-limit headers written; a refusal is thrown to the starter's exception
 * handler (429 / 503, exactly as for annotations). The permit is closed —
 * leases released, estimates settled — when the request completes, also
 * after async processing or an exception.
 *
 * <p>When the handler method has {@code @RateLimited} too, the routes are not
 * decided here: they wait in a request attribute for the method interceptor,
 * which decides them with the method's own policy in the same RL.ALL.
 */
public final class RateLimitRouteInterceptor implements AsyncHandlerInterceptor {

    static final String PERMIT = RateLimitRouteInterceptor.class.getName() + ".permit";

    private final RateLimitRoutes routes;
    private final RateLimiter limiter;
    private final AnnotationPolicies policies;
    private final CallerResolver caller;
    private final RateLimitAnswers answers;

    public RateLimitRouteInterceptor(RateLimitRoutes routes, RateLimiter limiter, AnnotationPolicies policies, CallerResolver caller,
            RateLimitAnswers answers) {
        this.routes = routes;
        this.limiter = limiter;
        this.policies = policies;
        this.caller = caller;
        this.answers = answers;
    }

    @Override
    public boolean preHandle(HttpServletRequest request, HttpServletResponse response, Object handler) {
        // Decided once per request: not again on an async or error dispatch (the /error page of a 429 included).
        if (request.getDispatcherType() != DispatcherType.REQUEST || request.getAttribute(PERMIT) != null) {
            return true;
        }
        List<RateLimitRoutes.Route> matched = routes.matching(path(request).pathWithinApplication(), request.getMethod());
        if (matched.isEmpty()) {
            return true;
        }
        // ratelimit.exempt: decided by nobody, the handler's @RateLimited included (the attribute tells it)
        ExemptCallers exempt = policies.exempt();
        if (exempt.ip(caller.clientIp(request))) {
            request.setAttribute(ExemptCallers.ATTRIBUTE, Boolean.TRUE);
            return true;
        }
        List<PolicyCall> calls = routes.calls(matched, new ServletRequestView(request, caller), RateLimitRouteInterceptor::context);
        if (exempt.anyKey(calls)) {
            request.setAttribute(ExemptCallers.ATTRIBUTE, Boolean.TRUE);
            return true;
        }
        if (handler instanceof HandlerMethod hm) {
            AnnotationPolicies.Resolved own = policies.resolve(hm.getMethod(), hm.getBeanType());
            if (own != null && !own.lockout()) {
                DeferredRoutes.defer(request, calls);
                return true;
            }
        }
        Permit permit = limiter.acquire(calls);
        request.setAttribute(PERMIT, permit);
        if (permit.decision() != null) {
            ServletHeaders.write(answers, response, permit.decision());
        }
        return true;
    }

    @Override
    public void afterConcurrentHandlingStarted(HttpServletRequest request, HttpServletResponse response, Object handler) {
        Object p = request.getAttribute(PERMIT);
        if (p instanceof Permit permit && request.isAsyncStarted()) {
            // Closed when the async cycle ends, whether it completes, times out or the client goes away.
            request.getAsyncContext().addListener(new AsyncListener() {
                @Override
                public void onComplete(AsyncEvent event) {
                    permit.closeAsync(Map.of()); // sent, not waited for: a slow Redis never delays the response
                }

                @Override
                public void onTimeout(AsyncEvent event) {
                }

                @Override
                public void onError(AsyncEvent event) {
                    permit.closeAsync(Map.of()); // sent, not waited for: a slow Redis never delays the response
                }

                @Override
                public void onStartAsync(AsyncEvent event) {
                }
            });
        }
    }

    @Override
    public void afterCompletion(HttpServletRequest request, HttpServletResponse response, Object handler, Exception ex) {
        Object p = request.getAttribute(PERMIT);
        if (p instanceof Permit permit && !request.isAsyncStarted()) {
            permit.closeAsync(Map.of()); // sent, not waited for: a slow Redis never delays the response
        }
    }

    private static RequestPath path(HttpServletRequest request) {
        // Parsed by the handler mapping already (PathPattern matching, Spring's default); else parsed here.
        return ServletRequestPathUtils.hasParsedRequestPath(request) ? ServletRequestPathUtils.getParsedRequestPath(request)
                : RequestPath.parse(request.getRequestURI(), request.getContextPath());
    }

    static EvaluationContext context(RateLimitRoutes.Request r) {
        StandardEvaluationContext ctx = new StandardEvaluationContext();
        ctx.setVariable("request", r.nativeRequest());
        ctx.setVariable("headers", RateLimitRoutes.headers(r));
        ctx.setVariable("ip", r.clientIp());
        ctx.setVariable("user", r.user());
        ctx.setVariable("path", r.path());
        ctx.setVariable("method", r.method());
        return ctx;
    }

    /** The servlet request as the key resolvers read it. */
    record ServletRequestView(HttpServletRequest request, CallerResolver caller) implements RateLimitRoutes.Request {
        @Override
        public String clientIp() {
            return caller.clientIp(request);
        }

        @Override
        public String user() {
            return caller.user(request);
        }

        @Override
        public String header(String name) {
            return request.getHeader(name);
        }

        @Override
        public String path() {
            return RateLimitRouteInterceptor.path(request).pathWithinApplication().value();
        }

        @Override
        public String method() {
            return request.getMethod();
        }

        @Override
        public Object nativeRequest() {
            return request;
        }
    }
}
