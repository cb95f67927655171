package dev.redisratelimit.client;

/**
 * The local backend ({@link LocalRateLimitTransport}) refused a command that
 * would grow it past its bound (nothing the command did is kept). The
 * {@link FailMode#LOCAL} Redis-down mode answers it as a refusal whose
 * retry-after is {@link #retryAfterMillis()}: until the earliest key expires
 * (1 s when none expires). The same error as Python's and Node's
 * {@code LocalBackendFullError}.
 */
public final class LocalBackendFullException extends RateLimitException {
    private static final long serialVersionUID = 1L;
    private final long retryAfterMillis;

    public LocalBackendFullException(long retryAfterMillis, int maxKeys, int maxEntries) {
        super("the local backend is full (" + maxKeys + " keys, " + maxEntries + " entries): retry after " + retryAfterMillis + " ms");
        this.retryAfterMillis = retryAfterMillis;
    }

    public long retryAfterMillis() {
        return retryAfterMillis;
    }
}
