package dev.redisratelimit.spring.annotation;

import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyClause;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.autoconfigure.RateLimitProperties;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.aop.support.AopUtils;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionParser;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ReflectionUtils;

/**
 * Turns {@link RateLimited} methods and the {@code ratelimit.policies} of
 * application.yml into compiled policies with parsed SpEL — at start-up, so an
 * unknown policy name, a window of 0 or an expression that does not parse
 * fails the application's start instead of leaving an endpoint unlimited.
 */
public final class AnnotationPolicies {

    /** One {@code @RateLimited}'s policy with its expressions parsed (costs and settlements by clause index). */
    public record Part(Policy policy, KeyBy by, Expression key, Expression zone, Expression[] costs, Expression[] settles) {
    }

    /**
     * A method's policies — one per {@code @RateLimited} on it (or on its class), decided together in one
     * Redis call — and the fallback that answers a refusal (null: none).
     */
    public record Resolved(List<Part> parts, Method fallback) {

        public Resolved {
            parts = List.copyOf(parts);
        }

        /** Its first (often only) policy. */
        public Policy policy() {
            return parts.get(0).policy();
        }

        /** A lockout, decided alone (RL.LOCKCOUNT): routes matching the request are then decided before it. */
        public boolean lockout() {
            return parts.size() == 1 && parts.get(0).policy().isLockout();
        }

        /** The policies' names, for messages: {@code 'a'} or {@code 'a', 'b'}. */
        public String names() {
            return String.join(", ", parts.stream().map(p -> "'" + p.policy().name() + "'").toList());
        }

