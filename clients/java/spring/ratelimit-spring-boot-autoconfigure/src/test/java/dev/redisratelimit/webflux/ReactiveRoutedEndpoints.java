package dev.redisratelimit.webflux;

import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.security.Principal;
import java.util.Map;
import org.springframework.core.Ordered;
import org.springframework.stereotype.Component;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Mono;

/** The WebFlux twins of the MVC app's routed endpoints (application-routes.yml): no annotation except /r/both and /r/mixed. */
@RestController
public class ReactiveRoutedEndpoints {

    @GetMapping({"/r/ip", "/r/key/{id}", "/r/user", "/r/tenant/{t}", "/r/items"})
    public Mono<Map<String, Object>> plain() {
        return Mono.just(Map.of("ok", true));
    }

    @PostMapping("/r/items")
    public Mono<Map<String, Object>> create() {
        return Mono.just(Map.of("ok", true));
    }

    @GetMapping("/r/boom")
    public Mono<Map<String, Object>> boom(@RequestParam(defaultValue = "true") boolean fail) {
        return fail ? Mono.error(new IllegalStateException("the handler failed")) : Mono.just(Map.of("ok", true));
    }

    @GetMapping("/r/both/{id}")
    @RateLimited(policy = "both-method", key = "#request.headers.getFirst('X-Key')", limits = @Limit(name = "method", count = 4, window = "60s"))
    public Mono<Map<String, Object>> both(@PathVariable String id) {
        return Mono.just(Map.of("ok", true));
    }

    /** A functional endpoint (no controller method): guarded by its route all the same (RoutesContract). */
    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    public static class Functional {
        @org.springframework.context.annotation.Bean
        public org.springframework.web.reactive.function.server.RouterFunction<org.springframework.web.reactive.function.server.ServerResponse> fn() {
            return org.springframework.web.reactive.function.server.RouterFunctions.route()
                    .GET("/r/fn", r -> org.springframework.web.reactive.function.server.ServerResponse.ok().bodyValue(Map.of("ok", true)))
                    .build();
        }
    }

    /** Stands in for Spring Security: X-Principal becomes the exchange's principal (before the route filter, order 0). */
    @Component
    public static class PrincipalFilter implements WebFilter, Ordered {
        @Override
        public int getOrder() {
            return -200;
        }

        @Override
        public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
            String name = exchange.getRequest().getHeaders().getFirst("X-Principal");
            if (name == null) {
                return chain.filter(exchange);
            }
            Principal p = () -> name;
            return chain.filter(exchange.mutate().principal(Mono.just(p)).build());
        }
    }
}
