package dev.redisratelimit.spring.aop;

import dev.redisratelimit.spring.core.CallInput;
import dev.redisratelimit.spring.core.Permit;
import dev.redisratelimit.spring.core.PolicyCall;
import dev.redisratelimit.spring.web.DeferredRoutes;
import dev.redisratelimit.spring.core.RateLimitConfigurationException;
import dev.redisratelimit.spring.core.RateLimiter;
import dev.redisratelimit.spring.web.CallerResolver;
import dev.redisratelimit.spring.web.RateLimitHttpAnswers;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;
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

    private static final Logger log = LoggerFactory.getLogger(RateLimitMethodInterceptor.class);

    private final ObjectProvider<AnnotationPolicies> policies;
    private final ObjectProvider<RateLimiter> limiter;
    private final ObjectProvider<CallerResolver> callers;
    private final ObjectProvider<RateLimitHttpAnswers> answers;
    private final ParameterNameDiscoverer names = new DefaultParameterNameDiscoverer();

    public RateLimitMethodInterceptor(ObjectProvider<AnnotationPolicies> policies, ObjectProvider<RateLimiter> limiter,
            ObjectProvider<CallerResolver> callers, ObjectProvider<RateLimitHttpAnswers> answers) {
        this.policies = policies;
        this.limiter = limiter;
        this.callers = callers;
        this.answers = answers;
    }

    @Override
    public Object invoke(MethodInvocation inv) throws Throwable {
        Method method = inv.getMethod();
        Class<?> target = inv.getThis() != null ? AopUtils.getTargetClass(inv.getThis()) : method.getDeclaringClass();
        AnnotationPolicies.Resolved r = policies.getObject().resolve(method, target);
        if (r == null) {
            return inv.proceed();
        }
        RequestAttributes ra = RequestContextHolder.getRequestAttributes();
        HttpServletRequest request = ra instanceof ServletRequestAttributes s ? s.getRequest() : null;
        HttpServletResponse response = ra instanceof ServletRequestAttributes s ? s.getResponse() : null;
        CallerResolver caller = callers.getIfAvailable();
        MethodBasedEvaluationContext ctx = new MethodBasedEvaluationContext(inv.getThis(), method, inv.getArguments(), names);
        if (request != null) {
            ctx.setVariable("request", request);
            ctx.setVariable("path", request.getRequestURI());
            if (caller != null) {
                ctx.setVariable("ip", caller.clientIp(request));
                ctx.setVariable("user", caller.user(request));
            }
        }
        String policyName = r.policy().name();
        String key = key(r, ctx, request, caller);
        String zone = r.zone() == null ? null : string(r.zone(), ctx, "zone", policyName);
        long[] costs = new long[r.costs().length];
        for (int i = 0; i < costs.length; i++) {
            costs[i] = r.costs()[i] == null ? 1 : cost(r.costs()[i], ctx, policyName);
        }
        String digest = r.policy().spec().duplicateWindow() == null ? null
                : caller != null && request != null ? caller.bodyDigest(request) : null;
        if (r.policy().spec().duplicateWindow() != null && digest == null) {
            throw new RateLimitConfigurationException("policy '" + policyName + "': preventDuplicate needs an HTTP request body");
        }
        CallInput own = new CallInput(key, zone, costs, digest);
        // Routes this request matched wait for its handler's policy: all decided in one RL.ALL.
        List<PolicyCall> routes = request != null ? DeferredRoutes.take(request) : null;
        Permit permit = routes == null ? limiter.getObject().acquire(r.policy(), own)
                : limiter.getObject().acquire(withRoutes(routes, new PolicyCall(r.policy(), own)));
        RateLimitHttpAnswers http = answers.getIfAvailable();
        if (permit.decision() != null && response != null && http != null) {
            http.writeHeaders(response, permit.decision());
        }
        Object result = null;
        boolean ok = false;
        try {
            result = inv.proceed();
            ok = true;
            return result;
        } finally {
            Map<Integer, Long> used = new HashMap<>();
            if (ok && permit.hasEstimates()) {
                ctx.setVariable("result", result);
                for (int clause : permit.estimateClauses()) {
                    used.put(clause, usage(r.settles()[clause], ctx, costs[clause], policyName));
                }
            }
            permit.close(used); // a method that threw used nothing: its estimates are refunded
        }
    }

    // The routes' calls then the method's own (last); a route naming the same policy and key counts once.
    private static List<PolicyCall> withRoutes(List<PolicyCall> routes, PolicyCall own) {
        List<PolicyCall> all = new ArrayList<>(routes.size() + 1);
        for (PolicyCall c : routes) {
            if (!(c.policy().name().equals(own.policy().name()) && c.input().key().equals(own.input().key()))) {
                all.add(c);
            }
        }
        all.add(own);
        return all;
    }

    private String key(AnnotationPolicies.Resolved r, EvaluationContext ctx, HttpServletRequest request, CallerResolver caller) {
        String policy = r.policy().name();
        if (r.key() != null) {
            return string(r.key(), ctx, "key", policy);
        }
        if (r.policy().spec().by() == dev.redisratelimit.spring.annotation.KeyBy.GLOBAL) {
            return "global";
        }
        if (request == null || caller == null) {
            throw new RateLimitConfigurationException("policy '" + policy + "' is keyed by " + r.policy().spec().by()
                    + " but the call is not an HTTP request: give it a key expression");
        }
        String k = switch (r.policy().spec().by()) {
            case IP -> caller.clientIp(request);
            case USER -> caller.user(request);
            case IP_AND_PATH -> caller.clientIp(request) + ":" + request.getRequestURI();
            default -> null;
        };
        if (k == null || k.isEmpty()) {
            throw new RateLimitConfigurationException("policy '" + policy + "': no " + r.policy().spec().by() + " to key the call by");
        }
        return k;
    }

    private static String string(Expression e, EvaluationContext ctx, String what, String policy) {
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

    private static long cost(Expression e, EvaluationContext ctx, String policy) {
        Object v = e.getValue(ctx);
        if (!(v instanceof Number n) || n.longValue() < 1 || n.doubleValue() != n.longValue()) {
            throw new RateLimitConfigurationException("policy '" + policy + "': cost expression '" + e.getExpressionString()
                    + "' must give an integer of 1 or more, gave " + v);
        }
        return n.longValue();
    }

    // The usage reported by the result; if it cannot be read, the estimate stands (nothing settled).
    private static long usage(Expression e, EvaluationContext ctx, long estimate, String policy) {
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
