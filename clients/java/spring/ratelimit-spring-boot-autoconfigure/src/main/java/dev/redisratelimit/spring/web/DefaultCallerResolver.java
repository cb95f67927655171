package dev.redisratelimit.spring.web;

import jakarta.servlet.http.HttpServletRequest;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.Principal;
import java.util.HexFormat;
import org.springframework.web.util.ContentCachingRequestWrapper;
import org.springframework.web.util.WebUtils;

/**
 * The client IP is the peer's address, except behind a proxy on the same host
 * (the peer is loopback): then the right-most address of X-Forwarded-For that
 * is not loopback — the one the nearest proxy saw, which a client cannot forge
 * by sending its own header. The user is the request's principal, else the
 * header named by {@code ratelimit.user-header}.
 */
public class DefaultCallerResolver implements CallerResolver {

    private final String userHeader;

    public DefaultCallerResolver(String userHeader) {
        this.userHeader = userHeader == null || userHeader.isBlank() ? null : userHeader;
    }

    @Override
    public String clientIp(HttpServletRequest request) {
        String peer = request.getRemoteAddr();
        if (isLoopback(peer)) {
            String xff = request.getHeader("X-Forwarded-For");
            if (xff != null) {
                String[] parts = xff.split(",");
                for (int i = parts.length - 1; i >= 0; i--) {
                    String a = parts[i].trim();
                    if (!a.isEmpty() && !isLoopback(a)) {
                        return a;
                    }
                }
            }
        }
        return peer;
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

    static boolean isLoopback(String a) {
        return a.startsWith("127.") || a.equals("::1") || a.equals("0:0:0:0:0:0:0:1") || a.equals("[::1]")
                || a.startsWith("::ffff:127.");
    }
}
