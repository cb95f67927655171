package dev.redisratelimit.spring.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.redisratelimit.client.RuntimeLimits;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * One HTTP contract for both web stacks (as Spring Boot's own servlet and
 * reactive web-server test pairs): {@code @RateLimited} endpoints over real
 * HTTP against a real redis-server with the module — limits, keys, headers,
 * problem bodies, leases and estimates. The MVC test ({@code StarterHttpTest},
 * TestApp) and the WebFlux test ({@code WebFluxHttpTest}, ReactiveTestApp)
 * each run every test here through a small subclass that starts its app; both
 * apps declare the same endpoints and policies, so neither stack can drop a
 * check silently. Each subclass adds what only its stack has.
 */
public abstract class AnnotationHttpContract {

    /** This test class's key prefix (its own counters in the shared redis-server). */
    protected abstract String prefix();

    @LocalServerPort
    protected int port;

    @Autowired
    protected RuntimeLimits runtimeLimits;

    protected Http http() {
        return new Http(port);
    }

    protected static String key() {
        return UUID.randomUUID().toString().substring(0, 12);
    }

    // The remaining count of one named item in a RateLimit header.
    protected static long remaining(HttpResponse<?> r, String item) {
        Matcher m = Pattern.compile("\"" + item + "\";r=(\\d+)").matcher(r.headers().firstValue("RateLimit").orElseThrow());
        assertThat(m.find()).isTrue();
        return Long.parseLong(m.group(1));
    }