        /**
         * The fallback's answer to a refusal of {@code args} on {@code target}.
         *
         * @throws Throwable what the fallback throws
         */
        public Object fallback(Object target, Object[] args, dev.redisratelimit.client.RateLimitRefusedException refusal) throws Throwable {
            Object[] with = args;
            if (fallback.getParameterCount() > args.length) {
                with = java.util.Arrays.copyOf(args, args.length + 1);
                with[args.length] = refusal;
            }
            try {
                return fallback.invoke(target, with);
            } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause();
            }
        }
    }

    private final RateLimitProperties properties;
    private final RateLimiter limiter;
    private final ExpressionParser parser = new SpelExpressionParser();
    private final Map<String, List<dev.redisratelimit.client.Limit>> yaml = new LinkedHashMap<>();
    private final Map<Method, Optional<Resolved>> cache = new ConcurrentHashMap<>();
    private final Map<String, Policy> byName = new ConcurrentHashMap<>();
    private final dev.redisratelimit.spring.http.ExemptCallers exempt;

    public AnnotationPolicies(RateLimitProperties properties, RateLimiter limiter) {
        this.properties = properties;
        this.limiter = limiter;
        // ratelimit.exempt, checked at start (a bad entry fails it naming ratelimit.exempt.ips[i])
        this.exempt = dev.redisratelimit.spring.http.ExemptCallers.of(properties.getExempt().getIps(), properties.getExempt().getKeys());
        properties.getPolicies().forEach((name, p) -> {
            List<dev.redisratelimit.client.Limit> limits = new ArrayList<>();
            if (p.getText() != null && !p.getText().isEmpty()) {
                try {
                    limits.addAll(dev.redisratelimit.client.LimitText.parse(p.getText()));
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("ratelimit.policies." + name + ".text: " + e.getMessage(), e);
                }
            }
            for (RateLimitProperties.LimitProperties l : p.getLimits()) {
                try {
                    limits.add(limit(l.getName(), l.getType(), l.getCount(), l.getWindow(), l.getBurst(), l.getPeriod(),
                            l.getZone(), l.getTtl(), l.getLockTime(), l.isGlobal(), l.getCost(), l.getSettle()));
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("ratelimit.policies." + name + ": " + e.getMessage(), e);
                }
            }
            try {
                constantCosts(limits);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("ratelimit.policies." + name + ": " + e.getMessage(), e);
            }
            yaml.put(name, List.copyOf(limits));
            // Registered at once, so its limits can be changed at run time before its first call.
            Policy cp = new Policy(name, limits, null, tagFor(name, p.getHashTag(), limits), p.getOnRedisDown().mode(), false)
                    .withCounts(p.getCounts());
            limiter.register(cp);
        });
    }

    /** Every rate-limited method of a bean's class, resolved now (start-up validation). */
    public void validate(Class<?> beanClass) {
        validate(beanClass, false);
    }

    /**
     * Every rate-limited method of a bean's class, resolved now (start-up
     * validation); {@code blocking}: limited by the blocking interceptor (MVC
     * or no web stack), which closes the permit when the method returns — so
     * a method that returns before its work is done fails the start.
     */
    public void validate(Class<?> beanClass, boolean blocking) {
        boolean classLevel = annotated(beanClass);
        ReflectionUtils.doWithMethods(beanClass, m -> {
                    unguardable(m, beanClass);
                    if (blocking) {
                        asynchronous(m, beanClass);
                    }
                    resolve(m, beanClass);
                },
                m -> !m.isBridge() && !m.isSynthetic() && Modifier.isPublic(m.getModifiers())
                        && m.getDeclaringClass() != Object.class
                        && (classLevel || annotated(m)));
    }

    /** Whether an element carries {@code @RateLimited}, once or repeated (its container). */
    public static boolean annotated(java.lang.reflect.AnnotatedElement e) {
        return AnnotatedElementUtils.hasAnnotation(e, RateLimited.class) || AnnotatedElementUtils.hasAnnotation(e, RateLimited.List.class);
    }

    // A method the proxy cannot guard fails the start, naming it: else its @RateLimited (and a route
    // deferring to it) would silently do nothing (issue 35).
    private static void unguardable(Method m, Class<?> beanClass) {
        String where = beanClass.getSimpleName() + "." + m.getName();
        if (Modifier.isFinal(m.getModifiers())) {
            throw new IllegalStateException("@RateLimited on " + where + ": the method is final, so the proxy that limits it"
                    + " cannot override it (make it non-final; in Kotlin, `open`, or the kotlin-spring plugin)");
        }
        Class<?>[] params = m.getParameterTypes();
        if (params.length > 0 && params[params.length - 1].getName().equals("kotlin.coroutines.Continuation")) {
            throw new IllegalStateException("@RateLimited on " + where + ": a Kotlin suspend function cannot be limited by the"
                    + " method proxy (return a Mono, or drop the annotation and limit the endpoint with ratelimit.routes)");
        }
    }

    // Types whose work goes on after the method returns (Spring MVC's async return values, futures, reactive types).
    // Not StreamingResponseBody: the MVC interceptor holds its permit until the body is written (web/Streams).
    private static final List<String> ASYNC = List.of("java.util.concurrent.Future", "java.util.concurrent.CompletionStage",
            "java.util.concurrent.Callable", "org.springframework.web.context.request.async.DeferredResult",
            "org.springframework.web.context.request.async.WebAsyncTask",
            "org.springframework.web.servlet.mvc.method.annotation.ResponseBodyEmitter");

    // The blocking interceptor would release the lease and settle the estimate when the method returns, while its
    // work still runs: the limit would not hold (issue 35). Fail the start, naming the method.
    private static void asynchronous(Method m, Class<?> beanClass) {
        Class<?> r = m.getReturnType();
        boolean async = org.springframework.core.ReactiveAdapterRegistry.getSharedInstance().getAdapter(r) != null;
        for (Class<?> c = r; !async && c != null; c = c.getSuperclass()) {
            async = ASYNC.contains(c.getName()) || org.springframework.util.ClassUtils.getAllInterfacesForClassAsSet(c).stream()
                    .anyMatch(i -> ASYNC.contains(i.getName()));
        }
        if (async) {
            throw new IllegalStateException("@RateLimited on " + beanClass.getSimpleName() + "." + m.getName() + ": it returns a "
                    + r.getSimpleName() + ", whose work goes on after the method returns, which the starter cannot guard in a"
                    + " Spring MVC app (the permit would close before the work ends): return the value itself, or limit the"
                    + " endpoint with ratelimit.routes (which follow async requests to their end)");
        }
    }

    /** The policy of a method (its own annotation, else its class's), or null when it has none. */
    /** ratelimit.exempt: the callers no policy (annotation or route) decides. */
    public dev.redisratelimit.spring.http.ExemptCallers exempt() {
        return exempt;
    }

    public Resolved resolve(Method method, Class<?> targetClass) {
        Method specific = AopUtils.getMostSpecificMethod(method, targetClass);
        return cache.computeIfAbsent(specific, m -> Optional.ofNullable(build(m, targetClass))).orElse(null);
    }

    private Resolved build(Method m, Class<?> targetClass) {
        // Once or repeated (Spring's own repeatable lookup reads the container); the method's replace its class's.
        java.util.Set<RateLimited> found = AnnotatedElementUtils.findMergedRepeatableAnnotations(m, RateLimited.class, RateLimited.List.class);
        if (found.isEmpty()) {
            found = AnnotatedElementUtils.findMergedRepeatableAnnotations(targetClass, RateLimited.class, RateLimited.List.class);
        }
        if (found.isEmpty()) {
            return null;
        }
        String where = targetClass.getSimpleName() + "." + m.getName();
        try {
            List<Part> parts = new ArrayList<>(found.size());
            String fallbackName = "";
            int n = 0;
            for (RateLimited a : found) {
                n++;
                // The first unnamed inline policy is Class.method, as with one annotation; the others #2, #3, ...
                parts.add(compile(a, n == 1 ? where : where + "#" + n));
                if (!a.fallbackMethod().isEmpty()) {
                    if (!fallbackName.isEmpty() && !fallbackName.equals(a.fallbackMethod())) {
                        throw new IllegalArgumentException("two fallbackMethods ('" + fallbackName + "', '" + a.fallbackMethod()
                                + "'): one answers a refusal by any of its policies");
                    }
                    fallbackName = a.fallbackMethod();
                }
            }
            if (parts.size() > 1) {
                java.util.Set<List<Object>> seen = new java.util.HashSet<>();
                for (Part p : parts) {
                    if (p.policy().isLockout()) {
                        throw new IllegalArgumentException("policy '" + p.policy().name() + "' is a lockout, decided alone"
                                + " (RL.LOCKCOUNT): it cannot be combined with another @RateLimited on the method");
                    }
                    // The same policy keyed the same way twice would count once: surely a slip.
                    if (!seen.add(java.util.Arrays.asList(p.policy().name(), p.by(), p.key() == null ? null : p.key().getExpressionString()))) {
                        throw new IllegalArgumentException("policy '" + p.policy().name() + "' is named twice with the same key");
                    }
                }
            }
            return new Resolved(parts, fallbackName.isEmpty() ? null : fallback(m, targetClass, fallbackName));
        } catch (IllegalArgumentException | org.springframework.expression.ParseException e) {
            throw new IllegalStateException("@RateLimited on " + where + ": " + e.getMessage(), e);
        }
    }

    // The fallback: the method's parameters, then optionally the refusal; the one with the refusal first.
    private static Method fallback(Method m, Class<?> targetClass, String name) {
        Class<?>[] params = m.getParameterTypes();
        Class<?>[] withRefusal = java.util.Arrays.copyOf(params, params.length + 1);
        withRefusal[params.length] = dev.redisratelimit.client.RateLimitRefusedException.class;
        Method f = ReflectionUtils.findMethod(targetClass, name, withRefusal);
        if (f == null) {
            f = ReflectionUtils.findMethod(targetClass, name, params);
        }
        if (f == null) {
            throw new IllegalArgumentException("fallbackMethod '" + name + "' not found: it takes the method's parameters "
                    + java.util.Arrays.stream(params).map(Class::getSimpleName).toList() + ", optionally followed by a RateLimitRefusedException");
        }
        if (!org.springframework.util.ClassUtils.isAssignable(m.getReturnType(), f.getReturnType()) && !reactiveAnswer(m, f)) {
            throw new IllegalArgumentException("fallbackMethod '" + name + "' returns " + f.getReturnType().getSimpleName()
                    + ", which the method (returning " + m.getReturnType().getSimpleName() + ") cannot return");
        }
        ReflectionUtils.makeAccessible(f);
        return f;
    }

    // A method returning a Mono or a Flux (WebFlux) may fall back to any reactive type, or to a plain value of
    // its element type (wrapped by the interceptor).
    private static boolean reactiveAnswer(Method m, Method f) {
        org.springframework.core.ReactiveAdapterRegistry registry = org.springframework.core.ReactiveAdapterRegistry.getSharedInstance();
        if (registry.getAdapter(m.getReturnType()) == null) {
            return false;
        }
        if (registry.getAdapter(f.getReturnType()) != null) {
            return true;
        }
        Class<?> element = org.springframework.core.ResolvableType.forMethodReturnType(m).getGeneric(0).resolve(Object.class);
        return org.springframework.util.ClassUtils.isAssignable(element, f.getReturnType());
    }

    private Part compile(RateLimited a, String where) {
        String name;
        List<dev.redisratelimit.client.Limit> limits;
        String hashTag = a.hashTag();
        OnRedisDown down = a.onRedisDown();
        String counts = a.counts();
        if (a.limits().length > 0 || !a.text().isEmpty()) {
            if (!a.policy().isEmpty() && yaml.containsKey(a.policy())) {
                throw new IllegalArgumentException("policy '" + a.policy() + "' is defined in ratelimit.policies: give limits there or here, not both");
            }
            name = a.policy().isEmpty() ? where : a.policy();
            limits = new ArrayList<>(a.text().isEmpty() ? List.of() : dev.redisratelimit.client.LimitText.parse(a.text()));
            for (Limit l : a.limits()) {
                limits.add(limit(l.name(), l.type(), l.count(), duration(l.window()), l.burst(), l.period(), l.zone(),
                        duration(l.ttl()), duration(l.lockTime()), l.global(), l.cost(), l.settle()));
            }
        } else if (!a.policy().isEmpty()) {
            limits = yaml.get(a.policy());
            if (limits == null) {
                throw new IllegalArgumentException("unknown policy '" + a.policy() + "' (none under ratelimit.policies"
                        + (yaml.isEmpty() ? "" : "; known: " + yaml.keySet()) + ")");
            }
            name = a.policy();
            RateLimitProperties.Policy p = properties.getPolicies().get(name);
            if (hashTag.isEmpty() && p.getHashTag() != null) {
                hashTag = p.getHashTag();
            }
            if (counts.isEmpty() && p.getCounts() != null) {
                counts = p.getCounts();
            }
            if (down == OnRedisDown.DEFAULT) {
                down = p.getOnRedisDown();
            }
        } else {
            RateLimitProperties.Default d = properties.getDefaultLimit();
            name = d.getName();
            limits = List.of(limit(d.getName(), LimitType.SLIDING_WINDOW, d.getCount(), d.getWindow(), 0, null, "UTC",
                    null, null, false, null, null));
        }
        constantCosts(limits);
        Policy compiled = new Policy(name, limits, duration(a.preventDuplicate()), tagFor(name, hashTag, limits), down.mode(),
                a.legacyHeaders()).withCounts(counts);
        Policy earlier = byName.putIfAbsent(name, compiled);
        if (earlier != null && !earlier.limits().equals(compiled.limits())) {
            throw new IllegalArgumentException("two different policies are named '" + name + "'");
        }
        limiter.register(compiled);
        List<PolicyClause> clauses = compiled.clauses();
        Expression[] costs = new Expression[clauses.size()];
        Expression[] settles = new Expression[clauses.size()];
        for (int i = 0; i < clauses.size(); i++) {
            costs[i] = parse(clauses.get(i).cost());
            settles[i] = parse(clauses.get(i).settle());
        }
        return new Part(compiled, a.by(), parse(blankToNull(a.key())), parse(blankToNull(a.zone())), costs, settles);
    }

    /**
     * An annotation's or YAML's limit as the core's, checked as the module
     * would check it; {@code cost} and {@code settle} (SpEL) label its
     * clause's charge and settlement.
     */
    static dev.redisratelimit.client.Limit limit(String name, LimitType type, long count, Duration window, long burst,
            dev.redisratelimit.client.QuotaPeriod period, String zone, Duration ttl, Duration lockTime, boolean global, String cost,
            String settle) {
        java.time.ZoneId z = null;
        if (type == LimitType.QUOTA) {
            try {
                z = java.time.ZoneId.of(zone);
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("limit '" + name + "': unknown zone '" + zone + "'");
            }
        }
        return new dev.redisratelimit.client.Limit(name, type == null ? null : type.kind(), count, window, burst, period, z, ttl, lockTime,
                global, cost, settle);
    }

    /**
     * A token bucket charged a constant cost above its burst refuses every call
     * (the burst is what one call can take, and runtime limits change only the
     * rate): a start-up error rather than an answer to every request.
     */
    private void constantCosts(List<dev.redisratelimit.client.Limit> limits) {
        for (dev.redisratelimit.client.Limit l : limits) {
            if (l.kind() != dev.redisratelimit.client.Limit.Kind.TOKEN_BUCKET || l.cost() == null) {
                continue;
            }
            Long cost = constant(parse(l.cost()));
            if (cost != null && cost > l.burst()) {
                throw new IllegalArgumentException("limit '" + l.name() + "': the constant cost " + cost + " is above the bucket's burst "
                        + l.burst() + ", so every call would be refused (raise the burst or lower the cost)");
            }
        }
    }

    // The value of an expression that is a number literal ("5", "20000"), else null (it depends on the call).
    private static Long constant(Expression e) {
        if (e instanceof org.springframework.expression.spel.standard.SpelExpression se
                && se.getAST() instanceof org.springframework.expression.spel.ast.Literal lit
                && lit.getLiteralValue().getValue() instanceof Number n) {
            return n.longValue();
        }
        return null;
    }

    private Expression parse(String spel) {
        return spel == null ? null : parser.parseExpression(spel);
    }

    // A global limit needs a fixed hash tag (its key shares the per-key ones' Cluster slot): the policy's name unless given.
    private static String tagFor(String policy, String tag, List<dev.redisratelimit.client.Limit> limits) {
        if (tag != null && !tag.isBlank()) {
            return tag;
        }
        return limits.stream().anyMatch(dev.redisratelimit.client.Limit::shared) ? policy : null;
    }

    private static String blankToNull(String s) {
        return s == null || s.isBlank() ? null : s;
    }

    private static Duration duration(String s) {
        return s == null || s.isBlank() ? null : DurationStyle.detectAndParse(s);
    }
}
