package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.redisratelimit.client.Limit;
import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.LocalRateLimitTransport;
import dev.redisratelimit.client.LocalRateLimitTransport.ManualClock;
import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.io.File;
import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The golden sequence cases of clients/conformance/sequences (its README is
 * the schema): a series of calls over a controlled clock, each with the
 * decision expected — against the local backend ({@link LocalRateLimitTransport})
 * and against the real module (its {@code now} sent as the case's clock), so
 * both decide alike. The Python and Node clients run the same files.
 */
@ExtendWith(RedisServers.class)
class SequencesTest {

    private static final File DIR = new File("../../conformance/sequences");
    private static final long START_MS = 1_767_225_600_000L; // 2026-01-01T00:00:00Z
    private static final AtomicInteger RUNS = new AtomicInteger();

    static RedisClient redis;
    static LettuceTransport lettuce;

    @BeforeAll
    static void connect(RedisServers.Standalone server) {
        redis = RedisClient.create(server.uri());
        lettuce = LettuceTransport.create(redis);
    }

    @AfterAll
    static void close() {
        lettuce.close();
        redis.shutdown();
    }

    static List<JsonNode> cases() throws Exception {
        List<JsonNode> out = new ArrayList<>();
        File[] files = Objects.requireNonNull(DIR.listFiles((d, n) -> n.endsWith(".json")));
        Arrays.sort(files);
        for (File f : files) {
            new ObjectMapper().readTree(f).get("cases").forEach(out::add);
        }
        return out;
    }

    @Test
    void thereAreSequencesOfEveryKind() throws Exception {
        List<String> kinds = cases().stream().flatMap(c -> c.get("policies").findValuesAsText("kind").stream()).distinct().sorted().toList();
        assertEquals(List.of("bucket", "concurrency", "lockout", "quota", "window"), kinds);
    }

    @TestFactory
    Stream<DynamicTest> localBackend() throws Exception {
        return cases().stream().map(c -> DynamicTest.dynamicTest(c.get("id").asText(), () -> {
            ManualClock clock = new ManualClock(START_MS);
            assertEquals(List.of(), run(c, new LocalRateLimitTransport(clock), clock, ""));
        }));
    }

    @TestFactory
    Stream<DynamicTest> module() throws Exception {
        return cases().stream().map(c -> DynamicTest.dynamicTest(c.get("id").asText(), () -> {
            ManualClock clock = new ManualClock(START_MS);
            assertEquals(List.of(), run(c, clocked(lettuce, clock), clock, "seq" + RUNS.incrementAndGet() + ":"));
        }));
    }

    /** The real server, every {@code now} ({@code *}) sent as the case's clock. */
    private static RateLimitTransport clocked(RateLimitTransport real, ManualClock clock) {
        return new RateLimitTransport() {
            @Override
            public CompletionStage<Object> execute(RedisCall call) {
                List<String> args = call.args().stream().map(a -> a.equals("*") ? Long.toString(clock.millis()) : a).toList();
                return real.execute(new RedisCall(call.command(), args, call.keyIndex(), call.route()));
            }
        };
    }

    private static Policy policy(JsonNode d) {
        Policy.Builder b = Policy.builder(d.get("name").asText());
        if (d.has("counts")) {
            b.counts(d.get("counts").asText());
        }
        for (JsonNode l : d.get("limits")) {
            String name = l.get("name").asText();
            Limit limit = switch (l.get("kind").asText()) {
                case "window" -> Limit.slidingWindow(name, l.get("count").asLong(), ms(l.get("window")));
                case "bucket" -> Limit.tokenBucket(name, l.get("rate").asLong(), ms(l.get("per")), l.get("burst").asLong());
                case "quota" -> Limit.quota(name, ZoneId.of(l.get("zone").asText()),
                        QuotaPeriod.valueOf(l.get("period").asText().toUpperCase(Locale.ROOT)), l.get("limit").asLong());
                case "concurrency" -> Limit.concurrency(name, l.get("limit").asLong(), ms(l.get("ttl")));
                default -> Limit.lockout(name, l.get("max").asLong(), ms(l.get("window")), ms(l.get("lock_time")));
            };
            b.limit("estimate".equals(l.path("cost").asText(null)) ? limit.estimated() : limit);
        }
        return b.build();
    }

    private static Duration ms(JsonNode n) {
        return Duration.ofMillis(n.asLong());
    }

    /** Every difference between the case's expectations and the decisions (empty when none). */
    private static List<String> run(JsonNode c, RateLimitTransport transport, ManualClock clock, String prefix) {
        Map<String, Policy> policies = new LinkedHashMap<>();
        c.get("policies").forEach(p -> policies.put(p.get("name").asText(), policy(p)));
        List<String> wrong = new ArrayList<>();
        Map<String, Permit> held = new LinkedHashMap<>();
        try (RateLimiter limiter = RateLimiter.builder(transport).prefix(prefix).budget(Duration.ofSeconds(5))
                .refreshInterval(Duration.ofHours(1)).build()) {
            int n = 0;
            for (JsonNode step : c.get("steps")) {
                n++;
                if (step.has("advance")) {
                    clock.advance(Duration.ofMillis(step.get("advance").asLong()));
                    continue;
                }
                if (step.has("close")) {
                    Permit p = held.remove(step.get("close").asText());
                    if (step.has("used")) {
                        p.used(step.get("used").asLong());
                    }
                    p.close();
                    continue;
                }
                JsonNode x = step.get("call");
                PolicyCall call = PolicyCall.of(policies.get(x.get("policy").asText()), x.get("key").asText());
                if (x.has("cost")) {
                    call = call.withCost(x.get("cost").asLong());
                }
                if (x.has("estimate")) {
                    call = call.withEstimate(x.get("estimate").asLong());
                }
                Permit permit = null;
                PolicyDecision d;
                try {
                    permit = limiter.acquire(call);
                    d = permit.decision();
                } catch (RateLimitRefusedException e) {
                    d = e.getDecision();
                }
                Map<String, Object> got = got(d);
                int at = n;
                step.get("expect").fields().forEachRemaining(e -> {
                    Object want = e.getKey().equals("headers") ? headersOf(e.getValue()) : value(e.getValue());
                    Object g = got.get(e.getKey());
                    if (e.getKey().equals("headers")) {
                        @SuppressWarnings("unchecked")
                        Map<String, String> all = (Map<String, String>) g;
                        Map<String, String> some = new LinkedHashMap<>();
                        ((Map<?, ?>) want).keySet().forEach(h -> some.put((String) h, all.get(h)));
                        g = some;
                    }
                    if (!Objects.equals(g, want)) {
                        wrong.add("step " + at + ": " + e.getKey() + " " + g + ", expected " + want);
                    }
                });
                if (permit == null) {
                    continue;
                }
                String outcome = step.path("outcome").asText("");
                if (outcome.equals("success")) {
                    permit.succeeded();
                } else if (outcome.equals("failure")) {
                    permit.failed();
                }
                if (step.has("hold")) {
                    held.put(step.get("hold").asText(), permit);
                } else {
                    if (step.has("used")) {
                        permit.used(step.get("used").asLong());
                    }
                    permit.close();
                }
            }
            held.values().forEach(Permit::close);
        }
        return wrong;
    }

    private static Object value(JsonNode n) {
        return n.isNull() ? null : n.isBoolean() ? (Object) n.asBoolean() : n.isNumber() ? (Object) n.asLong() : n.asText();
    }

    private static Map<String, String> headersOf(JsonNode n) {
        Map<String, String> out = new LinkedHashMap<>();
        n.fields().forEachRemaining(h -> out.put(h.getKey(), h.getValue().asText()));
        return out;
    }

    /** The decision as the HTTP adapters answer it (the golden conformance runner's formatting). */
    private static Map<String, Object> got(PolicyDecision d) {
        Map<String, Object> out = new LinkedHashMap<>();
        boolean limited = !d.admitted();
        out.put("limited", limited);
        out.put("binding", d.bindingLimit().name());
        out.put("retry_after_ms", !limited || d.retryAfterMs() < 0 ? null : d.retryAfterMs());
        Map<String, String> headers = new LinkedHashMap<>();
        List<String> state = new ArrayList<>();
        for (LimitState s : d.limits()) {
            state.add("\"" + s.name() + "\";r=" + s.r() + ";t=" + s.t());
        }
        headers.put("RateLimit", String.join(", ", state));
        if (limited && d.retryAfterMs() >= 0) {
            headers.put("Retry-After", Long.toString((d.retryAfterMs() + 999) / 1000));
        }
        out.put("headers", headers);
        return out;
    }
}
