package dev.redisratelimit.spring;

import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.security.Principal;
import java.util.Map;
import java.util.concurrent.Callable;
import org.springframework.stereotype.Component;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * Endpoints limited by {@code ratelimit.routes} (application-routes.yml):
 * no annotation, except /r/both, which a route and its own @RateLimited
 * both limit.
 */
@RestController
public class RoutedEndpoints {

    @GetMapping({"/r/ip", "/r/key/{id}", "/r/user", "/r/tenant/{t}"})
    public Map<String, Object> plain() {
        return Map.of("ok", true);
    }

    @GetMapping("/r/items")
    public Map<String, Object> list() {
        return Map.of("ok", true);
    }

    @PostMapping("/r/items")
    public Map<String, Object> create() {
        return Map.of("ok", true);
    }

    @GetMapping("/r/boom")
    public Map<String, Object> boom(@RequestParam(defaultValue = "true") boolean fail) {
        if (fail) {
            throw new IllegalStateException("the handler failed");
        }
        return Map.of("ok", true);
    }

    @GetMapping("/r/async")
    public Callable<Map<String, Object>> async(@RequestParam(defaultValue = "0") long sleepMs) {
        return () -> {
            Thread.sleep(sleepMs);
            return Map.of("ok", true);
        };
    }

    @GetMapping("/r/both/{id}")
    @RateLimited(policy = "both-method", key = "#request.getHeader('X-Key')", limits = @Limit(name = "method", count = 4, window = "60s"))
    public Map<String, Object> both(@PathVariable String id) {
        return Map.of("ok", true);
    }

    @GetMapping("/r/mixed")
    @RateLimited(policy = "mixed-method", key = "#request.getHeader('X-Key')", limits = @Limit(name = "per-key", count = 2, window = "60s"))
    public Map<String, Object> mixed() {
        return Map.of("ok", true);
    }

    /** A functional endpoint (no controller method): a route's refusal is answered all the same. */
    @org.springframework.context.annotation.Configuration(proxyBeanMethods = false)
    public static class Functional {
        @org.springframework.context.annotation.Bean
        public org.springframework.web.servlet.function.RouterFunction<org.springframework.web.servlet.function.ServerResponse> fn() {
            return org.springframework.web.servlet.function.RouterFunctions.route()
                    .GET("/r/fn", r -> org.springframework.web.servlet.function.ServerResponse.ok().body(Map.of("ok", true))).build();
        }
    }

    /** Stands in for a security filter: X-Principal becomes the request's principal (no Spring Security needed). */
    @Component
    public static class PrincipalFilter extends OncePerRequestFilter {
        @Override
        protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
                throws ServletException, IOException {
            String name = request.getHeader("X-Principal");
            if (name == null) {
                chain.doFilter(request, response);
                return;
            }
            Principal p = () -> name;
            chain.doFilter(new HttpServletRequestWrapper(request) {
                @Override
                public Principal getUserPrincipal() {
                    return p;
                }
            }, response);
        }
    }
}
