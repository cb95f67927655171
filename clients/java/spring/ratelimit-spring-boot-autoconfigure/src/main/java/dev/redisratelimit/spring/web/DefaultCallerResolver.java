package dev.redisratelimit.spring.web;

import dev.redisratelimit.spring.http.ClientAddress;
import jakarta.servlet.http.HttpServletRequest;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.Principal;
import java.util.HexFormat;
import org.springframework.web.util.ContentCachingRequestWrapper;
import org.springframework.web.util.WebUtils;

/**
 * The client IP is {@link ClientAddress}'s rule (the peer, or behind a proxy on
 * the same host the right-most non-loopback X-Forwarded-For address). The user is the request's principal, else the
 * header named by {@code ratelimit.user-header}.
 */
public class DefaultCallerResolver implements CallerResolver {

    private final String userHeader;

    public DefaultCallerResolver(String userHeader) {
        this.userHeader = userHeader == null || userHeader.isBlank() ? null : userHeader;
    }

    @Override
    public String clientIp(HttpServletRequest request) {
        return ClientAddress.of(request.getRemoteAddr(), request.getHeader("X-Forwarded-For"));
    }

    @Override
    public String user(HttpServletRequest request) {
        Principal p = request.getUserPrincipal();
        if (p != null && p.getName() != null) {
            return p.getName();
        }
        return userHeader == null ? null : request.getHeader(userHeader);
    }

    @Override
    public String bodyDigest(HttpServletRequest request) {
        ContentCachingRequestWrapper cached = WebUtils.getNativeRequest(request, ContentCachingRequestWrapper.class);
        if (cached == null) {
            return null;
        }
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(cached.getContentAsByteArray());
            return HexFormat.of().formatHex(d, 0, 16);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
