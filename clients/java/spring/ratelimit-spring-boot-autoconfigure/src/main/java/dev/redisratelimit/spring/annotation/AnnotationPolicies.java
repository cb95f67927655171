package dev.redisratelimit.spring.annotation;

import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import dev.redisratelimit.spring.annotation.RateLimited;
import dev.redisratelimit.spring.autoconfigure.RateLimitProperties;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyClause;
import dev.redisratelimit.client.RateLimiter;
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

    /** A method's policy with its expressions parsed (costs and settlements by clause index). */
    public record Resolved(Policy policy, KeyBy by, Expression key, Expression zone, Expression[] costs, Expression[] settles) {
    }

    private final RateLimitProperties properties;
    private final RateLimiter limiter;
    private final ExpressionParser parser = new SpelExpressionParser();
    private final Map<String, List<dev.redisratelimit.client.Limit>> yaml = new LinkedHashMap<>();
    private final Map<Method, Optional<Resolved>> cache = new ConcurrentHashMap<>();
    private final Map<String, Policy> byName = new ConcurrentHashMap<>();

    public AnnotationPolicies(RateLimitProperties properties, RateLimiter limiter) {
        this.properties = properties;
        this.limiter = limiter;
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
            yaml.put(name, List.copyOf(limits));
            // Registered at once, so its limits can be changed at run time before its first call.
            Policy cp = new Policy(name, limits, null, p.getHashTag(), p.getOnRedisDown().mode(), false).withCounts(p.getCounts());
            limiter.register(cp);
        });
    }

    /** Every rate-limited method of a bean's class, resolved now (start-up validation). */
    public void validate(Class<?> beanClass) {
        boolean classLevel = AnnotatedElementUtils.hasAnnotation(beanClass, RateLimited.class);
        ReflectionUtils.doWithMethods(beanClass, m -> {
                    unguardable(m, beanClass);
                    resolve(m, beanClass);
                },
                m -> !m.isBridge() && !m.isSynthetic() && Modifier.isPublic(m.getModifiers())
                        && m.getDeclaringClass() != Object.class
                        && (classLevel || AnnotatedElementUtils.hasAnnotation(m, RateLimited.class)));
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

    /** The policy of a method (its own annotation, else its class's), or null when it has none. */
    public Resolved resolve(Method method, Class<?> targetClass) {
        Method specific = AopUtils.getMostSpecificMethod(method, targetClass);
        return cache.computeIfAbsent(specific, m -> Optional.ofNullable(build(m, targetClass))).orElse(null);
    }

    private Resolved build(Method m, Class<?> targetClass) {
        RateLimited a = AnnotatedElementUtils.findMergedAnnotation(m, RateLimited.class);
        if (a == null) {
            a = AnnotatedElementUtils.findMergedAnnotation(targetClass, RateLimited.class);
        }
        if (a == null) {
            return null;
        }
        String where = targetClass.getSimpleName() + "." + m.getName();
        try {
            return compile(a, where);
        } catch (IllegalArgumentException | org.springframework.expression.ParseException e) {
            throw new IllegalStateException("@RateLimited on " + where + ": " + e.getMessage(), e);
        }
    }

    private Resolved compile(RateLimited a, String where) {
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
        Policy compiled = new Policy(name, limits, duration(a.preventDuplicate()), hashTag, down.mode(), a.legacyHeaders())
                .withCounts(counts);
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
        return new Resolved(compiled, a.by(), parse(blankToNull(a.key())), parse(blankToNull(a.zone())), costs, settles);
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

    private Expression parse(String spel) {
        return spel == null ? null : parser.parseExpression(spel);
    }

    private static String blankToNull(String s) {
        return s == null || s.isBlank() ? null : s;
    }

    private static Duration duration(String s) {
        return s == null || s.isBlank() ? null : DurationStyle.detectAndParse(s);
    }
}
