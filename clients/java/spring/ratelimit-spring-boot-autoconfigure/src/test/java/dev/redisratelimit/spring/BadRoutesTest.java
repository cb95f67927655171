package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.redisratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.redisratelimit.spring.autoconfigure.RateLimitProperties;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.spring.http.RateLimitRoutesException;
import java.time.Duration;
import java.util.Map;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;
import dev.redisratelimit.spring.test.SharedRedis;
import dev.redisratelimit.spring.http.RateLimitRoutes;
import dev.redisratelimit.spring.test.SpringBootRedis;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.diagnostics.FailureAnalyzer;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.core.io.support.SpringFactoriesLoader;

/** A ratelimit.routes entry that cannot work fails the start, and the failure analysis names the property. */
class BadRoutesTest {

    static final String[] POLICY = {"ratelimit.policies.api.limits[0].name=w", "ratelimit.policies.api.limits[0].count=5",
            "ratelimit.policies.api.limits[0].window=10s"};

    WebApplicationContextRunner runner(String... route) {
        List<String> props = new ArrayList<>(List.of(POLICY));
        props.add("spring.data.redis.url=" + SharedRedis.get().url());
        props.addAll(List.of(route));
        return new WebApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(SpringBootRedis.AUTO_CONFIGURATION, RateLimitAutoConfiguration.class,
                        dev.redisratelimit.spring.autoconfigure.RateLimitWebMvcAutoConfiguration.class))
                .withPropertyValues(props.toArray(String[]::new));
    }

    // The analysis Spring Boot prints instead of the stack trace (the analyzers registered in spring.factories;
    // those that need the bean factory are skipped here).
    static FailureAnalysis analysis(Throwable failure) {
        for (FailureAnalyzer a : SpringFactoriesLoader.forDefaultResourceLocation(BadRoutesTest.class.getClassLoader())
                .load(FailureAnalyzer.class, null, SpringFactoriesLoader.FailureHandler.handleMessage((m, e) -> {
                }))) {
            FailureAnalysis fa = a.analyze(failure);
            if (fa != null) {
                return fa;
            }
        }
        return null;
    }

    // Through a whole context once: the start fails and the analysis names the property.
    @Test
    void anUnknownPolicyFailsTheStartWithAnAnalysis() {
        runner("ratelimit.routes[0].paths[0]=/a", "ratelimit.routes[0].policy=nope").run(ctx -> {
            assertThat(ctx).hasFailed();
            FailureAnalysis fa = analysis(ctx.getStartupFailure());
            assertThat(fa).as("a failure analysis").isNotNull();
            assertThat(fa.getDescription()).isEqualTo("A rate-limit route cannot work: ratelimit.routes[0].policy: unknown policy 'nope' "
                    + "(known under ratelimit.policies: [api])");
            assertThat(fa.getAction()).startsWith("Fix ratelimit.routes[0].policy in your configuration.")
                    .contains("key-resolver: ip, user, header:<Name> or spel:<expression>");
        });
    }

    // The other checks, on the routes alone (what the context's start runs).
    static void fails(String message, String... route) {
        RateLimitProperties p = new RateLimitProperties();
        new Binder(new MapConfigurationPropertySource(props(route))).bind("ratelimit", Bindable.ofInstance(p));
        Policy api = Policy.builder("api").slidingWindow("w", 5, Duration.ofSeconds(10)).build();
        assertThatThrownBy(() -> new RateLimitRoutes(p, Map.of("api", api))).isInstanceOf(RateLimitRoutesException.class)
                .hasMessageContaining(message);
    }

    static Map<String, String> props(String... route) {
        Map<String, String> m = new java.util.LinkedHashMap<>();
        for (String kv : POLICY) {
            m.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
        }
        for (String kv : route) {
            m.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
        }
        return m;
    }

    @Test
    void aPathThatIsNotAPattern() {
        fails("ratelimit.routes[0].paths[1]: '/a/**/b' is not a path pattern",
                "ratelimit.routes[0].paths[0]=/ok", "ratelimit.routes[0].paths[1]=/a/**/b", "ratelimit.routes[0].policy=api");
    }

    @Test
    void aPathWithoutItsLeadingSlash() {
        fails("ratelimit.routes[0].paths[0]: 'api/**' does not start with '/', so it would match no request",
                "ratelimit.routes[0].paths[0]=api/**", "ratelimit.routes[0].policy=api");
    }

    @Test
    void aKeyExpressionThatDoesNotParse() {
        fails("ratelimit.routes[0].key-resolver: key expression '#request.(' does not parse",
                "ratelimit.routes[0].paths[0]=/a", "ratelimit.routes[0].policy=api", "ratelimit.routes[0].key-resolver=spel:#request.(");
    }

    @Test
    void aHeaderResolverWithoutAHeader() {
        fails("ratelimit.routes[0].key-resolver: the header key resolver needs a header name",
                "ratelimit.routes[0].paths[0]=/a", "ratelimit.routes[0].policy=api", "ratelimit.routes[0].key-resolver=header");
    }

    @Test
    void anUnknownResolverOrMethod() {
        fails("unknown key resolver 'session'",
                "ratelimit.routes[0].paths[0]=/a", "ratelimit.routes[0].policy=api", "ratelimit.routes[0].key-resolver=session");
        fails("ratelimit.routes[0].methods[0]: 'FETCH' is not an HTTP method",
                "ratelimit.routes[0].paths[0]=/a", "ratelimit.routes[0].policy=api", "ratelimit.routes[0].methods[0]=FETCH");
    }

    @Test
    void aRouteWithoutPathsOrPolicy() {
        fails("ratelimit.routes[0].paths: a route needs at least one path pattern", "ratelimit.routes[0].policy=api");
        fails("ratelimit.routes[0].policy: a route names its policy", "ratelimit.routes[0].paths[0]=/a");
    }

    @Test
    void goodRoutesStartWithEveryResolverForm() {
        runner("ratelimit.routes[0].paths[0]=/a/**", "ratelimit.routes[0].policy=api",
                "ratelimit.routes[1].paths[0]=/b/{id}", "ratelimit.routes[1].methods[0]=post", "ratelimit.routes[1].policy=api",
                "ratelimit.routes[1].key-resolver=header:X-Api-Key",
                "ratelimit.routes[2].paths[0]=/c", "ratelimit.routes[2].policy=api", "ratelimit.routes[2].key-resolver=header",
                "ratelimit.routes[2].header=X-Tenant",
                "ratelimit.routes[3].paths[0]=/d", "ratelimit.routes[3].policy=api", "ratelimit.routes[3].key-resolver=spel:#user ?: #ip",
                "ratelimit.routes[4].paths[0]=/e", "ratelimit.routes[4].policy=api", "ratelimit.routes[4].key-resolver=spel",
                "ratelimit.routes[4].expression=#request.getHeader('X-Key')",
                "ratelimit.routes[5].paths[0]=/f", "ratelimit.routes[5].policy=api", "ratelimit.routes[5].key-resolver=user").run(ctx -> {
                    assertThat(ctx).hasNotFailed();
                    List<RateLimitRoutes.Route> routes = ctx.getBean(RateLimitRoutes.class).routes();
                    assertThat(routes).hasSize(6);
                    assertThat(routes.get(1).methods()).containsExactly("POST");
                    assertThat(routes.get(1).keyResolver()).isEqualTo(new RateLimitRoutes.KeyResolver.Header("X-Api-Key"));
                    assertThat(routes.get(2).keyResolver()).isEqualTo(new RateLimitRoutes.KeyResolver.Header("X-Tenant"));
                    assertThat(routes.get(3).keyResolver()).isInstanceOf(RateLimitRoutes.KeyResolver.Spel.class);
                    assertThat(routes.get(5).keyResolver()).isInstanceOf(RateLimitRoutes.KeyResolver.User.class);
                    assertThat(ctx.getBean(RateLimitRoutes.class).matching("/a/x/y", "GET")).hasSize(1);
                    assertThat(ctx.getBean(RateLimitRoutes.class).matching("/b/7", "GET")).isEmpty();
                    assertThat(ctx.getBean(RateLimitRoutes.class).matching("/b/7", "POST")).hasSize(1);
                });
    }
}