    // The units held on a key (a sorted set, one member per unit: SPEC, RL.CHECK and RL.LEASE).
    protected long held(String policyAndKey) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("ZCARD", prefix() + policyAndKey).trim());
    }

    @Test
    void fiftyCallsAtOnceOnOneKeyAdmitExactlyTheLimit() throws Exception {
        String k = key();
        ExecutorService pool = Executors.newFixedThreadPool(50);
        CountDownLatch go = new CountDownLatch(1);
        List<Future<HttpResponse<String>>> out = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            out.add(pool.submit(() -> {
                go.await();
                return http().get("/one", "X-Key", k);
            }));
        }
        go.countDown();
        int ok = 0;
        int refused = 0;
        for (Future<HttpResponse<String>> f : out) {
            HttpResponse<String> r = f.get();
            if (r.statusCode() == 200) {
                ok++;
            } else {
                assertThat(r.statusCode()).isEqualTo(429);
                assertThat(r.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
                assertThat(r.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/rate-limited\"").contains("\"status\":429")
                        .contains("\"title\":\"Too Many Requests\"");
                assertThat(Long.parseLong(r.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 60L);
                refused++;
            }
        }
        pool.shutdown();
        assertThat(ok).isEqualTo(10);
        assertThat(refused).isEqualTo(40);
        // refusals charged nothing: the set holds exactly the 10 admissions
        assertThat(held("one:{" + k + "}:per-key")).isEqualTo(10);
    }

    @Test
    void headersCarryEveryNamedLimitAndRefusalsChargeNothing() {
        assumeTrue(SharedRedis.details(), "the loaded module has no RL.ALL DETAILS yet");
        String k = key();
        HttpResponse<String> r1 = http().get("/two", "X-Key", k);
        assertThat(r1.statusCode()).isEqualTo(200);
        assertThat(r1.headers().firstValue("RateLimit-Policy")).hasValue("\"short\";q=2;w=10, \"long\";q=5;w=3600");
        assertThat(r1.headers().firstValue("RateLimit")).hasValue("\"short\";r=1;t=10, \"long\";r=4;t=3600");
        assertThat(r1.headers().firstValue("X-RateLimit-Limit")).hasValue("2");
        assertThat(r1.headers().firstValue("X-RateLimit-Remaining")).hasValue("1");
        assertThat(http().get("/two", "X-Key", k).statusCode()).isEqualTo(200);
        String state = null;
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> refused = http().get("/two", "X-Key", k);
            assertThat(refused.statusCode()).isEqualTo(429);
            assertThat(refused.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
            assertThat(refused.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/rate-limited\"").contains("\"status\":429")
                    .contains("'short'");
            assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 10L);
            assertThat(refused.headers().firstValue("RateLimit").orElseThrow()).matches("\"short\";r=0;t=\\d+, \"long\";r=2;t=\\d+"); // a refusal shows each rule's peek at its cost
            if (state != null) { // the refusals charged nothing: every one sees the same state
                assertThat(refused.headers().firstValue("RateLimit").orElseThrow().replaceAll(";t=\\d+", "")).isEqualTo(state);
            }
            state = refused.headers().firstValue("RateLimit").orElseThrow().replaceAll(";t=\\d+", "");
        }
        // another caller still gets 200
        assertThat(http().get("/two", "X-Key", key()).statusCode()).isEqualTo(200);
    }

    @Test
    void aClassLevelPolicyCoversEveryMethodOfTheClass() {
        int ok = 0;
        for (int i = 0; i < 6; i++) {
            ok += http().get(i % 2 == 0 ? "/cls/a" : "/cls/b", "X-Forwarded-For", "192.0.2." + i).statusCode() == 200 ? 1 : 0;
        }
        assertThat(ok).isEqualTo(3);
    }

    @Test
    void aGlobalLimitBesidePerKeyLimitsIsOneCounterForEveryKey() throws Exception {
        for (int i = 0; i < 3; i++) {
            assertThat(http().get("/mixed", "X-Key", key()).statusCode()).isEqualTo(200);
        }
        HttpResponse<String> r = http().get("/mixed", "X-Key", key());
        assertThat(r.statusCode()).isEqualTo(429);
        assertThat(r.headers().firstValue("RateLimit").orElseThrow()).startsWith("\"per\";r=4;t=60, \"all\";r=0;");
        // one global counter under the policy's own hash tag
        assertThat(held("mixed:{mixed}:all")).isEqualTo(3);
    }

    @Test
    void aQuotaOfZeroRefusesWithoutRetryAfter() {
        HttpResponse<String> r = http().get("/off");
        assertThat(r.statusCode()).isEqualTo(429);
        assertThat(r.headers().firstValue("Retry-After")).isEmpty();
        assertThat(r.body()).contains("waiting will not help");
    }

    @Test
    void tokenBucketAdmitsItsBurst() {
        String k = key();
        int ok = 0;
        for (int i = 0; i < 6; i++) {
            if (http().get("/bucket", "X-Key", k).statusCode() == 200) {
                ok++;
            }
        }
        assertThat(ok).isEqualTo(3);
        assertThat(http().get("/bucket", "X-Key", key()).statusCode()).isEqualTo(200); // another caller's bucket is full
    }

    @Test
    void lockoutCountsThenLocksAndAnotherCallerStillGets200() {
        String ip = "203.0.113." + (1 + (int) (Math.random() * 200));
        assertThat(http().get("/login", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        assertThat(http().get("/login", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        HttpResponse<String> locked = http().get("/login", "X-Forwarded-For", ip);
        assertThat(locked.statusCode()).isEqualTo(429);
        assertThat(locked.body()).contains("/problems/locked");
        assertThat(locked.headers().firstValue("Retry-After")).hasValue("30");
        assertThat(locked.headers().firstValue("RateLimit")).hasValue("\"login\";r=0;t=30");
        assertThat(http().get("/login", "X-Forwarded-For", ip).statusCode()).isEqualTo(429);
        // another client is not locked
        assertThat(http().get("/login", "X-Forwarded-For", ip + "1").statusCode()).isEqualTo(200);
    }

    @Test
    void leasesReleasedAndEstimatesSettledOnSuccessAndRefundedOnError() throws Exception {
        String k = key();
        assertThat(http().post("/work?estimate=100&used=30", "{}", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().post("/work?estimate=100&used=130", "{}", "X-Key", k).statusCode()).isEqualTo(200);
        for (int i = 0; i < 3; i++) { // two leases, three failing calls: each released its lease, refunded its estimate
            assertThat(http().post("/work?estimate=100&used=50&fail=true", "{}", "X-Key", k).statusCode()).isEqualTo(500);
        }
        assertThat(held("work:{" + k + "}:inflight")).isZero();
        assertThat(quotaRemaining("work:{" + k + "}:tokens")).isEqualTo(1000 - 160);
        HttpResponse<String> next = http().post("/work?estimate=10&used=10", "{}", "X-Key", k);
        assertThat(remaining(next, "tokens")).isEqualTo(1000 - 160 - 10); // the day counts what was used: 30 + 130 + 0 + 0 + 0
        assertThat(http().post("/work?estimate=1&used=1", "{}", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(quotaRemaining("work:{" + k + "}:tokens")).isEqualTo(1000 - 160 - 10 - 1);
    }

    protected long quotaRemaining(String policyAndKey) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("RL.QUOTAPEEK", prefix() + policyAndKey, "*", "UTC", "DAY", "1000", "COST", "0")
                .split("\n")[3].trim());
    }

    @Test
    void aConcurrencyLimitHoldsWhileCallsRunAndIsReleasedAfter() throws Exception {
        String k = key();
        String lease = "work:{" + k + "}:inflight";
        CompletableFuture<HttpResponse<String>> a = CompletableFuture.supplyAsync(
                () -> http().post("/work?estimate=1&used=1&delayMs=3000", "{}", "X-Key", k));
        CompletableFuture<HttpResponse<String>> b = CompletableFuture.supplyAsync(
                () -> http().post("/work?estimate=1&used=1&delayMs=3000", "{}", "X-Key", k));
        long t0 = System.nanoTime();
        while (held(lease) < 2 && (System.nanoTime() - t0) / 1_000_000 < 10_000) { // both admitted, however slow the machine
            Thread.sleep(20);
        }
        assertThat(held(lease)).isEqualTo(2);
        HttpResponse<String> third = http().post("/work?estimate=1&used=1", "{}", "X-Key", k);
        assertThat(third.statusCode()).isEqualTo(429);
        assertThat(third.body()).contains("'inflight'");
        assertThat(third.headers().firstValue("Retry-After")).hasValue("1"); // ratelimit.concurrency-retry-after, not the lease TTL
        assertThat(http().post("/work?estimate=1&used=1", "{}", "X-Key", key()).statusCode()).isEqualTo(200); // another caller
        assertThat(a.get().statusCode()).isEqualTo(200);
        assertThat(b.get().statusCode()).isEqualTo(200);
        // Released just after the answer, not before it (CLIENTS.md §4: closing never delays the response):
        // at load 27 the check right after the answers once saw a lease still held.
        long released = System.nanoTime();
        while (held(lease) != 0 && (System.nanoTime() - released) / 1_000_000 < 2_000) {
            Thread.sleep(10);
        }
        assertThat(held(lease)).isZero();
        assertThat(http().post("/work?estimate=1&used=1", "{}", "X-Key", k).statusCode()).isEqualTo(200);
    }

    @Test
    void keyedByClientIpAndUser() {
        String ip = "198.51.100." + (1 + (int) (Math.random() * 200));
        HttpResponse<String> a = http().get("/ip", "X-Forwarded-For", "203.0.113.9, " + ip);
        HttpResponse<String> b = http().get("/ip", "X-Forwarded-For", ip);
        assertThat(remaining(b, "per-ip")).isEqualTo(remaining(a, "per-ip") - 1); // the right-most address is the key

        String user = key();
        assertThat(http().get("/user", "X-User", user).statusCode()).isEqualTo(200);
        assertThat(http().get("/user", "X-User", user).statusCode()).isEqualTo(429);
        assertThat(http().get("/user", "X-User", user + "2").statusCode()).isEqualTo(200); // another caller still gets 200
        HttpResponse<String> anonymous = http().get("/user"); // a missing identity: 401 (CLIENTS.md §5)
        assertThat(anonymous.statusCode()).isEqualTo(401);
        assertThat(anonymous.body()).contains("/problems/unauthorized");
    }

    @Test
    void anAnnotationKeyedByUserAnswers401WhenTheRequestNamesNone() {
        // CLIENTS.md §5: a missing identity is 401, not a misconfiguration (500); an empty header names no one either
        for (HttpResponse<String> r : List.of(http().get("/ocr"), http().get("/ocr", "X-User", ""))) {
            assertThat(r.statusCode()).isEqualTo(401);
            assertThat(r.body()).contains("/problems/unauthorized");
        }
    }

    @Test
    void duplicateBodiesRefusedFromTheDigestOfTheBytesRead() {
        String k = key();
        assertThat(http().post("/once", "{\"a\":1}", "X-Key", k).statusCode()).isEqualTo(200);
        HttpResponse<String> again = http().post("/once", "{\"a\":1}", "X-Key", k);
        assertThat(again.statusCode()).isEqualTo(429);
        assertThat(again.body()).contains("/problems/duplicate");
        assertThat(http().post("/once", "{\"a\":2}", "X-Key", k).statusCode()).isEqualTo(200);
    }

    @Test
    void aKeyThatEvaluatesToNullIsABadRequestNotAnUnlimitedCall() {
        // the request lacks what the key expression reads: its mistake (400, as a route answers it), not the app's
        HttpResponse<String> r = http().get("/nullkey");
        assertThat(r.statusCode()).isEqualTo(400);
        assertThat(r.body()).contains("/problems/bad-request").contains("evaluated to null");
    }

    @Test
    void aRefusalsRateLimitShowsWhatIsLeftNotWhatTheRefusedCostWouldLeave() {
        // SERVICES.md / CLIENTS.md §5: a refused rule's own peek at the request's cost — a refusal writes
        // nothing, so 2 left stay r=2 (golden cases d-window-refuse-cost-left, d-windows-refuse-cost-left)
        String k = key();
        HttpResponse<String> taken = http().get("/costly", "X-Key", k, "X-Cost", "8");
        assertThat(taken.statusCode()).isEqualTo(200);
        assertThat(remaining(taken, "w")).isEqualTo(2);
        HttpResponse<String> refused = http().get("/costly", "X-Key", k, "X-Cost", "3");
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(remaining(refused, "w")).isEqualTo(2);
        assertThat(http().get("/costly", "X-Key", k, "X-Cost", "2").statusCode()).isEqualTo(200); // and 2 do pass
    }

    @Test
    void aClientChosenCostThePolicyCannotTakeIs400NeverA500() {
        // CLIENTS.md §5: 0, negative, above the window's 10, not an integer, beyond a long, missing
        String k = key();
        for (String cost : List.of("0", "-5", "20000", "abc", "1.5", "100000000000000000000")) {
            HttpResponse<String> r = http().get("/costly", "X-Key", k, "X-Cost", cost);
            assertThat(r.statusCode()).as("cost " + cost).isEqualTo(400);
            assertThat(r.body()).as("cost " + cost).contains("/problems/bad-request").contains("cost");
        }
        HttpResponse<String> none = http().get("/costly", "X-Key", k);
        assertThat(none.statusCode()).isEqualTo(400);
        assertThat(none.body()).contains("/problems/bad-request");
        HttpResponse<String> ok = http().get("/costly", "X-Key", k, "X-Cost", "3");
        assertThat(ok.statusCode()).isEqualTo(200);
        assertThat(remaining(ok, "w")).isEqualTo(7); // the refused ones charged nothing
    }

    @Test
    void limitsChangedAtRunTimeApplyToExistingCounts() throws Exception {
        String user = key();
        for (int i = 0; i < 3; i++) {
            assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(200);
        }
        try {
            runtimeLimits.set("ocr", Map.of("hour", 3L));
            assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(429); // lowered below the count: refused at once
            runtimeLimits.set("ocr", Map.of("hour", 5L));
            assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(200); // nothing was reset: 4th of 5
            assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(200);
            assertThat(http().get("/ocr", "X-User", user).statusCode()).isEqualTo(429);
            assertThat(runtimeLimits.get("ocr")).isEqualTo(Map.of("day", 20L, "hour", 5L));
            runtimeLimits.set("ocr", Map.of("day", 0L));
            HttpResponse<String> off = http().get("/ocr", "X-User", key());
            assertThat(off.statusCode()).isEqualTo(429);
            assertThat(off.headers().firstValue("Retry-After")).isEmpty();
        } finally {
            runtimeLimits.set("ocr", Map.of("day", 20L, "hour", 5L));
        }
    }
    // How many times Redis has run a command (INFO commandstats), e.g. "rl.all".
    protected static long calls(String command) throws Exception {
        Matcher m = Pattern.compile("cmdstat_" + Pattern.quote(command) + ":calls=(\\d+)").matcher(SharedRedis.get().cli("INFO", "commandstats"));
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }

    @Test
    void twoRateLimitedOnOneMethodAreOneDecisionInOneRedisCall() throws Exception {
        assumeTrue(SharedRedis.details(), "the loaded module has no RL.ALL DETAILS yet");
        String a = key();
        long all = calls("rl.all");
        long check = calls("rl.check");
        HttpResponse<String> first = http().get("/pair", "X-Key", a);
        assertThat(first.statusCode()).isEqualTo(200);
        // one RL.ALL over both policies' windows, not one RL.CHECK each
        assertThat(calls("rl.all") - all).isEqualTo(1);
        assertThat(calls("rl.check") - check).isZero();
        assertThat(first.headers().firstValue("RateLimit-Policy")).hasValue("\"per-key\";q=3;w=10, \"everyone\";q=5;w=3600");
        assertThat(first.headers().firstValue("RateLimit")).hasValue("\"per-key\";r=2;t=10, \"everyone\";r=4;t=3600");
        assertThat(http().get("/pair", "X-Key", a).statusCode()).isEqualTo(200);
        assertThat(http().get("/pair", "X-Key", a).statusCode()).isEqualTo(200);
        // the first policy refuses: its Retry-After (10 s window), the global budget not charged
        HttpResponse<String> byKey = http().get("/pair", "X-Key", a);
        assertThat(byKey.statusCode()).isEqualTo(429);
        assertThat(byKey.body()).contains("Rate limit 'per-key' exceeded");
        assertThat(Long.parseLong(byKey.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 10L);
        // each item as a refusal shows it: its peek at the call's cost (3 of 5 taken, one more would leave 1)
        assertThat(byKey.headers().firstValue("RateLimit").orElseThrow()).matches("\"per-key\";r=0;t=\\d+, \"everyone\";r=1;t=\\d+");
        assertThat(held("pair-all:{global}:everyone")).isEqualTo(3);
        String b = key();
        assertThat(http().get("/pair", "X-Key", b).statusCode()).isEqualTo(200);
        assertThat(http().get("/pair", "X-Key", b).statusCode()).isEqualTo(200);
        // the second policy refuses a caller the first admits: refused, Retry-After from the hour's window, nothing charged
        String c = key();
        HttpResponse<String> byAll = http().get("/pair", "X-Key", c);
        assertThat(byAll.statusCode()).isEqualTo(429);
        assertThat(byAll.body()).contains("Rate limit 'everyone' exceeded");
        assertThat(Long.parseLong(byAll.headers().firstValue("Retry-After").orElseThrow())).isBetween(11L, 3600L);
        assertThat(byAll.headers().firstValue("RateLimit").orElseThrow()).matches("\"per-key\";r=2;t=\\d+, \"everyone\";r=0;t=\\d+");
        assertThat(held("pair-key:{" + c + "}:per-key")).isZero();
        assertThat(held("pair-all:{global}:everyone")).isEqualTo(5);
    }

    @Test
    void twoRateLimitedEachSettleTheirEstimatesAndBothAreRefundedOnFailure() throws Exception {
        String k = key();
        // pw-key charges the estimate and settles to used; pw-all charges twice the estimate and settles to twice used
        assertThat(http().post("/pair/work?estimate=100&used=30", "{}", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(quotaRemaining("pw-key:{" + k + "}:tokens")).isEqualTo(1000 - 30);
        assertThat(quotaRemaining("pw-all:{" + k + "}:all-tokens", 100_000)).isEqualTo(100_000 - 60);
        for (int i = 0; i < 3; i++) { // two leases, three failing calls: each released its lease, both estimates refunded
            assertThat(http().post("/pair/work?estimate=100&used=50&fail=true", "{}", "X-Key", k).statusCode()).isEqualTo(500);
        }
        assertThat(held("pw-key:{" + k + "}:inflight")).isZero();
        assertThat(quotaRemaining("pw-key:{" + k + "}:tokens")).isEqualTo(1000 - 30);
        assertThat(quotaRemaining("pw-all:{" + k + "}:all-tokens", 100_000)).isEqualTo(100_000 - 60);
    }

    protected long quotaRemaining(String policyAndKey, long limit) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("RL.QUOTAPEEK", prefix() + policyAndKey, "*", "UTC", "DAY", Long.toString(limit), "COST", "0")
                .split("\n")[3].trim());
    }
}
