package dev.redisratelimit.spring.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.net.http.HttpResponse;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * {@code ratelimit.routes} (profile "routes", application-routes.yml) over
 * real HTTP, the same for both web stacks: the MVC {@code RoutesHttpTest}
 * and the WebFlux {@code WebFluxRoutesTest} run every test here through a
 * small subclass that starts its app (each app has the routes' handlers) and
 * add what only their stack has.
 */
public abstract class RoutesContract {

    /** This test class's key prefix. */
    protected abstract String prefix();

    @LocalServerPort
    protected int port;

    protected Http http() {
        return new Http(port);
    }

    protected static String key() {
        return UUID.randomUUID().toString().substring(0, 12);
    }

    // How many times Redis ran a command ("rl.all", "rl.check", ...), from INFO commandstats.
    protected static long calls(String command) throws Exception {
        String stat = "cmdstat_" + command + ":calls=";
        for (String line : SharedRedis.get().cli("INFO", "commandstats").split("\n")) {
            if (line.startsWith(stat)) {
                return Long.parseLong(line.substring(stat.length()).split(",")[0].trim());
            }
        }
        return 0;
    }

    protected long zcard(String key) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("ZCARD", prefix() + key).trim());
    }

    protected long leaseRemaining(String k) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("RL.LEASEPEEK", prefix() + "one-at-a-time:{" + k + "}:inflight", "*", "1", "COST", "0")
                .split("\n")[3].trim());
    }

    @Test
    void aRouteByIpLimitsAnUnannotatedHandlerWithOneCommandPerRequest() throws Exception {
        String ip = "198.51.100." + (int) (Math.random() * 250);
        long before = calls("rl.check");
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> r = http().get("/r/ip", "X-Forwarded-For", ip);
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("RateLimit-Policy")).hasValue("\"ip\";q=3;w=60");
        }
        HttpResponse<String> refused = http().get("/r/ip", "X-Forwarded-For", ip);
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(refused.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
        assertThat(refused.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/rate-limited\"").contains("'ip'");
        assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 60L);
        // one limit: its own command (RL.CHECK), one per request
        assertThat(calls("rl.check") - before).isEqualTo(4);
        assertThat(zcard("per-ip:{" + ip + "}:ip")).isEqualTo(3);
        assertThat(http().get("/r/ip", "X-Forwarded-For", ip + "1").statusCode()).isEqualTo(200); // another caller still gets 200
    }

    @Test
    void aRouteByHeaderCountsEveryPathOfItsPatternAndAnswers401WithoutTheHeader() {
        String k = key();
        assertThat(http().get("/r/key/a", "X-Api-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/key/b", "X-Api-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/key/c", "X-Api-Key", k).statusCode()).isEqualTo(429);
        assertThat(http().get("/r/key/c", "X-Api-Key", key()).statusCode()).isEqualTo(200);
        HttpResponse<String> none = http().get("/r/key/a");
        assertThat(none.statusCode()).isEqualTo(401);
        assertThat(none.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/unauthorized\"").contains("X-Api-Key");
    }

    @Test
    void aRouteByUserCountsThePrincipalThenTheUserHeader() {
        String user = key();
        assertThat(http().get("/r/user", "X-Principal", user).statusCode()).isEqualTo(200);
        // no principal: ratelimit.user-header (X-User) names the same user
        assertThat(http().get("/r/user", "X-User", user).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/user", "X-Principal", user).statusCode()).isEqualTo(429);
        assertThat(http().get("/r/user", "X-Principal", key()).statusCode()).isEqualTo(200);
        HttpResponse<String> anonymous = http().get("/r/user");
        assertThat(anonymous.statusCode()).isEqualTo(401);
        assertThat(anonymous.body()).contains("/problems/unauthorized");
    }

    @Test
    void aRouteBySpelCountsWhatTheExpressionGives() throws Exception {
        String k = key();
        assertThat(http().get("/r/tenant/acme", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/tenant/acme", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/tenant/acme", "X-Key", k).statusCode()).isEqualTo(429);
        assertThat(http().get("/r/tenant/globex", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(zcard("per-tenant:{acme:" + k + "}:tenant")).isEqualTo(2);
    }

    @Test
    void aRouteWithMethodsLeavesOtherMethodsAlone() {
        String k = key();
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> r = http().get("/r/items", "X-Key", k);
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("RateLimit")).isEmpty();
        }
        assertThat(http().post("/r/items", "{}", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().post("/r/items", "{}", "X-Key", k).statusCode()).isEqualTo(429);
    }

    @Test
    void theLeaseIsReleasedWhenTheHandlerFails() throws Exception {
        String k = key();
        for (int i = 0; i < 3; i++) {
            assertThat(http().get("/r/boom", "X-Key", k).statusCode()).isEqualTo(500); // admitted each time: released after each
            // settled just after the answer, without the answer waiting for it (CLIENTS.md §3)
            long deadline = System.currentTimeMillis() + 1000;
            while (leaseRemaining(k) != 1 && System.currentTimeMillis() < deadline) {
                Thread.sleep(5);
            }
        }
        assertThat(http().get("/r/boom?fail=false", "X-Key", k).statusCode()).isEqualTo(200);
        long deadline = System.currentTimeMillis() + 1000;
        while (leaseRemaining(k) != 1 && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        assertThat(leaseRemaining(k)).isEqualTo(1);
    }

    @Test
    void aRouteAndAnAnnotationDecideInOneRlAllAndTheTighterLimitBinds() throws Exception {
        String k = key();
        long before = calls("rl.all");
        HttpResponse<String> first = http().get("/r/both/1", "X-Key", k);
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(http().get("/r/both/2", "X-Key", k).statusCode()).isEqualTo(200);
        HttpResponse<String> third = http().get("/r/both/3", "X-Key", k);
        assertThat(third.statusCode()).isEqualTo(429);
        assertThat(third.body()).contains("Rate limit 'route' exceeded");
        // one RL.ALL per request, route and annotation together
        assertThat(calls("rl.all") - before).isEqualTo(3);
        // nothing written by the refusal: both counters hold the two admissions
        assertThat(zcard("both-route:{" + k + "}:route")).isEqualTo(2);
        assertThat(zcard("both-method:{" + k + "}:method")).isEqualTo(2);
        assumeTrue(SharedRedis.details(), "the loaded module has no RL.ALL DETAILS yet");
        assertThat(first.headers().firstValue("RateLimit-Policy")).hasValue("\"route\";q=2;w=60, \"method\";q=4;w=60");
        assertThat(first.headers().firstValue("RateLimit")).hasValue("\"route\";r=1;t=60, \"method\";r=3;t=60");
        assertThat(third.headers().firstValue("RateLimit")).hasValueSatisfying(v -> assertThat(v).matches("\"route\";r=0;t=\\d+, \"method\";r=1;t=\\d+"));
    }

    @Test
    void aRouteOverAFunctionalEndpointAnswersTheSameProblems() throws Exception {
        // a RouterFunction bean (no controller method) on either stack: MVC's handler interceptor and WebFlux's
        // route WebFilter run before any handler, functional or annotated
        String k = key();
        HttpResponse<String> ok = http().get("/r/fn", "X-Key", k);
        assertThat(ok.statusCode()).isEqualTo(200);
        assertThat(ok.headers().firstValue("RateLimit-Policy")).hasValue("\"fn\";q=1;w=60");
        HttpResponse<String> refused = http().get("/r/fn", "X-Key", k);
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(refused.headers().firstValue("Content-Type")).hasValueSatisfying(v -> assertThat(v).startsWith("application/problem+json"));
        assertThat(refused.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/rate-limited\"").contains("'fn'");
        assertThat(Long.parseLong(refused.headers().firstValue("Retry-After").orElseThrow())).isBetween(1L, 60L);
        HttpResponse<String> none = http().get("/r/fn");
        assertThat(none.statusCode()).isEqualTo(401);
        assertThat(none.body()).contains("/problems/unauthorized");
    }

    // ratelimit.exempt (application-routes.yml: 192.0.2.0/24, 2001:db8::/32, key "internal"): an exempt IP or key is
    // decided by nobody — routes and @RateLimited alike: 200s beyond every limit, no RateLimit headers, no key in Redis.
    @Test
    void exemptCallersAreDecidedByNobodyWhileOthersAreStillLimited() throws Exception {
        String ip = "192.0.2." + (1 + (int) (Math.random() * 250));
        for (int i = 0; i < 4; i++) {
            List<HttpResponse<String>> answers = List.of(
                    http().get("/r/ip", "X-Forwarded-For", ip), // a route by IP (3 a minute)
                    http().get("/r/ip", "X-Forwarded-For", "2001:db8::7"), // an IPv6 address in its range
                    http().get("/ip", "X-Forwarded-For", ip), // @RateLimited by IP, no route
                    http().get("/r/key/a", "X-Api-Key", "internal"), // a route by key (2 a minute)
                    http().get("/r/both/a", "X-Key", "internal"), // a route and the handler's own @RateLimited
                    http().get("/user", "X-User", "internal")); // @RateLimited by user (1 a minute), no route
            for (HttpResponse<String> r : answers) {
                assertThat(r.statusCode()).as(r.uri().getPath()).isEqualTo(200);
                assertThat(r.headers().map().keySet()).as(r.uri().getPath())
                        .noneMatch(h -> h.toLowerCase(java.util.Locale.ROOT).startsWith("ratelimit"));
            }
        }
        for (String written : List.of("*" + ip + "*", "*2001:db8*", "*internal*")) {
            assertThat(SharedRedis.get().cli("KEYS", prefix() + written)).as(written).isEmpty();
        }
        // Another caller is still limited: an IP just outside the range, a key that is not the exempt one.
        String other = "192.0.3." + (1 + (int) (Math.random() * 250));
        String k = "internal-" + key();
        for (int i = 0; i < 3; i++) {
            assertThat(http().get("/r/ip", "X-Forwarded-For", other).statusCode()).isEqualTo(200);
        }
        assertThat(http().get("/r/ip", "X-Forwarded-For", other).statusCode()).isEqualTo(429);
        assertThat(http().get("/r/key/a", "X-Api-Key", k).headers().firstValue("RateLimit-Policy")).isPresent();
        assertThat(http().get("/r/key/a", "X-Api-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/key/a", "X-Api-Key", k).statusCode()).isEqualTo(429);
    }
}
