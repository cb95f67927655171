package dev.redisratelimit.example;

import static dev.redisratelimit.example.Checks.concurrently;
import static dev.redisratelimit.example.Checks.count;
import static dev.redisratelimit.example.Checks.isProblem;
import static dev.redisratelimit.example.Checks.retryAfter;
import static dev.redisratelimit.example.Checks.sms;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.RedisServer;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * SERVICES.md over HTTP against one real redis-server: two instances A and B
 * of the app on it (one service), and an instance C started later. The
 * module decides (RL_BACKEND=module); {@link FunctionsBackendServicesTest}
 * runs every check again with the Functions library on a server without it.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class StandaloneServicesTest {

    RedisServer redis;
    App a;
    App b;
    final String prefix = "ex" + UUID.randomUUID().toString().substring(0, 6) + ":";

    /** What decides: the module ({@link FunctionsBackendServicesTest}: the library). */
    Backend backend() {
        return Backend.MODULE;
    }

    @BeforeAll
    void start() throws Exception {
        redis = backend().withModule ? RedisServer.launch() : RedisServer.launchWithoutModule();
        a = App.standalone(redis.url(), prefix, backend().env);
        b = App.standalone(redis.url(), prefix, backend().env);
    }

    @AfterAll
    void stop() throws Exception {
        if (a != null) {
            a.close();
        }
        if (b != null) {
            b.close();
        }
        if (redis != null) {
            redis.close();
        }
    }

    /** Whether RL.ALL takes DETAILS (the library always does). */
    boolean details() {
        if (backend() == Backend.FUNCTIONS) {
            return true;
        }
        try {
            return !redis.cli("RL.ALLPEEK", "1", "p", "*", "CHECK", "1", "1", "1000", "COST", "0", "DETAILS").contains("ERR");
        } catch (Exception e) {
            return false;
        }
    }

    HttpResponse<String> llm(Http h, String key, String body, String... more) {
        return Checks.llm(h, backend().zone, key, body, more);
    }

    static String uniq() {
        return Long.toString(Math.abs(UUID.randomUUID().getMostSignificantBits()) % 100_000_000L);
    }

    @Test
    void health() {
        assertThat(a.http.get("/health").statusCode()).isEqualTo(200);
    }

    @Test
    void seed000TwoWindowsAndDuplicatesAcrossInstances() {
        String phone = uniq();
        String body = "{\"phone\":\"" + phone + "\"}";
        HttpResponse<String> first = sms(a.http, body);
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(first.body()).isEqualTo("{\"sent\":true}");
        // the same bytes again, on the other instance: a duplicate
        HttpResponse<String> dup = sms(b.http, body);
        isProblem(dup, 429, "duplicate");
        assertThat(retryAfter(dup)).isBetween(1L, 10L);
        // other bytes for the same phone: admitted, then the short window (2 per 10 s) refuses
        assertThat(sms(b.http, "{\"phone\": \"" + phone + "\"}").statusCode()).isEqualTo(200);
        HttpResponse<String> third = sms(a.http, "{ \"phone\":\"" + phone + "\"}");
        isProblem(third, 429, "rate-limited");
        assertThat(retryAfter(third)).isBetween(1L, 10L);
        // another phone is not affected
        assertThat(sms(a.http, "{\"phone\":\"" + uniq() + "\"}").statusCode()).isEqualTo(200);
    }

    @Test
    void seed000Headers() {
        assumeTrue(details(), "the loaded module has no RL.ALL DETAILS yet");
        String phone = uniq();
        HttpResponse<String> r = sms(a.http, "{\"phone\":\"" + phone + "\"}");
        assertThat(r.headers().firstValue("RateLimit-Policy")).hasValue("\"short\";q=2;w=10, \"long\";q=5;w=3600, \"duplicate\";q=1;w=5");
        assertThat(r.headers().firstValue("RateLimit")).hasValue("\"short\";r=1;t=10, \"long\";r=4;t=3600, \"duplicate\";r=0;t=5");
        sms(a.http, "{\"phone\": \"" + phone + "\"}");
        // a duplicate that the short window refuses too is still typed /duplicate
        isProblem(sms(a.http, "{\"phone\":\"" + phone + "\"}"), 429, "duplicate");
    }

    @Test
    void badInputIsAnsweredBeforeRedis() {
        isProblem(sms(a.http, "{\"phone\":\"12a\"}"), 400, "bad-request");
        isProblem(sms(a.http, "{\"phone\":\"123456789012345678901\"}"), 400, "bad-request");
        isProblem(sms(a.http, "{\"phone\":"), 400, "bad-request");
        isProblem(a.http.post("/seed001/ocr", "{}"), 401, "unauthorized");
        isProblem(a.http.post("/llm/complete", "{\"max_tokens\":10}", "X-Zone", "UTC"), 401, "unauthorized");
        // an identity sent empty is a missing one, as in the Python and Node apps
        isProblem(a.http.post("/llm/complete", "{\"max_tokens\":10}", "X-Zone", "UTC", "X-Api-Key", ""), 401, "unauthorized");
        isProblem(llm(a.http, "k", "{\"max_tokens\":0}"), 400, "bad-request");
        isProblem(llm(a.http, "k", "{\"max_tokens\":100001}"), 400, "bad-request");
        isProblem(llm(a.http, "k", "{\"max_tokens\":1.5}"), 400, "bad-request");
        isProblem(llm(a.http, "k", "{\"max_tokens\":\"5\"}"), 400, "bad-request");
        isProblem(llm(a.http, "k", "not json"), 400, "bad-request");
        isProblem(a.http.post("/llm/complete", "{\"max_tokens\":10}", "X-Api-Key", "k", "X-Zone", "Mars/Olympus"), 400, "bad-request");
        isProblem(a.http.post("/llm/complete", "{\"max_tokens\":10}", "X-Api-Key", "k", "X-Zone", "+08:00"), 400, "bad-request");
    }

    /** As the Python and Node apps answer (adversarial runs found Java alone differing). */
    @Test
    void inputAsTheOtherAppsReadIt() throws Exception {
        isProblem(sms(a.http, "{\"phone\":123}"), 400, "bad-request"); // a number is no string of digits
        isProblem(llm(a.http, "k", "{\"max_tokens\":1e3}"), 400, "bad-request");
        isProblem(llm(a.http, "k", "{\"max_tokens\":100.0}"), 400, "bad-request");
        isProblem(a.http.send("PUT", "/admin/limits/ocr", "{\"day\":5.0,\"hour\":5}"), 400, "bad-request");
        // the body is JSON whatever its Content-Type: not JSON is 400 (not 415), JSON is decided
        HttpClient client = HttpClient.newHttpClient();
        for (String type : new String[] {"text/plain", null}) {
            HttpRequest.Builder req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + a.port + "/seed000/sms"));
            if (type != null) {
                req.header("Content-Type", type);
            }
            isProblem(client.send(req.POST(HttpRequest.BodyPublishers.ofString("phone=1")).build(),
                    HttpResponse.BodyHandlers.ofString()), 400, "bad-request");
            HttpResponse<String> sent = client.send(req.POST(HttpRequest.BodyPublishers.ofString("{\"phone\":\"" + uniq() + "\"}"))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertThat(sent.statusCode()).as(sent.body()).isEqualTo(200);
        }
        // the fake model's knobs: above N counts as N, even beyond a long; not a number: the default
        HttpResponse<String> huge = llm(a.http, "key" + uniq(), "{\"max_tokens\":10}", "X-Sleep-Ms", "0",
                "X-Used-Tokens", "99999999999999999999999");
        assertThat(huge.statusCode()).as(huge.body()).isEqualTo(200);
        assertThat(huge.body()).isEqualTo("{\"used_tokens\":10}");
        HttpResponse<String> junk = llm(a.http, "key" + uniq(), "{\"max_tokens\":10}", "X-Sleep-Ms", "-5",
                "X-Used-Tokens", "x");
        assertThat(junk.statusCode()).as(junk.body()).isEqualTo(200);
        assertThat(junk.body()).isEqualTo("{\"used_tokens\":5}");
        assertThat(LlmComplete.headerLong("99999999999999999999999", 100)).isEqualTo(Long.MAX_VALUE);
    }

    @Test
    void seed001DayAndHourChangedAtRunTimeOnEveryInstance() throws Exception {
        String user = "u" + uniq();
        for (int i = 0; i < 5; i++) {
            assertThat((i % 2 == 0 ? a : b).http.post("/seed001/ocr", "{}", "X-User", user).statusCode()).isEqualTo(200);
        }
        HttpResponse<String> sixth = b.http.post("/seed001/ocr", "{}", "X-User", user);
        isProblem(sixth, 429, "rate-limited");
        assertThat(retryAfter(sixth)).isBetween(1L, 3600L);

        assertThat(a.http.send("PUT", "/admin/limits/ocr", "{\"day\":20,\"hour\":7}").statusCode()).isEqualTo(204);
        Thread.sleep(1000); // within 1 s of a PUT every instance applies it
        assertThat(b.http.get("/admin/limits/ocr").body()).isEqualTo("{\"day\":20,\"hour\":7}");
        assertThat(b.http.post("/seed001/ocr", "{}", "X-User", user).statusCode()).isEqualTo(200); // nothing was reset: 6th of 7
        assertThat(a.http.post("/seed001/ocr", "{}", "X-User", user).statusCode()).isEqualTo(200);
        assertThat(b.http.post("/seed001/ocr", "{}", "X-User", user).statusCode()).isEqualTo(429);

        // an instance started later uses the limits set before it started
        try (App c = App.standalone(redis.url(), prefix, backend().env)) {
            assertThat(c.http.get("/admin/limits/ocr").body()).isEqualTo("{\"day\":20,\"hour\":7}");
            String other = "u" + uniq();
            for (int i = 0; i < 7; i++) {
                assertThat(c.http.post("/seed001/ocr", "{}", "X-User", other).statusCode()).isEqualTo(200);
            }
            assertThat(c.http.post("/seed001/ocr", "{}", "X-User", other).statusCode()).isEqualTo(429);

            // lowered below the count: refused at once; 0 refuses everything, with no Retry-After
            assertThat(c.http.send("PUT", "/admin/limits/ocr", "{\"day\":0,\"hour\":7}").statusCode()).isEqualTo(204);
            Thread.sleep(1000);
            HttpResponse<String> off = a.http.post("/seed001/ocr", "{}", "X-User", "u" + uniq());
            isProblem(off, 429, "rate-limited");
            assertThat(off.headers().firstValue("Retry-After")).isEmpty();
        } finally {
            assertThat(a.http.send("PUT", "/admin/limits/ocr", "{\"day\":20,\"hour\":5}").statusCode()).isEqualTo(204);
        }
        isProblem(a.http.send("PUT", "/admin/limits/ocr", "{\"day\":-1,\"hour\":5}"), 400, "bad-request");
        isProblem(a.http.send("PUT", "/admin/limits/ocr", "{\"day\":\"x\",\"hour\":5}"), 400, "bad-request");
        isProblem(a.http.send("PUT", "/admin/limits/ocr", "{\"day\":1.5,\"hour\":5}"), 400, "bad-request");
        isProblem(a.http.send("PUT", "/admin/limits/ocr", "nope"), 400, "bad-request");
        Thread.sleep(1000);
    }

    @Test
    void seed002DefaultCustomAndUserKeys() throws Exception {
        String ip = "198.51.100." + (1 + Integer.parseInt(uniq()) % 250);
        for (int i = 0; i < 10; i++) {
            HttpResponse<String> r = (i % 2 == 0 ? a : b).http.get("/seed002/api/default", "X-Forwarded-For", ip);
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("X-RateLimit-Limit")).hasValue("10");
            assertThat(r.headers().firstValue("X-RateLimit-Remaining")).hasValue(Integer.toString(9 - i));
            assertThat(Long.parseLong(r.headers().firstValue("X-RateLimit-Reset").orElseThrow())).isBetween(1L, 60L);
            assertThat(r.headers().firstValue("RateLimit-Policy")).hasValue("\"default\";q=10;w=60");
        }
        HttpResponse<String> refused = a.http.get("/seed002/api/default", "X-Forwarded-For", "203.0.113.9, " + ip);
        isProblem(refused, 429, "rate-limited"); // the right-most non-loopback address is the client
        assertThat(refused.headers().firstValue("X-RateLimit-Remaining")).hasValue("0");
        assertThat(retryAfter(refused)).isBetween(1L, 60L);

        // 20 concurrent clients on one IP: exactly 5 admitted
        String ip2 = "192.0.2." + (1 + Integer.parseInt(uniq()) % 250);
        List<HttpResponse<String>> rs = concurrently(20, i -> (i % 2 == 0 ? a : b).http.get("/seed002/api/custom", "X-Forwarded-For", ip2));
        String answers = rs.stream().map(r -> r.statusCode() + (r.statusCode() == 429 ? "" : " " + r.body())).toList().toString();
        assertThat(count(rs, 200)).as(answers).isEqualTo(5);
        assertThat(count(rs, 429)).as(answers).isEqualTo(15);
        HttpResponse<String> custom = a.http.get("/seed002/api/custom", "X-Forwarded-For", ip2);
        assertThat(custom.headers().firstValue("RateLimit-Policy")).hasValue("\"custom\";q=5;w=30");
        assertThat(custom.headers().firstValue("X-RateLimit-Limit")).hasValue("5");

        String user = "alice" + uniq();
        for (int i = 0; i < 3; i++) {
            assertThat(a.http.get("/seed002/api/user/" + user, "X-Forwarded-For", "192.0.2." + i).statusCode()).isEqualTo(200);
        }
        HttpResponse<String> u4 = b.http.get("/seed002/api/user/" + user);
        isProblem(u4, 429, "rate-limited");
        assertThat(u4.headers().firstValue("RateLimit-Policy")).hasValue("\"user\";q=3;w=60");
        assertThat(a.http.get("/seed002/api/user/bob" + uniq()).statusCode()).isEqualTo(200);
    }

    /** The keys of SERVICES.md's policy table as CLIENTS.md §2 names them: what the Python and Node apps write too. */
    @Test
    void keysAreTheSharedWireFormat() throws Exception {
        String ip = "198.51.100." + (1 + Integer.parseInt(uniq()) % 250);
        assertThat(a.http.get("/seed002/api/default", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        assertThat(a.http.get("/seed002/api/custom", "X-Forwarded-For", ip).statusCode()).isEqualTo(200);
        String user = "u" + uniq();
        assertThat(a.http.get("/seed002/api/user/" + user).statusCode()).isEqualTo(200);
        String phone = uniq();
        assertThat(sms(a.http, "{\"phone\":\"" + phone + "\"}").statusCode()).isEqualTo(200);
        String k = "key" + uniq();
        assertThat(llm(a.http, k, "{\"max_tokens\":10}", "X-Sleep-Ms", "0").statusCode()).isEqualTo(200);
        assertThat(redis.cli("EXISTS", prefix + "api-default:{" + ip + "}:default", prefix + "api-custom:{" + ip + "}:custom",
                prefix + "api-user:{" + user + "}:user", prefix + "sms:{" + phone + "}:short", prefix + "llm:{llm}:" + k + ":rate",
                prefix + "llm:{llm}:" + k + ":tokens", prefix + "llm:{llm}:global").trim()).isEqualTo("7");
        // the two windows of sms share one clause, keyed by the first; the duplicate check is keyed by the body's digest
        assertThat(redis.cli("EXISTS", prefix + "sms:{" + phone + "}:short+long", prefix + "sms:{" + phone + "}:long").trim()).isEqualTo("0");
        assertThat(redis.cli("KEYS", prefix + "sms:{" + phone + "}:duplicate:*").trim()).matches(".*:duplicate:[0-9a-f]{32}");
    }

    @Test
    void seed004CountThenLockOut() {
        String ip = "203.0.113." + (1 + Integer.parseInt(uniq()) % 250);
        for (int i = 0; i < 5; i++) {
            HttpResponse<String> r = (i % 2 == 0 ? a : b).http.post("/seed004/login", "{}", "X-Forwarded-For", ip);
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("RateLimit-Policy")).hasValue("\"login\";q=5;w=10");
            assertThat(r.headers().firstValue("RateLimit").orElseThrow()).startsWith("\"login\";r=" + (4 - i) + ";t=");
        }
        HttpResponse<String> locked = a.http.post("/seed004/login", "{}", "X-Forwarded-For", ip);
        isProblem(locked, 429, "locked");
        assertThat(retryAfter(locked)).isEqualTo(30);
        assertThat(locked.headers().firstValue("RateLimit")).hasValue("\"login\";r=0;t=30");
        HttpResponse<String> still = b.http.post("/seed004/login", "{}", "X-Forwarded-For", ip);
        isProblem(still, 429, "locked");
        assertThat(retryAfter(still)).isBetween(29L, 30L);
        // another client IP is not locked
        assertThat(a.http.post("/seed004/login", "{}", "X-Forwarded-For", "2001:db8::" + uniq().substring(0, 4)).statusCode()).isEqualTo(200);
    }

    @Test
    void llmBucketLeaseBudgetAndGlobal() throws Exception {
        // the bucket: a burst of 10, then 1 per second. One after another (two
        // at once would meet the in-flight limit), so on a loaded machine the
        // calls can take over a second and a token come back: the admissions
        // before the first refusal are 10 plus at most one per whole second
        // from the first call sent to the refusal answered, and the first
        // call leaves 9 whatever the pace (a full bucket fills no further).
        String k = "key" + uniq();
        int ok = 0;
        long t0 = System.nanoTime();
        HttpResponse<String> first = null;
        HttpResponse<String> last = null;
        for (int i = 0; i < 60 && (last == null || last.statusCode() != 429); i++) {
            last = llm(a.http, k, "{\"max_tokens\":10}", "X-Sleep-Ms", "0");
            first = first == null ? last : first;
            ok += last.statusCode() == 200 ? 1 : 0;
        }
        long refills = (System.nanoTime() - t0) / 1_000_000_000L;
        assertThat(ok).as("admitted with %d s of refills", refills).isBetween(10, 10 + (int) refills);
        if (details()) {
            assertThat(first.headers().firstValue("RateLimit").orElseThrow()).startsWith("\"rate\";r=9;");
        }
        isProblem(last, 429, "rate-limited");
        assertThat(retryAfter(last)).isEqualTo(1);

        // in flight: at most 2; the third is refused with Retry-After 1
        String k2 = "key" + uniq();
        List<HttpResponse<String>> rs = concurrently(3, i -> llm(i % 2 == 0 ? a.http : b.http, k2, "{\"max_tokens\":10}", "X-Sleep-Ms", "1500"));
        assertThat(count(rs, 200)).isEqualTo(2);
        HttpResponse<String> refused = rs.stream().filter(r -> r.statusCode() == 429).findFirst().orElseThrow();
        assertThat(retryAfter(refused)).isEqualTo(1);
        // every lease is back: two at once pass again, also after a 500
        isProblem(llm(a.http, k2, "{\"max_tokens\":10}", "X-Sleep-Ms", "0", "X-Fail", "1"), 500, "model-failed");
        assertThat(count(concurrently(2, i -> llm(a.http, k2, "{\"max_tokens\":10}", "X-Sleep-Ms", "300")), 200)).isEqualTo(2);

        // the day's budget is settled to the tokens used: 300 used, then a failure (0), then a disconnect
        String k3 = "key" + uniq();
        HttpResponse<String> used = llm(a.http, k3, "{\"max_tokens\":1000}", "X-Sleep-Ms", "0", "X-Used-Tokens", "300");
        assertThat(used.statusCode()).isEqualTo(200);
        assertThat(used.body()).isEqualTo("{\"used_tokens\":300}");
        isProblem(llm(b.http, k3, "{\"max_tokens\":5000}", "X-Sleep-Ms", "0", "X-Fail", "1"), 500, "model-failed");
        try (Socket s = new Socket("127.0.0.1", a.port)) {
            OutputStream out = s.getOutputStream();
            String body = "{\"max_tokens\":2000}";
            out.write(("POST /llm/complete HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + k3 + "\r\nX-Zone: " + backend().zone + "\r\nX-Sleep-Ms: 400\r\n"
                    + "X-Used-Tokens: 200\r\nContent-Type: application/json\r\nContent-Length: " + body.length() + "\r\n\r\n" + body)
                    .getBytes(StandardCharsets.US_ASCII));
            out.flush();
            Thread.sleep(100);
        } // gone mid-call
        // Once the cut call is settled (to its 200: this app lets the model end) 100000 - 300 - 0 - 200 =
        // 99500 are left. Polled, not slept for X-Sleep-Ms + 500 ms: a loaded 2-core machine took longer
        // than that to run a 400 ms call. A call of 99500 that uses 0 is refused (changing nothing) while
        // the cut call's 2000 are held, admitted once it settled; then 99501 is refused and 99500 admitted:
        // exactly 99500 left. The 5 s bound only stops a call that is never settled.
        long deadline = System.nanoTime() + 5_000_000_000L;
        HttpResponse<String> settled;
        while ((settled = llm(b.http, k3, "{\"max_tokens\":99500}", "X-Sleep-Ms", "0", "X-Used-Tokens", "0")).statusCode() != 200
                && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertThat(settled.statusCode()).as("the cut call settled within 5 s").isEqualTo(200);
        HttpResponse<String> over = llm(b.http, k3, "{\"max_tokens\":99501}", "X-Sleep-Ms", "0", "X-Used-Tokens", "0");
        isProblem(over, 429, "rate-limited");
        HttpResponse<String> fits = llm(b.http, k3, "{\"max_tokens\":99500}", "X-Sleep-Ms", "0", "X-Used-Tokens", "0");
        assertThat(fits.statusCode()).isEqualTo(200);
        assertThat(count(concurrently(2, i -> llm(a.http, k3, "{\"max_tokens\":1}", "X-Sleep-Ms", "200", "X-Used-Tokens", "0")), 200))
                .isEqualTo(2);

        if (details()) {
            HttpResponse<String> r = llm(a.http, "key" + uniq(), "{\"max_tokens\":1000}", "X-Sleep-Ms", "0");
            assertThat(r.headers().firstValue("RateLimit-Policy"))
                    .hasValue("\"rate\";q=60;w=60, \"inflight\";q=2, \"tokens\";q=100000;w=86400, \"global\";q=1000;w=60");
            assertThat(r.headers().firstValue("RateLimit").orElseThrow()).contains("\"tokens\";r=99000;");
        }
    }

    @Test
    void anAppWithoutTheModuleExits() throws Exception {
        assumeTrue(backend() == Backend.MODULE, "RL_BACKEND=" + backend().env + " needs no module");
        try (RedisServer plain = RedisServer.launchWithoutModule()) {
            assertThatThrownBy(() -> App.standalone("redis://127.0.0.1:" + plain.port, "x:").close())
                    .hasStackTraceContaining("module is not loaded");
        }
    }
}
