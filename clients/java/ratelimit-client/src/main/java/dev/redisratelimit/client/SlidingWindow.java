package dev.redisratelimit.client;

import java.time.Duration;

/**
 * One sliding-window-log rule of RL.CHECK / RL.PEEK: at most {@code count}
 * units in any {@code window}. Checked when built, with the module's ranges.
 */
public record SlidingWindow(long count, Duration window) {

    public SlidingWindow {
        Limits.positive("count", count);
        Limits.millis("window", window);
    }

    public static SlidingWindow of(long count, Duration window) {
        return new SlidingWindow(count, window);
    }

    long windowMillis() {
        return window.toMillis();
    }
}
