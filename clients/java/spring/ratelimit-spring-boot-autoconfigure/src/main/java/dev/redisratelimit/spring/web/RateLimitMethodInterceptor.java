package dev.redisratelimit.spring.web;

import static dev.redisratelimit.spring.annotation.PolicyExpressions.cost;
import static dev.redisratelimit.spring.annotation.PolicyExpressions.string;
import static dev.redisratelimit.spring.annotation.PolicyExpressions.usage;

import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitConfigurationException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.http.RateLimitKeyMissingException;
import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.PolicyExpressions;
import dev.redisratelimit.spring.http.ExemptCallers;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.EvaluationContext;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/**
 * Around a {@code @RateLimited} method: resolves the caller's key and costs,
 * decides (one Redis call), writes the rate-limit headers of an admission,
 * runs the method, and — whether it returns or throws — releases its leases
 * and settles its estimates from {@code #result}.
 */
public final class RateLimitMethodInterceptor implements MethodInterceptor {

    private final ObjectProvider<AnnotationPolicies> policies;
    private final ObjectProvider<RateLimiter> limiter;
    private final ObjectProvider<CallerResolver> callers;
    private final ObjectProvider<RateLimitAnswers> answers;
    private final ParameterNameDiscoverer names = new DefaultParameterNameDiscoverer();
    // The beans, once found: an ObjectProvider looks its bean up in the bean factory on every call,
    // which cost more than the rest of the interceptor (bench/spring). The interceptor is made
    // before them (the post-processor is infrastructure), so they are found on first use. A bean
    // that is absent is looked up again next time, as before.
    private volatile AnnotationPolicies policiesBean;
    private volatile RateLimiter limiterBean;
    private volatile CallerResolver callerBean;
    private volatile RateLimitAnswers answersBean;

    public RateLimitMethodInterceptor(ObjectProvider<AnnotationPolicies> policies, ObjectProvider<RateLimiter> limiter,
            ObjectProvider<CallerResolver> callers, ObjectProvider<RateLimitAnswers> answers) {
        this.policies = policies;
        this.limiter = limiter;
        this.callers = callers;
        this.answers = answers;
    }

    @Override
    public Object invoke(MethodInvocation inv) throws Throwable {
        Method method = inv.getMethod();
        Class<?> target = inv.getThis() != null ? AopUtils.getTargetClass(inv.getThis()) : method.getDeclaringClass();
        AnnotationPolicies.Resolved r = policies().resolve(method, target);
        if (r == null) {
            return inv.proceed();
        }
        RequestAttributes ra = RequestContextHolder.getRequestAttributes();
        HttpServletRequest request = ra instanceof ServletRequestAttributes s ? s.getRequest() : null;
        HttpServletResponse response = ra instanceof ServletRequestAttributes s ? s.getResponse() : null;
        CallerResolver caller = caller();
        // ratelimit.exempt: decided by nobody (nothing written, no headers, no permit); a route already found it exempt,
        // or its client IP is exempt.
        ExemptCallers exempt = policies().exempt();
        if (request != null && (request.getAttribute(ExemptCallers.ATTRIBUTE) != null
                || !exempt.isEmpty() && caller != null && exempt.ip(caller.clientIp(request)))) {
            DeferredRoutes.take(request);
            return inv.proceed();
        }
        // The SpEL context only when an expression reads it: most policies key by IP or user and have none.
        Expressions spel = new Expressions(inv, method, request, caller);
        // One call per @RateLimited on the method (several when repeated), with its key and costs.
        List<AnnotationPolicies.Part> parts = r.parts();
        List<PolicyCall> own = new ArrayList<>(parts.size());
        for (AnnotationPolicies.Part part : parts) {
            own.add(call(part, spel, request, caller));
        }
        // Routes this request matched wait for its handler's policies: all decided in one RL.ALL.
        List<PolicyCall> routes = request != null ? DeferredRoutes.take(request) : null;
        if (exempt.anyKey(own) || exempt.anyKey(routes)) {
            return inv.proceed(); // an exempt key: decided by nobody
        }
        Permit permit;
        try {
            permit = routes == null ? (own.size() == 1 ? limiter().acquire(own.get(0)) : limiter().acquire(own))
                    : limiter().acquire(PolicyCall.withRoutes(routes, own));
        } catch (dev.redisratelimit.client.RateLimitRefusedException e) {
            if (r.fallback() == null) {
                throw e;
            }
            return r.fallback(inv.getThis(), inv.getArguments(), e); // @RateLimited(fallbackMethod): its answer, nothing charged
        }
        RateLimitAnswers http = answers();
        if (permit.decision() != null && response != null && http != null) {
            ServletHeaders.write(http, response, permit.decision());
        }
        Object result = null;
        boolean ok = false;
        boolean streamed = false;
        try {
            result = inv.proceed();
            ok = true;
            // A streamed body is written after the method returns: the permit stays open (its
            // leases held, its estimates charged) until the last byte is sent or the client left.
            if (STREAMING && response != null) {
                // The status as returned: once the client has gone, Tomcat may recycle the response
                // before the stream's writer ends, and reading it then throws (the permit never closed).
                int status = result instanceof org.springframework.http.ResponseEntity<?> re ? re.getStatusCode().value()
                        : response.getStatus();
                Object body = Streams.hold(result, (sent, failed) ->
                        finish(permit, parts, own, spel, null, sent, true, failed || status >= 400));
                streamed = body != result;
                result = body;
            }
            return result;
        } finally {
            if (!streamed) {
                finish(permit, parts, own, spel, response, result, ok, !ok);
            }
        }
    }

