package dev.redisratelimit.spring.test;

import org.springframework.util.ClassUtils;

/**
 * Spring Boot's Redis auto-configuration for an ApplicationContextRunner, by
 * name: DataRedisAutoConfiguration in spring-boot-data-redis on Boot 4.0,
 * RedisAutoConfiguration in spring-boot-autoconfigure on Boot 3.5 (the same
 * tests run on both lines: clients/java/README.md, "Spring Boot 3.5 or 4.0").
 */
public final class SpringBootRedis {

    private static final String BOOT4 = "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration";
    private static final String BOOT3 = "org.springframework.boot.autoconfigure.data.redis.RedisAutoConfiguration";

    public static final Class<?> AUTO_CONFIGURATION =
            ClassUtils.resolveClassName(ClassUtils.isPresent(BOOT4, null) ? BOOT4 : BOOT3, null);

    private SpringBootRedis() {
    }
}
