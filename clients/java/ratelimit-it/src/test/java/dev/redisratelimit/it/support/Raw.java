package dev.redisratelimit.it.support;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.client.RuleState;
import java.util.List;

/** A hand-written command sent as it is, and the checks of a decision against its raw reply. */
public final class Raw {

    private Raw() {
    }

    /** Sends {@code command args...} unchanged; the first argument is the routing key. */
    public static List<?> call(RateLimitTransport transport, String command, String... args) {
        Object reply = transport.execute(new RedisCall(command, List.of(args), 0)).toCompletableFuture().join();
        assertTrue(reply instanceof List<?>, command + " answered " + reply);
        return (List<?>) reply;
    }

    /** The six fields of {@code state} equal the first six integers of {@code raw} (from {@code offset}). */
    public static void assertState(List<?> raw, int offset, RuleState state) {
        assertEquals(raw.get(offset), state.limited() ? 1L : 0L, "limited of " + raw);
        assertEquals(raw.get(offset + 1), (long) state.rule(), "rule of " + raw);
        assertEquals(raw.get(offset + 2), state.limit(), "limit of " + raw);
        assertEquals(raw.get(offset + 3), state.remaining(), "remaining of " + raw);
        assertEquals(raw.get(offset + 4), state.retryAfterMillis(), "retry_after of " + raw);
        assertEquals(raw.get(offset + 5), state.resetAfterMillis(), "reset_after of " + raw);
        long retry = (Long) raw.get(offset + 4);
        assertEquals(retry >= 0, state.retryAfter().isPresent());
        state.retryAfter().ifPresent(d -> assertEquals(retry, d.toMillis()));
        assertEquals((Long) raw.get(offset + 5), state.resetAfter().toMillis());
    }

    public static void assertState(List<?> raw, RuleState state) {
        assertEquals(6, raw.size(), "six integers: " + raw);
        assertState(raw, 0, state);
    }
}
