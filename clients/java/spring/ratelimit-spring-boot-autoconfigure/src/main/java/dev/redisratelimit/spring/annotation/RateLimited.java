package dev.redisratelimit.spring.annotation;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Repeatable;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Rate-limits a method (or every public method of a class): all its limits are
 * decided by one Redis call (one RL.ALL) before the method runs; a refusal
 * charges nothing and throws {@code RateLimitRefusedException} (429 in MVC).
 *
 * <p>The limits come from, in this order: {@link #limits()} given here (an
 * inline policy named {@link #policy()} or {@code Class.method}); a policy of
 * that name under {@code ratelimit.policies} in application.yml; or, with
 * neither, the properties default ({@code ratelimit.default-limit}), one
 * sliding window named {@code default}. A name that is none of these fails the
 * application's start.
 *
 * <p>Repeatable: several on one method (or class) are decided together in the
 * same one Redis call — for example a per-user limit and a global budget, or
 * one policy keyed two ways. The call is admitted only if every one admits;
 * nothing is charged otherwise; the headers carry every limit's item, and a
 * refusal's {@code Retry-After} is the refusing limit's. Each is its own
 * policy: an unnamed inline one after the first is named
 * {@code Class.method#2}, {@code #3}, ... (a lockout cannot be combined: it is
 * decided alone). A method's own annotations replace its class's.
 */
@Target({ElementType.METHOD, ElementType.TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Inherited
@Documented
@Repeatable(RateLimited.List.class)
public @interface RateLimited {

    /** The container of several {@code @RateLimited} on one element (written by the compiler; rarely by hand). */
    @Target({ElementType.METHOD, ElementType.TYPE})
    @Retention(RetentionPolicy.RUNTIME)
    @Inherited
    @Documented
    @interface List {
        RateLimited[] value();
    }

    /** The policy's name: a YAML policy to use, or the name of the inline one. */
    String policy() default "";

    /** Inline limits (named: the names of the RateLimit header items). */
    Limit[] limits() default {};

    /** Whose limit it is, when {@link #key()} is empty. */
    KeyBy by() default KeyBy.IP;

    /**
     * A SpEL expression for the caller's key: method parameters by name
     * ({@code #userId}) or position ({@code #p0}), {@code #request}, {@code #ip},
     * {@code #user}, {@code #path}. Parsed at start-up; null at run time is an
     * error, never an unlimited call.
     */
    String key() default "";

    /**
     * A SpEL expression for the IANA zone of this call's quota limits (for
     * example a header); empty: each quota's own {@link Limit#zone()}.
     */
    String zone() default "";

    /**
     * Refuse the same body again within this window after an admission
     * (seed 000's preventDuplicate); e.g. {@code "5s"}; empty: off. The item is
     * named {@code duplicate}, and its refusal's problem type ends /duplicate.
     */
    String preventDuplicate() default "";

    /**
     * A fixed Cluster hash tag for every key of this policy: required when a
     * global limit is decided with per-key limits (defaults to the policy
     * name then).
     */
    String hashTag() default "";

    /** Also send X-RateLimit-Limit/Remaining/Reset (of the binding limit) for this policy, whatever ratelimit.legacy-headers says. */
    boolean legacyHeaders() default false;

    /** What to do while Redis cannot be reached; DEFAULT: ratelimit.on-redis-down. */
    OnRedisDown onRedisDown() default OnRedisDown.DEFAULT;

    /**
     * Inline limits as text, each a sliding window: {@code "5/minute;100/hour"} (the Python and Node
     * clients' syntax; items named {@code 5-per-1m}), before any {@link #limits()}.
     */
    String text() default "";

    /**
     * Count only {@code "failures"} or only {@code "successes"} (empty: every call): each call is charged up
     * front and given back when it ends with the other outcome — a thrown exception, or a
     * {@code ResponseEntity}/response status of 400 or more, is a failure. Needs a window, bucket or quota.
     */
    String counts() default "";

    /**
     * The name of a method of the same class called instead when a limit refuses (resilience4j's
     * {@code fallbackMethod}): the same parameters, optionally followed by a
     * {@link dev.redisratelimit.client.RateLimitRefusedException} (the refusal: its decision, its
     * retry), and a return type the limited method may return. Its value is the call's answer;
     * nothing is charged. Not called when Redis cannot decide (the Redis-down mode answers). Spring
     * MVC apps, plain beans and WebFlux: for a method returning a Mono or a Flux the fallback may
     * return one too, or a plain value (its answer, wrapped), or null (an empty answer); it runs when
     * the publisher is subscribed and the decision refuses. Checked at start-up: a missing method
     * fails the start. With several {@code @RateLimited} on a method, at most one names it (it
     * answers a refusal by any of them).
     */
    String fallbackMethod() default "";
}
