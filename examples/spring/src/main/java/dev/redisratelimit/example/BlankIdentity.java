package dev.redisratelimit.example;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Collections;
import java.util.Enumeration;
import java.util.Set;
import org.springframework.stereotype.Component;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * An identity header sent empty (`X-Api-Key:`) is a missing identity: 401, as the other example
 * apps answer (SERVICES.md), where Spring alone binds "" and the starter answers 400 for an empty
 * key. The header is hidden, so Spring's own missing-header path (BadInput) answers.
 */
@Component
public class BlankIdentity extends OncePerRequestFilter {

    private static final Set<String> IDENTITY = Set.of("x-user", "x-api-key");

    private static boolean blank(HttpServletRequest request, String name) {
        String v = request.getHeader(name);
        return v != null && v.isBlank();
    }

    @Override
    protected boolean shouldNotFilter(HttpServletRequest request) {
        return IDENTITY.stream().noneMatch(h -> blank(request, h));
    }

    @Override
    protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws ServletException, IOException {
        chain.doFilter(new HttpServletRequestWrapper(request) {
            private boolean hidden(String name) {
                return name != null && IDENTITY.contains(name.toLowerCase(java.util.Locale.ROOT)) && blank(request, name);
            }

            @Override
            public String getHeader(String name) {
                return hidden(name) ? null : super.getHeader(name);
            }

            @Override
            public Enumeration<String> getHeaders(String name) {
                return hidden(name) ? Collections.emptyEnumeration() : super.getHeaders(name);
            }

            @Override
            public Enumeration<String> getHeaderNames() {
                return Collections.enumeration(Collections.list(super.getHeaderNames()).stream().filter(n -> !hidden(n)).toList());
            }
        }, response);
    }
}
