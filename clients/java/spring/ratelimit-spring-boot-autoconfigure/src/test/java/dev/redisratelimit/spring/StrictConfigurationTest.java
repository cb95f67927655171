package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.RateLimited;
import dev.redisratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.redisratelimit.spring.test.SharedRedis;
import dev.redisratelimit.spring.test.SpringBootRedis;
import dev.redisratelimit.spring.http.ExemptCallers;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;
import org.springframework.core.env.Environment;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.io.support.SpringFactoriesLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import reactor.core.publisher.Mono;

/**
 * Configuration the starter would silently ignore fails the start naming it
 * (issue 35): unknown {@code ratelimit.*} keys, routes written as a map, a
 * constant cost above a bucket's burst, and {@code @RateLimited} methods
 * whose work outlives the call in a blocking (MVC) app.
 */
class StrictConfigurationTest {

    static final String[] POLICY = {"ratelimit.policies.api.limits[0].name=w", "ratelimit.policies.api.limits[0].count=5",
            "ratelimit.policies.api.limits[0].window=10s"};

    ApplicationContextRunner runner() {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(SpringBootRedis.AUTO_CONFIGURATION, RateLimitAutoConfiguration.class,
                        dev.redisratelimit.spring.autoconfigure.RateLimitWebMvcAutoConfiguration.class))
                .withPropertyValues("spring.data.redis.url=" + SharedRedis.get().url())
                .withPropertyValues(POLICY);
    }

    void fails(String message, String... properties) {
        runner().withPropertyValues(properties).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasStackTraceContaining(message);
        });
    }

    @Test
    void aMisspeltTopLevelKeyFailsTheStartNamingIt() {
        fails("unknown rate-limit properties, which would be silently ignored: ratelimit.on-redis-dwn", "ratelimit.on-redis-dwn=LOCAL");
        fails("ratelimit.polices.p.text", "ratelimit.polices.p.text=5/minute");
    }

    @Test
    void aMisspeltNestedKeyFailsTheStartNamingIt() {
        fails("ratelimit.policies.api.limits[0].burts", "ratelimit.policies.api.limits[0].burts=3");
        fails("ratelimit.routes[0].keyresolvr", "ratelimit.routes[0].paths[0]=/a", "ratelimit.routes[0].policy=api",
                "ratelimit.routes[0].key_resolvr=user");
        fails("ratelimit.default-limit.cout", "ratelimit.default-limit.cout=3");
    }

    @Test
    void routesWrittenAsAMapFailTheStart() {
        fails("ratelimit.routes is a list", "ratelimit.routes.api.paths[0]=/a", "ratelimit.routes.api.policy=api");
    }

    @Test
    void theGatewaySubtreeAndEveryKnownKeyStart() {
        runner().withPropertyValues("ratelimit.gateway.route-policies.r1[0]=api", "ratelimit.on-redis-down=LOCAL",
                "ratelimit.decision-budget=400ms", "ratelimit.user-header=X-User", "ratelimit.default-limit.count=3",
                "ratelimit.policies.api.on-redis-down=FAIL_OPEN", "ratelimit.policies.t.text=5/minute",
                "ratelimit.routes[0].paths[0]=/a", "ratelimit.routes[0].policy=api", "ratelimit.routes[0].key-resolver=header",
                "ratelimit.routes[0].header=X-Key").run(ctx -> assertThat(ctx).hasNotFailed());
    }

    @Test
    void aConstantCostAboveABucketsBurstFailsTheStart() {
        fails("ratelimit.policies.b: limit 't': the constant cost 20 is above the bucket's burst 5",
                "ratelimit.policies.b.limits[0].name=t", "ratelimit.policies.b.limits[0].type=TOKEN_BUCKET",
                "ratelimit.policies.b.limits[0].count=10", "ratelimit.policies.b.limits[0].window=1s",
                "ratelimit.policies.b.limits[0].burst=5", "ratelimit.policies.b.limits[0].cost=20");
        // at the burst, or computed per call: starts
        runner().withPropertyValues("ratelimit.policies.b.limits[0].name=t", "ratelimit.policies.b.limits[0].type=TOKEN_BUCKET",
                "ratelimit.policies.b.limits[0].count=10", "ratelimit.policies.b.limits[0].window=1s",
                "ratelimit.policies.b.limits[0].burst=5", "ratelimit.policies.b.limits[0].cost=5",
                "ratelimit.policies.c.limits[0].name=t", "ratelimit.policies.c.limits[0].type=TOKEN_BUCKET",
                "ratelimit.policies.c.limits[0].count=10", "ratelimit.policies.c.limits[0].window=1s",
                "ratelimit.policies.c.limits[0].burst=5", "ratelimit.policies.c.limits[0].cost=#request.contentLength")
                .run(ctx -> assertThat(ctx).hasNotFailed());
        target(AnnotatedBucket.class, "@RateLimited on AnnotatedBucket.call: limit 'b': the constant cost 9 is above the bucket's burst 2");
    }

    public static class AnnotatedBucket {
        @RateLimited(limits = @Limit(name = "b", type = LimitType.TOKEN_BUCKET, count = 10, window = "1s", burst = 2, cost = "9"),
                key = "'k'")
        public void call() {
        }
    }

    public static class FutureMethod {
        @RateLimited(limits = @Limit(name = "w", count = 5, window = "1s"), key = "'k'")
        public CompletableFuture<String> call() {
            return CompletableFuture.completedFuture("x");
        }
    }

    @RateLimited(limits = @Limit(name = "w", count = 5, window = "1s"), key = "'k'")
    public static class AsyncUnderClassLevel {
        public String fine() {
            return "x";
        }

        public Callable<String> later() {
            return () -> "x";
        }
    }

    public static class MonoInMvc {
        @RateLimited(limits = @Limit(name = "w", count = 5, window = "1s"), key = "'k'")
        public Mono<String> call() {
            return Mono.just("x");
        }
    }

    @Configuration
    static class Beans {
        @Bean
        Object target(org.springframework.core.env.Environment env) throws Exception {
            return Class.forName(env.getProperty("target")).getDeclaredConstructor().newInstance();
        }
    }

    void target(Class<?> target, String message) {
        runner().withUserConfiguration(Beans.class).withPropertyValues("target=" + target.getName()).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasStackTraceContaining(message);
        });
    }

    @Test
    void anMvcMethodWhoseWorkOutlivesTheCallFailsTheStartNamingIt() {
        target(FutureMethod.class, "@RateLimited on FutureMethod.call: it returns a CompletableFuture, whose work goes on after the"
                + " method returns");
        target(AsyncUnderClassLevel.class, "@RateLimited on AsyncUnderClassLevel.later: it returns a Callable");
        target(MonoInMvc.class, "@RateLimited on MonoInMvc.call: it returns a Mono");
    }

    // ratelimit.exempt: a malformed address or range fails the start naming the entry (Spring Boot's own
    // InvalidConfigurationPropertyValueException, printed by its failure analyzer), never a DNS lookup.
    @Test
    void aBadExemptEntryFailsTheStartNamingIt() {
        runner().withPropertyValues("ratelimit.exempt.ips[0]=10.0.0.0/8", "ratelimit.exempt.ips[1]=10.0.0.300/8",
                "ratelimit.exempt.keys[0]=internal").run(ctx -> {
                    assertThat(ctx).hasFailed();
                    FailureAnalysis fa = null;
                    for (FailureAnalyzer a : SpringFactoriesLoader.forDefaultResourceLocation(getClass().getClassLoader())
                            .load(FailureAnalyzer.class, SpringFactoriesLoader.ArgumentResolver.of(Environment.class, new StandardEnvironment()),
                                    SpringFactoriesLoader.FailureHandler.handleMessage((m, e) -> {
                                    }))) {
                        fa = fa != null ? fa : a.analyze(ctx.getStartupFailure());
                    }
                    assertThat(fa).as("a failure analysis").isNotNull();
                    assertThat(fa.getDescription()).contains("Invalid value '10.0.0.300/8' for configuration property 'ratelimit.exempt.ips[1]'")
                            .contains("not an IP address or a CIDR range");
                });
        for (String bad : List.of("10.0.0.0/33", "2001:db8::/129", "example.com", "10", "10.0.0.0/", "1.2.3.4/8x", "")) {
            assertThatThrownBy(() -> ExemptCallers.of(List.of(bad), List.of())).as(bad)
                    .isInstanceOf(InvalidConfigurationPropertyValueException.class).hasMessageContaining("ratelimit.exempt.ips[0]");
        }
        ExemptCallers e = ExemptCallers.of(List.of("10.0.0.0/8", "2001:db8::/32", "192.0.2.7"), List.of());
        assertThat(List.of("10.1.2.3", "::ffff:10.1.2.3", "2001:db8:1::9", "[2001:db8::1]", "192.0.2.7")).allMatch(e::ip);
        assertThat(List.of("11.0.0.1", "2001:db9::1", "192.0.2.8", "unknown", "::1")).noneMatch(e::ip);
    }
}
