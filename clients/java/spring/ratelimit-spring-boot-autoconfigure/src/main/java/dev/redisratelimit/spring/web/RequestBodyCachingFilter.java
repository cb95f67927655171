package dev.redisratelimit.spring.web;

import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.util.ContentCachingRequestWrapper;

/**
 * Keeps a copy of the body bytes a handler reads (up to a limit), so
 * duplicate prevention compares the bytes the client sent after
 * {@code @RequestBody} has consumed the stream.
 */
public class RequestBodyCachingFilter extends OncePerRequestFilter {

    private final int limit;

    public RequestBodyCachingFilter(int limit) {
        this.limit = limit;
    }

    @Override
    protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws ServletException, IOException {
        HttpServletRequest r = request instanceof ContentCachingRequestWrapper ? request : new ContentCachingRequestWrapper(request, limit);
        chain.doFilter(r, response);
    }
}
