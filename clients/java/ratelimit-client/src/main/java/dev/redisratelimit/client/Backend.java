package dev.redisratelimit.client;

import java.util.Locale;

/**
 * Which engine decides: the module's RL commands ({@link #MODULE}, the
 * default), the project's Redis Functions library ({@link #FUNCTIONS}: for
 * managed Redis, which loads no module) or {@link #AUTO}: the module where
 * it is loaded, else the library, and the library once the module goes
 * missing at run time. See {@link BackendTransport}.
 */
public enum Backend {
    MODULE, FUNCTIONS, AUTO;

    /** {@code module}, {@code functions} or {@code auto}, any case; else an error naming the setting. */
    public static Backend parse(String value) {
        if (value != null) {
            for (Backend b : values()) {
                if (b.name().equalsIgnoreCase(value.strip())) {
                    return b;
                }
            }
        }
        throw new IllegalArgumentException("invalid backend '" + value + "': 'module', 'functions' or 'auto'");
    }

    @Override
    public String toString() {
        return name().toLowerCase(Locale.ROOT);
    }
}
