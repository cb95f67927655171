package dev.redisratelimit.spring.autoconfigure;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;

/**
 * On a test class ({@code @SpringBootTest}, a test slice): the starter decides
 * on the local backend ({@link dev.redisratelimit.client.LocalRateLimitTransport})
 * instead of Redis, so an endpoint's test needs no Redis and its decisions are
 * the module's (the golden sequence cases run against both). The transport is
 * a bean: {@code @Autowired LocalRateLimitTransport local; local.advance(Duration.ofMinutes(1))}
 * moves its clock, {@code local.reset()} forgets every key. A
 * {@code RateLimitTransport} bean of the test's own wins over it.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ImportAutoConfiguration(LocalRateLimitAutoConfiguration.class)
public @interface AutoConfigureLocalRateLimit {
}
