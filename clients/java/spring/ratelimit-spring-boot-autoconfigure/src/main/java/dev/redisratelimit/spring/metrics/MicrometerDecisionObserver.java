package dev.redisratelimit.spring.metrics;

import java.util.function.Supplier;
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
 * Every meter also carries {@code backend}: the engine that decided ({@code module}
 * or {@code functions}, see {@code ratelimit.backend}).
 * Meters are looked up once per tag combination and cached.
 */
public final class MicrometerDecisionObserver implements DecisionObserver {

    private final MeterRegistry registry;
    private final Map<String, Timer> timers = new ConcurrentHashMap<>();
    private final Map<String, Counter> counters = new ConcurrentHashMap<>();

    private final Supplier<String> backend;

    public MicrometerDecisionObserver(MeterRegistry registry) {
        this(registry, () -> "module");
    }

    /** {@code backend}: the engine deciding now (it changes once when AUTO moves to the library). */
    public MicrometerDecisionObserver(MeterRegistry registry, Supplier<String> backend) {
        this.registry = registry;
        this.backend = backend;
    }

    @Override
    public void decided(String policy, Outcome outcome, PolicyDecision.Kind refusal, long nanos) {
        String o = lower(outcome);
        String reason = refusal == null || refusal == PolicyDecision.Kind.ADMITTED ? "none" : lower(refusal);
        String b = backend.get();
        timers.computeIfAbsent(policy + '\0' + o + '\0' + reason + '\0' + b, k -> Timer.builder("ratelimit.decisions")
                .description("Rate-limit decisions and their latency (the Redis round trip included)")
                .tags("policy", policy, "outcome", o, "reason", reason, "backend", b).register(registry))
                .record(nanos, TimeUnit.NANOSECONDS);
    }

    @Override
    public void error(String policy, ErrorKind kind) {
        String k = lower(kind);
        String b = backend.get();
        counters.computeIfAbsent("e\0" + policy + '\0' + k + '\0' + b, x -> Counter.builder("ratelimit.errors")
                .description("Rate-limit decisions that could not use Redis, or failed")
                .tags("policy", policy, "kind", k, "backend", b).register(registry)).increment();
    }

    @Override
    public void fallback(String policy, FailMode mode) {
        String m = lower(OnRedisDown.of(mode)); // the setting's name (fail_open, fail_closed, local)
        String b = backend.get();
        counters.computeIfAbsent("f\0" + policy + '\0' + m + '\0' + b, x -> Counter.builder("ratelimit.fallbacks")
                .description("Rate-limit decisions answered by the policy's Redis-down behaviour")
                .tags("policy", policy, "mode", m, "backend", b).register(registry)).increment();
    }

    private static String lower(Enum<?> e) {
        return e.name().toLowerCase(Locale.ROOT);
    }
}
