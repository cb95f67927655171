package dev.redisratelimit.spring.annotation;

/** Whose limit a call counts against when no SpEL key is given. */
public enum KeyBy {
    /** The client IP (X-Forwarded-For's right-most non-loopback address when the peer is a loopback proxy). */
    IP,
    /** The user: the request's principal, else the header named by ratelimit.user-header. */
    USER,
    /** Client IP and request path (seed 004's interceptor key). */
    IP_AND_PATH,
    /** One key for every caller. */
    GLOBAL
}
