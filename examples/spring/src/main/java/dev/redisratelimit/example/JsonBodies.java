package dev.redisratelimit.example;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.stereotype.Component;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * A POST or PUT body is read as JSON whatever its Content-Type, as the other example apps read it:
 * SERVICES.md names no Content-Type and answers a body that is not JSON with 400, where Spring alone
 * answers 415 without reading it.
 */
@Component
public class JsonBodies extends OncePerRequestFilter {

    @Override
    protected boolean shouldNotFilter(HttpServletRequest request) {
        return !("POST".equals(request.getMethod()) || "PUT".equals(request.getMethod()));
    }

    @Override
    protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws ServletException, IOException {
        chain.doFilter(new HttpServletRequestWrapper(request) {
            @Override
            public String getContentType() {
                return MediaType.APPLICATION_JSON_VALUE;
            }

            @Override
            public String getHeader(String name) {
                return HttpHeaders.CONTENT_TYPE.equalsIgnoreCase(name) ? getContentType() : super.getHeader(name);
            }

            @Override
            public Enumeration<String> getHeaders(String name) {
                return HttpHeaders.CONTENT_TYPE.equalsIgnoreCase(name)
                        ? Collections.enumeration(List.of(getContentType())) : super.getHeaders(name);
            }
        }, response);
    }
}
