package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every golden case of clients/conformance/cases (its README is the schema;
 * limits-text.json has its own runner, {@link LimitTextConformanceTest}) run
 * through this client's decision core over a transport that records each
 * command and answers the case's replies — as the Python and Node suites run
 * them. Compared: the argv sent (lease tokens masked), the decision (binding
 * limit, problem, retry) with the headers formatted from its limit states,
 * the settlement, and refusals with the field they name
 * ({@link RateLimitArgumentException#field()}, Python's and Node's {@code error.field}).
 * A value Java's parameter types cannot hold (a fraction or a string where a
 * {@code long} goes, an unknown zone or period where a {@code ZoneId} or
 * {@link QuotaPeriod} goes) is refused by the compiler for a Java caller; the
 * runner reports it refused naming the parameter it could not pass.
 *
 * <p>A case this API cannot express (a subkey on anything but the duplicate
 * window, a limit's own problem type, policies of different prefixes in one
 * call) is skipped, saying why. A case in {@link #DIVERGENT} is where
 * this client does not follow CLIENTS.md §2 yet (issue 34: the clause key
 * named after every limit, ...): it runs, and is skipped with its difference
 * while it differs; one that comes to match fails, saying to remove it.
 */
class WireConformanceTest {

    private static final File DIR = new File("../../conformance/cases");
    private static final Pattern TOKEN = Pattern.compile("[\\x21-\\x22\\x24-\\x7e]{1,64}");
    /** Ids where this client differs from the golden file today (printed in the skip reason). */
    private static final Set<String> DIVERGENT = new HashSet<>(Arrays.asList(System.getProperty("conformance.divergent",
            String.join(",", Divergent.IDS)).split(",")));

    @TestFactory
    Stream<DynamicTest> everyCase() throws Exception {
        List<DynamicTest> out = new ArrayList<>();
        File[] files = Objects.requireNonNull(DIR.listFiles((d, n) -> n.endsWith(".json") && !n.equals("limits-text.json")));
        Arrays.sort(files);
        ObjectMapper json = new ObjectMapper();
        for (File f : files) {
            for (JsonNode c : json.readTree(f).get("cases")) {
                String id = c.get("id").asText();
                out.add(DynamicTest.dynamicTest(f.getName().replace(".json", "") + "/" + id, () -> check(c)));
            }
        }
        assertThat(out).hasSizeGreaterThanOrEqualTo(150);
        return out.stream();
    }

    static final class Unsupported extends RuntimeException {
        Unsupported(String why) {
            super(why);
        }
    }

    /** A JSON value no Java argument of that parameter's type can hold: refused before any call, naming it. */
    static final class NotExpressible extends RuntimeException {
        final String field;

        NotExpressible(String field, String why) {
            super(why);
            this.field = field;
        }
    }

    private static void check(JsonNode c) {
        String id = c.get("id").asText();
        Map<String, Object> got;
        try {
            got = run(c);
        } catch (Unsupported e) {
            Assumptions.abort("not expressible in the Java API: " + e.getMessage());
            return;
        }
        Map<String, Object> want = expected(c.get("expect"));
        String report = System.getProperty("conformance.report"); // a file to list the ids that differ in
        if (report != null && !want.equals(got)) {
            try {
                java.nio.file.Files.writeString(java.nio.file.Path.of(report), id + "\n", java.nio.file.StandardOpenOption.CREATE,
                        java.nio.file.StandardOpenOption.APPEND);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        if (DIVERGENT.contains(id)) {
            if (want.equals(got)) {
                throw new AssertionError(id + " matches the golden case now: remove it from Divergent.IDS");
            }
            Assumptions.abort("known divergence (issue 34): want " + want + ", got " + got);
        }
        assertThat(got).isEqualTo(want);
    }

    // ------------------------------------------------------------------ building

    private static Policy policy(JsonNode d) {
        Policy.Builder b = Policy.builder(d.get("name").asText());
        if (d.has("inflight_retry_after")) {
            b.inflightRetryAfter(ms(d, "inflight_retry_after"));
        }
        if (d.has("tag") && !d.get("tag").isNull()) {
            b.tag(d.get("tag").asText());
        }
        for (JsonNode l : d.get("limits")) {
            String kind = l.get("kind").asText();
            String name = l.get("name").asText();
            boolean subkey = l.path("subkey").asBoolean(false);
            String problem = l.has("problem") ? l.get("problem").asText() : null;
            if (subkey) {
                if (!kind.equals("window") || !name.equals("duplicate") || l.get("count").asLong() != 1
                        || (problem != null && !problem.equals("duplicate"))) {
                    throw new Unsupported("a subkey on anything but a duplicate window");
                }
                b.preventDuplicates(ms(l, "window"));
                continue;
            }
            if (problem != null) {
                throw new Unsupported("a limit's own problem type");
            }
            Limit limit = switch (kind) {
                case "window" -> Limit.slidingWindow(name, num(l, "count"), ms(l, "window"));
                case "bucket" -> Limit.tokenBucket(name, num(l, "rate"), ms(l, "per"), num(l, "burst"));
                case "quota" -> Limit.quota(name, l.get("zone").isNull() ? null : zone(l.get("zone").asText()),
                        period(l.get("period").asText()), num(l, "limit"));
                case "concurrency" -> Limit.concurrency(name, num(l, "limit"), ms(l, "ttl"));
                case "lockout" -> Limit.lockout(name, num(l, "max"), ms(l, "window"), ms(l, "lock_time"));
                default -> throw new Unsupported("kind " + kind);
            };
            if (l.path("shared").asBoolean(false)) {
                limit = limit.asShared();
            }
            if ("estimate".equals(l.path("cost").asText(null))) {
                limit = limit.estimated();
            }
            b.limit(limit);
        }
        return b.build();
    }

    /** {@code o[field]} as the long a Java caller would pass; anything else is refused as Java's types refuse it. */
    private static long num(JsonNode o, String field) {
        JsonNode n = o.get(field);
        if (!n.isIntegralNumber() || !n.canConvertToLong()) {
            throw new NotExpressible(field, "not a long: " + n);
        }
        return n.asLong();
    }

    private static Duration ms(JsonNode o, String field) {
        return Duration.ofMillis(num(o, field));
    }

    private static ZoneId zone(String z) {
        try {
            return ZoneId.of(z);
        } catch (java.time.DateTimeException e) {
            throw new NotExpressible("zone", "no ZoneId: " + z);
        }
    }

    private static QuotaPeriod period(String p) {
        try {
            return QuotaPeriod.valueOf(p.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new NotExpressible("period", "no QuotaPeriod: " + p);
        }
    }

    private static PolicyCall call(Policy p, JsonNode c) {
        PolicyCall call = PolicyCall.of(p, c.get("key").asText());
        if (c.has("zone")) {
            call = call.withZone(c.get("zone").asText());
        }
        if (c.has("subkeys")) {
            JsonNode s = c.get("subkeys");
            if (s.size() != 1 || !s.has("duplicate")) {
                throw new Unsupported("subkeys other than the duplicate one");
            }
            call = call.withSubkey(s.get("duplicate").asText());
        }
        if (c.has("cost")) {
            call = call.withCost(num(c, "cost"));
        }
        if (c.has("estimate")) {
            call = call.withEstimate(num(c, "estimate"));
        }
        return call;
    }

    // ------------------------------------------------------------------ running

    /** Records commands; answers each with the reply of the expected command it equals, else in order. */
    static final class Recording implements RateLimitTransport {
        final List<List<String>> sent = new ArrayList<>();
        final List<List<String>> expected = new ArrayList<>();
        final List<Object> replies = new ArrayList<>();
        final Map<String, Map<String, String>> store = new LinkedHashMap<>();
        final Set<String> tokens = new HashSet<>();
        boolean settling;
        final List<List<String>> settled = new ArrayList<>();

        @Override
        public CompletionStage<Object> execute(RedisCall call) {
            List<String> argv = new ArrayList<>();
            argv.add(call.command());
            call.args().forEach(a -> argv.add(String.valueOf(a)));
            if (argv.get(0).equals("HGETALL")) {
                List<Object> flat = new ArrayList<>();
                store.getOrDefault(argv.get(1), Map.of()).forEach((k, v) -> {
                    flat.add(k);
                    flat.add(v);
                });
                return CompletableFuture.completedFuture(flat);
            }
            List<String> m = masked(argv, tokens);
            if (settling) {
                settled.add(m);
                return CompletableFuture.completedFuture(m.get(0).equals("RL.RELEASE") ? List.of(1L) : List.of(0L, 1L, 1L, 1L, -1L, 1L));
            }
            sent.add(m);
            if (replies.isEmpty()) {
                return CompletableFuture.completedFuture(admission(m));
            }
            int i = expected.indexOf(m);
            int at = i >= 0 ? i : sent.size() - 1;
            return CompletableFuture.completedFuture(at < replies.size() ? replies.get(at) : admission(m));
        }
    }

    private static List<String> masked(List<String> argv, Set<String> tokens) {
        List<String> out = new ArrayList<>(argv);
        for (int i = 1; i < out.size(); i++) {
            if (out.get(i - 1).equals("TOKEN") || (out.get(0).equals("RL.RELEASE") && i >= 3)) {
                assertThat(out.get(i)).matches(TOKEN);
                tokens.add(out.get(i));
                out.set(i, "<token>");
            }
        }
        return out;
    }

    /** An admitting reply of the command's shape (a case about argv only), DETAILS per rule for RL.ALL. */
    private static Object admission(List<String> argv) {
        switch (argv.get(0)) {
            case "RL.LOCKCOUNT":
                return List.of(0L, 1L, 0L);
            case "RL.LEASE":
                return List.of(0L, 1L, 1L, 0L, -1L, 0L, "t");
            case "RL.ALL":
                break;
            default:
                return List.of(0L, 1L, 1L, 0L, -1L, 0L);
        }
        List<Object> reply = new ArrayList<>(List.of(0L, 1L, 1L, 1L, 0L, -1L, 0L));
        if (!argv.get(argv.size() - 1).equals("DETAILS")) {
            return reply;
        }
        Set<String> periods = Set.of("MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR");
        int i = 3 + Integer.parseInt(argv.get(1));
        while (i < argv.size()) {
            String w = argv.get(i);
            if (!Set.of("CHECK", "THROTTLE", "QUOTA", "LEASE").contains(w)) {
                i++;
                continue;
            }
            i += w.equals("QUOTA") ? 3 : 2;
            int rules = 0;
            if (w.equals("QUOTA")) {
                for (; i + 1 < argv.size() && periods.contains(argv.get(i)); i += 2) {
                    rules++;
                }
            } else {
                int n = 0;
                for (; i < argv.size() && argv.get(i).matches("[0-9]+"); i++) {
                    n++;
                }
                rules = w.equals("CHECK") ? n / 2 : w.equals("THROTTLE") ? n / 3 : 1;
            }
            List<Object> clause = new ArrayList<>();
            for (int r = 1; r <= rules; r++) {
                clause.add(List.of(0L, (long) r, 1L, 0L, -1L, 0L));
            }
            reply.add(clause);
        }
        return reply;
    }

    /** JSON replies as the transport contract gives them: Long, String, null, List. */
    private static Object reply(JsonNode n) {
        if (n.isNull()) {
            return null;
        }
        if (n.isIntegralNumber()) {
            return n.asLong();
        }
        if (n.isArray()) {
            List<Object> l = new ArrayList<>();
            n.forEach(x -> l.add(reply(x)));
            return l;
        }
        return n.asText();
    }

    private static Map<String, Object> run(JsonNode c) {
        Recording t = new Recording();
        c.path("expect").path("commands").forEach(cmd -> {
            List<String> argv = new ArrayList<>();
            cmd.forEach(a -> argv.add(a.asText()));
            t.expected.add(argv);
        });
        c.path("replies").forEach(r -> t.replies.add(reply(r)));
        c.path("store").fields().forEachRemaining(h -> {
            Map<String, String> fields = new LinkedHashMap<>();
            h.getValue().fields().forEachRemaining(f -> fields.put(f.getKey(), f.getValue().asText()));
            t.store.put(h.getKey(), fields);
        });
        Set<String> prefixes = new HashSet<>();
        c.get("policies").forEach(p -> prefixes.add(p.path("prefix").asText("")));
        if (prefixes.size() > 1) {
            throw new Unsupported("policies of different prefixes in one call (the prefix is the limiter's)");
        }
        String prefix = prefixes.iterator().next();
        Map<String, Object> out = new LinkedHashMap<>();
        Permit permit;
        try {
            Map<String, Policy> policies = new LinkedHashMap<>();
            c.get("policies").forEach(p -> policies.put(p.get("name").asText(), policy(p)));
            RuntimeLimits runtime = new RuntimeLimits(t, prefix, 500);
            RateLimiter limiter = new RateLimiter(new RateLimitAsyncClient(t), runtime,
                    new RedisAvailability(t, Duration.ofMillis(100), Duration.ofMillis(500)), null, prefix,
                    Duration.ofMillis(5000), FailMode.CLOSED);
            policies.values().forEach(limiter::register);
            // No RL.RENEW while a case's permit is open: a lease of ttl 1 ms is renewed every 10 ms, and under load
            // those landed in the case's commands before they were compared (case 100 failed at load 18).
            limiter.setRenewLeases(false);
            runtime.refresh(); // the store read before the first decision
            limiter.setClustered(c.path("cluster").asBoolean(false));
            List<PolicyCall> calls = new ArrayList<>();
            for (JsonNode x : c.get("calls")) {
                calls.add(call(policies.get(x.get("policy").asText()), x));
            }
            PolicyDecision d;
            try {
                permit = limiter.acquire(calls);
                d = permit.decision();
            } catch (RateLimitRefusedException e) {
                permit = null;
                d = e.getDecision();
            }
            out.put("commands", t.sent);
            if (t.tokens.size() > 1) {
                out.put("tokens", "several lease tokens in one decision");
            }
            if (c.has("replies")) {
                out.put("decision", decision(d));
            }
            if (c.has("used") && permit != null) {
                t.settling = true;
                if (!c.get("used").isNull()) {
                    permit.used(c.get("used").asLong());
                }
                permit.close();
                out.put("settlement", t.settled);
            }
        } catch (RateLimitArgumentException e) {
            return refused(t, e.field(), e);
        } catch (NotExpressible e) {
            return refused(t, e.field, e);
        } catch (IllegalArgumentException | RateLimitConfigurationException e) {
            // A refusal naming no field (a difference); after a send: Redis (here: the case's
            // reply, read as the answer to another command) refused it.
            return t.sent.isEmpty() ? Map.of("refused", "no field: " + e) : Map.of("commands", t.sent, "error", e.getMessage());
        }
        return out;
    }

    // A refusal counts only before anything was sent (README: never after).
    private static Map<String, Object> refused(Recording t, String field, RuntimeException e) {
        return t.sent.isEmpty() ? Map.of("refused", Map.of("field", field)) : Map.of("commands", t.sent, "error", e.toString());
    }

    private static Map<String, Object> decision(PolicyDecision d) {
        Map<String, Object> out = new LinkedHashMap<>();
        boolean limited = !d.admitted();
        out.put("limited", limited);
        out.put("binding", d.bindingLimit().name());
        out.put("problem", !limited ? null : switch (d.kind()) {
            case DUPLICATE -> "duplicate";
            case LOCKED -> "locked";
            default -> "rate-limited";
        });
        out.put("retry_after_ms", !limited || d.retryAfterMs() < 0 ? null : d.retryAfterMs());
        Map<String, String> headers = new LinkedHashMap<>();
        List<String> policy = new ArrayList<>();
        List<String> state = new ArrayList<>();
        for (LimitState s : d.limits()) {
            policy.add("\"" + s.name() + "\";q=" + s.q() + (s.w() >= 0 ? ";w=" + s.w() : ""));
            state.add("\"" + s.name() + "\";r=" + s.r() + ";t=" + s.t());
        }
        headers.put("RateLimit-Policy", String.join(", ", policy));
        headers.put("RateLimit", String.join(", ", state));
        if (limited && d.retryAfterMs() >= 0) {
            headers.put("Retry-After", Long.toString((d.retryAfterMs() + 999) / 1000));
        }
        out.put("headers", headers);
        return out;
    }

    private static Map<String, Object> expected(JsonNode e) {
        if (e.has("refused")) {
            return Map.of("refused", Map.of("field", e.get("refused").get("field").asText()));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("commands", lists(e.get("commands")));
        if (e.has("decision")) {
            JsonNode d = e.get("decision");
            Map<String, Object> dec = new LinkedHashMap<>();
            dec.put("limited", d.get("limited").asBoolean());
            dec.put("binding", d.get("binding").asText());
            dec.put("problem", d.get("problem").isNull() ? null : d.get("problem").asText());
            dec.put("retry_after_ms", d.get("retry_after_ms").isNull() ? null : d.get("retry_after_ms").asLong());
            Map<String, String> headers = new LinkedHashMap<>();
            d.get("headers").fields().forEachRemaining(h -> headers.put(h.getKey(), h.getValue().asText()));
            dec.put("headers", headers);
            out.put("decision", dec);
        }
        if (e.has("settlement")) {
            out.put("settlement", lists(e.get("settlement")));
        }
        return out;
    }

    private static List<List<String>> lists(JsonNode n) {
        List<List<String>> out = new ArrayList<>();
        n.forEach(cmd -> {
            List<String> argv = new ArrayList<>();
            cmd.forEach(a -> argv.add(a.asText()));
            out.add(argv);
        });
        return out;
    }
}
