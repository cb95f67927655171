package dev.redisratelimit.gateway;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;

/**
 * A policy name no policy has (a typo) in a route's RequestRateLimiter args
 * or in {@code ratelimit.gateway.route-policies} fails the start, naming it,
 * as the RateLimit filter's does: not a gateway that starts and answers 500
 * on every request of that route.
 */
class GatewayConfigTest {

    // As command-line arguments: above application.yml (the builder's properties() are defaults, below it).
    private static void gateway(String... properties) {
        String[] args = Stream.concat(Stream.of("--server.port=0", "--ratelimit.verify-module=false",
                "--backend.uri=http://127.0.0.1:1", "--spring.data.redis.url=redis://127.0.0.1:1"),
                Stream.of(properties).map(p -> "--" + p)).toArray(String[]::new);
        new SpringApplicationBuilder(GatewayTestApp.class).run(args).close();
    }

    @Test
    void anUnknownPolicyInARouteArgsFailsTheStart() {
        assertThatThrownBy(() -> gateway(
                "spring.cloud.gateway.server.webflux.routes[0].id=typo",
                "spring.cloud.gateway.server.webflux.routes[0].uri=http://127.0.0.1:1",
                "spring.cloud.gateway.server.webflux.routes[0].predicates[0]=Path=/typo/**",
                "spring.cloud.gateway.server.webflux.routes[0].filters[0].name=RequestRateLimiter",
                "spring.cloud.gateway.server.webflux.routes[0].filters[0].args.key-resolver=#{@userKeyResolver}",
                "spring.cloud.gateway.server.webflux.routes[0].filters[0].args.redis-ratelimit.policies=short,shrot"))
                .hasStackTraceContaining("route 'typo': unknown rate-limit policy 'shrot'");
    }

    @Test
    void anUnknownPolicyInRoutePoliciesFailsTheStart() {
        assertThatThrownBy(() -> gateway("ratelimit.gateway.route-policies.scg-props=lnog"))
                .hasStackTraceContaining("route 'scg-props': unknown rate-limit policy 'lnog'");
    }
}
