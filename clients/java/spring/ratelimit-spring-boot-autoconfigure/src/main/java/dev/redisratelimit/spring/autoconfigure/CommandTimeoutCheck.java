package dev.redisratelimit.spring.autoconfigure;

import java.time.Duration;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.util.ClassUtils;

/**
 * Refuses at start a Lettuce command timeout ({@code spring.data.redis.timeout})
 * shorter than the decision budget + 10 s (CLIENTS.md §3): Lettuce then
 * cancels a command Redis may still run, and a decision answered by the
 * Redis-down mode that Redis admits later could not be given back (its lease
 * held for its TTL, its charges kept). Unset, Lettuce's 60 s is right: the
 * budget bounds each decision. Jedis is exempt: a blocking client's socket
 * timeout is its budget, as for Python's sync redis-py (documented there).
 */
final class CommandTimeoutCheck {

    static final Duration LATE_REPLY_MARGIN = Duration.ofSeconds(10);

    private CommandTimeoutCheck() {
    }

    static void check(RedisConnectionFactory factory, Duration budget) {
        if (factory != null && ClassUtils.isPresent("io.lettuce.core.RedisClient", CommandTimeoutCheck.class.getClassLoader())) {
            Lettuce.check(factory, budget);
        }
    }

    static final class Lettuce {
        static void check(RedisConnectionFactory factory, Duration budget) {
            if (!(factory instanceof org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory l)) {
                return;
            }
            Duration timeout = l.getClientConfiguration().getCommandTimeout();
            Duration least = budget.plus(LATE_REPLY_MARGIN);
            if (timeout != null && !timeout.isZero() && !timeout.isNegative() && timeout.compareTo(least) < 0) {
                throw new IllegalStateException("spring.data.redis.timeout=" + timeout.toMillis() + "ms drops replies Redis still runs: "
                        + "leave it unset (ratelimit.decision-budget bounds each decision) or give at least the budget + 10 s ("
                        + least.toMillis() + "ms), so a decision Redis answers late can be given back");
            }
        }
    }
}
