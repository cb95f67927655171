package dev.redisratelimit.bench.seed;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/** Seed 000's {@code @RateLimiter}, attribute for attribute (defaults as the seed documents). */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
public @interface RateLimiter {
    String key() default "rate_limit:";

    LimitType limitType() default LimitType.IP;

    String message() default "REQUEST_MORE_ERROR";

    RateRule[] rules() default {};

    boolean preventDuplicate() default false;

    RateRule preventDuplicateRule() default @RateRule(count = 1, time = 5);
}
