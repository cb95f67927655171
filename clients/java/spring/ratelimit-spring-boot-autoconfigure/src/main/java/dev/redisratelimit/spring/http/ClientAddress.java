package dev.redisratelimit.spring.http;

/**
 * The client IP rule every adapter applies: the peer's address, except
 * behind a proxy on the same host (the peer is loopback): then the right-most
 * address of X-Forwarded-For that is not loopback — the one the nearest proxy
 * saw, which a client cannot forge by sending its own header.
 */
public final class ClientAddress {

    private ClientAddress() {
    }

    /** The client IP from the peer's address and the X-Forwarded-For header (null: none). */
    public static String of(String peer, String forwardedFor) {
        if (peer != null && isLoopback(peer) && forwardedFor != null) {
            String[] parts = forwardedFor.split(",");
            for (int i = parts.length - 1; i >= 0; i--) {
                String a = parts[i].trim();
                if (!a.isEmpty() && !isLoopback(a)) {
                    return a;
                }
            }
        }
        return peer;
    }

    public static boolean isLoopback(String a) {
        return a.startsWith("127.") || a.equals("::1") || a.equals("0:0:0:0:0:0:0:1") || a.equals("[::1]")
                || a.startsWith("::ffff:127.");
    }
}
