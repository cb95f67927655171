package dev.redisratelimit.spring.annotation;

import dev.redisratelimit.client.QuotaPeriod;
import java.lang.annotation.Documented;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * One named limit of a {@link RateLimited} policy. Durations are Spring Boot
 * duration strings ({@code "10s"}, {@code "1h"}, {@code "500ms"}).
 *
 * <ul>
 * <li>{@code SLIDING_WINDOW}: at most {@link #count()} in any {@link #window()}.</li>
 * <li>{@code TOKEN_BUCKET}: {@link #count()} per {@link #window()}, bursts of {@link #burst()}.</li>
 * <li>{@code QUOTA}: {@link #count()} per calendar {@link #period()} in {@link #zone()}.</li>
 * <li>{@code CONCURRENCY}: at most {@link #count()} in flight; a lease of {@link #ttl()}
 *     taken before the method and released when it returns or throws.</li>
 * <li>{@code LOCKOUT}: {@link #count()} calls per {@link #window()} that the first starts,
 *     then locked for {@link #lockTime()} (alone in its policy).</li>
 * </ul>
 */
@Target({})
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface Limit {
    String name();

    LimitType type() default LimitType.SLIDING_WINDOW;

    long count();

    String window() default "";

    long burst() default 0;

    QuotaPeriod period() default QuotaPeriod.DAY;

    String zone() default "UTC";

    String ttl() default "60s";

    String lockTime() default "";

    /** One counter for every caller (a global budget) instead of one per key. */
    boolean global() default false;

    /**
     * SpEL for this call's cost (e.g. an estimate {@code #body.maxTokens});
     * empty: 1. QUOTA, TOKEN_BUCKET and SLIDING_WINDOW only.
     */
    String cost() default "";

    /**
     * SpEL evaluated after the method with {@code #result}: the units really
     * used; the estimate ({@link #cost()}) is settled to it with a DEBIT or a
     * REFUND. When the method throws the usage is 0 (a full refund).
     */
    String settle() default "";
}
