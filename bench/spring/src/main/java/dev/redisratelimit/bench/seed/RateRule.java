package dev.redisratelimit.bench.seed;

import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.concurrent.TimeUnit;

/** Seed 000's {@code @RateRule}: count per time in timeUnit (defaults as the seed documents). */
@Target({})
@Retention(RetentionPolicy.RUNTIME)
public @interface RateRule {
    long count() default 10;

    long time() default 60;

    TimeUnit timeUnit() default TimeUnit.SECONDS;
}
