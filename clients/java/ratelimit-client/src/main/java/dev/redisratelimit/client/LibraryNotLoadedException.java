package dev.redisratelimit.client;

/**
 * Backend {@code functions}: the redis-ratelimit Functions library is not on
 * the server (or older than this client) and this Redis user may not load
 * it; the message names the command to run once by hand. A kind of
 * {@link ModuleNotLoadedException}: no engine to decide with.
 */
public class LibraryNotLoadedException extends ModuleNotLoadedException {

    private static final long serialVersionUID = 1L;

    public LibraryNotLoadedException(String message) {
        super(message);
    }
}
