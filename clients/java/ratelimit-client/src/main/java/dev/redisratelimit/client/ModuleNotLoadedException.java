package dev.redisratelimit.client;

/**
 * The server answered {@code COMMAND INFO RL.ALL} with nothing: the
 * redis-ratelimit module is not loaded there.
 */
public class ModuleNotLoadedException extends RateLimitException {

    private static final long serialVersionUID = 1L;

    public ModuleNotLoadedException(String message) {
        super(message);
    }
}
