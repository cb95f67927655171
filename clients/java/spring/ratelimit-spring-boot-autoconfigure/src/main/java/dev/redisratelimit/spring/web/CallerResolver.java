package dev.redisratelimit.spring.web;

import jakarta.servlet.http.HttpServletRequest;

/** Who is calling: the identities a policy can be keyed by. A bean of this type replaces the default. */
public interface CallerResolver {

    /** The client's IP address. */
    String clientIp(HttpServletRequest request);

    /** The user, or null when the request names none. */
    String user(HttpServletRequest request);

    /** A digest of the request body's bytes (duplicate prevention), or null when no body was cached. */
    String bodyDigest(HttpServletRequest request);
}