    /**
     * Closes the permit once: the outcome (a failure when the call threw or answered 4xx/5xx),
     * and each estimate settled from {@code #result} — of a call that returned, or of a stream,
     * even one cut short (its body says what it sent); a call that threw used nothing.
     */
    private void finish(Permit permit, List<AnnotationPolicies.Part> parts, List<PolicyCall> own, Expressions spel,
            HttpServletResponse response, Object result, boolean settle, boolean failed) {
        Map<PolicyCall, Map<Integer, Long>> used = Map.of();
        try {
            used = outcomeAndUsage(permit, parts, own, spel, response, result, settle, failed);
        } finally {
            // Whatever the outcome or a settle expression threw: the leases released, the estimates settled.
            // Sent, not waited for: the release and settlement are one pipelined burst, and a slow Redis
            // must not hold the response for the budget.
            permit.closeAsyncByCall(used);
        }
    }

    /**
     * The outcome told to the permit, and each estimate's usage from {@code #result} (none for a call that threw),
     * call by call: each policy's estimates from its own settle expressions (clause indexes are their policy's).
     */
    private Map<PolicyCall, Map<Integer, Long>> outcomeAndUsage(Permit permit, List<AnnotationPolicies.Part> parts, List<PolicyCall> own,
            Expressions spel, HttpServletResponse response, Object result, boolean settle, boolean failed) {
        // The outcome, for a policy that counts only failures or successes (Policy#counts).
        if (!permit.outcomeKnown()) {
            int status = result instanceof org.springframework.http.ResponseEntity<?> re ? re.getStatusCode().value()
                    : response != null ? response.getStatus() : 200;
            if (failed || status >= 400) {
                permit.failed();
            } else {
                permit.succeeded();
            }
        }
        Map<PolicyCall, Map<Integer, Long>> used = Map.of();
        if (settle && permit.hasEstimates()) {
            used = new HashMap<>();
            EvaluationContext ctx = spel.context();
            ctx.setVariable("result", result);
            for (int i = 0; i < own.size(); i++) {
                AnnotationPolicies.Part part = parts.get(i);
                Map<Integer, Long> byClause = new HashMap<>();
                for (int clause : permit.estimateClauses(own.get(i))) {
                    byClause.put(clause, usage(part.settles()[clause], ctx, own.get(i).costs()[clause], part.policy().name()));
                }
                used.put(own.get(i), byClause);
            }
        }
        return used; // a method that threw used nothing: its estimates are refunded
    }

