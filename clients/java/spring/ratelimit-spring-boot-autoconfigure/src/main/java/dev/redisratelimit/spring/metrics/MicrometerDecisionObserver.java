package dev.redisratelimit.spring.metrics;

import dev.redisratelimit.spring.annotation.OnRedisDown;
import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.client.DecisionObserver;
import dev.redisratelimit.client.FailMode;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The starter's meters, tagged by policy name (bounded: the policies are
 * declared in code and YAML) and never by the caller's key:
 * <ul>
 * <li>{@code ratelimit.decisions} (timer): each decision's latency, tags
 *     {@code policy}, {@code outcome} (admitted, refused, unavailable, error) and
 *     {@code reason} (rate_limited, duplicate, locked on a refusal; none otherwise);
 *     its count is the admitted / refused count.</li>
 * <li>{@code ratelimit.errors} (counter): decisions that could not use Redis or
 *     failed, tags {@code policy}, {@code kind} (timeout, connection, circuit_open,
 *     configuration, other).</li>
 * <li>{@code ratelimit.fallbacks} (counter): decisions answered by the Redis-down
 *     behaviour, tags {@code policy}, {@code mode} (fail_open, fail_closed, local).</li>
 * </ul>
 * Meters are looked up once per tag combination and cached.
 */
public final class MicrometerDecisionObserver implements DecisionObserver {

    private final MeterRegistry registry;
    private final Map<String, Timer> timers = new ConcurrentHashMap<>();
    private final Map<String, Counter> counters = new ConcurrentHashMap<>();

    public MicrometerDecisionObserver(MeterRegistry registry) {
        this.registry = registry;
    }

    @Override
    public void decided(String policy, Outcome outcome, PolicyDecision.Kind refusal, long nanos) {
        String o = lower(outcome);
        String reason = refusal == null || refusal == PolicyDecision.Kind.ADMITTED ? "none" : lower(refusal);
        timers.computeIfAbsent(policy + '\0' + o + '\0' + reason, k -> Timer.builder("ratelimit.decisions")
                .description("Rate-limit decisions and their latency (the Redis round trip included)")
                .tags("policy", policy, "outcome", o, "reason", reason).register(registry))
                .record(nanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void error(String policy, ErrorKind kind) {
        String k = lower(kind);
        counters.computeIfAbsent("e\0" + policy + '\0' + k, x -> Counter.builder("ratelimit.errors")
                .description("Rate-limit decisions that could not use Redis, or failed")
                .tags("policy", policy, "kind", k).register(registry)).increment();
    }

    @Override
    public void fallback(String policy, FailMode mode) {
        String m = lower(OnRedisDown.of(mode)); // the setting's name (fail_open, fail_closed, local)
        counters.computeIfAbsent("f\0" + policy + '\0' + m, x -> Counter.builder("ratelimit.fallbacks")
                .description("Rate-limit decisions answered by the policy's Redis-down behaviour")
                .tags("policy", policy, "mode", m).register(registry)).increment();
    }

    private static String lower(Enum<?> e) {
        return e.name().toLowerCase(Locale.ROOT);
    }
}