    // One @RateLimited's call: its key, zone, costs and duplicate digest.
    private PolicyCall call(AnnotationPolicies.Part r, Expressions spel, HttpServletRequest request, CallerResolver caller) {
        String policyName = r.policy().name();
        String key = key(r, spel, request, caller);
        String zone = r.zone() == null ? null : string(r.zone(), spel.context(), "zone", policyName);
        long[] costs = new long[r.costs().length];
        for (int i = 0; i < costs.length; i++) {
            costs[i] = r.costs()[i] == null ? 1 : cost(r.costs()[i], spel.context(), policyName);
        }
        String digest = r.policy().duplicateWindow() == null ? null
                : caller != null && request != null ? caller.bodyDigest(request) : null;
        if (r.policy().duplicateWindow() != null && digest == null) {
            throw new RateLimitConfigurationException("policy '" + policyName + "': preventDuplicate needs an HTTP request body");
        }
        return new PolicyCall(r.policy(), key, zone, costs, digest);
    }

    private static final boolean STREAMING = org.springframework.util.ClassUtils.isPresent(
            "org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody",
            RateLimitMethodInterceptor.class.getClassLoader());

    /**
     * The evaluation context of a call, made on first use: the method's
     * arguments by name, {@code #request}, {@code #path}, {@code #ip} and
     * {@code #user} (the last four in an HTTP request).
     */
    private final class Expressions {
        private final MethodInvocation inv;
        private final Method method;
        private final HttpServletRequest request;
        private final CallerResolver caller;
        private MethodBasedEvaluationContext context;

        Expressions(MethodInvocation inv, Method method, HttpServletRequest request, CallerResolver caller) {
            this.inv = inv;
            this.method = method;
            this.request = request;
            this.caller = caller;
        }

        EvaluationContext context() {
            if (context == null) {
                MethodBasedEvaluationContext ctx = new MethodBasedEvaluationContext(inv.getThis(), method, inv.getArguments(), names);
                if (request != null) {
                    ctx.setVariable("request", request);
                    ctx.setVariable("path", request.getRequestURI());
                    if (caller != null) {
                        ctx.setVariable("ip", caller.clientIp(request));
                        ctx.setVariable("user", caller.user(request));
                    }
                }
                context = ctx;
            }
            return context;
        }
    }

    private AnnotationPolicies policies() {
        AnnotationPolicies p = policiesBean;
        if (p == null) {
            policiesBean = p = policies.getObject();
        }
        return p;
    }

    private RateLimiter limiter() {
        RateLimiter l = limiterBean;
        if (l == null) {
            limiterBean = l = limiter.getObject();
        }
        return l;
    }

    private CallerResolver caller() {
        CallerResolver c = callerBean;
        if (c == null) {
            callerBean = c = callers.getIfAvailable();
        }
        return c;
    }

    private RateLimitAnswers answers() {
        RateLimitAnswers a = answersBean;
        if (a == null) {
            answersBean = a = answers.getIfAvailable();
        }
        return a;
    }

    private String key(AnnotationPolicies.Part r, Expressions spel, HttpServletRequest request, CallerResolver caller) {
        String policy = r.policy().name();
        if (r.key() != null) {
            return string(r.key(), spel.context(), "key", policy);
        }
        if (r.by() == KeyBy.GLOBAL) {
            return "global";
        }
        if (request == null || caller == null) {
            throw new RateLimitConfigurationException("policy '" + policy + "' is keyed by " + r.by()
                    + " but the call is not an HTTP request: give it a key expression");
        }
        String k = switch (r.by()) {
            case IP -> caller.clientIp(request);
            case USER -> caller.user(request);
            case IP_AND_PATH -> caller.clientIp(request) + ":" + request.getRequestURI();
            default -> null;
        };
        if ((k == null || k.isEmpty()) && r.by() == KeyBy.USER) {
            // the request names no one (no principal, no or an empty user header): a missing identity, 401 (CLIENTS.md §5)
            throw new RateLimitKeyMissingException("policy '" + policy + "' counts callers by user: the request names none", true);
        }
        if (k == null || k.isEmpty()) {
            throw new RateLimitConfigurationException("policy '" + policy + "': no " + r.by() + " to key the call by");
        }
        return k;
    }
}
