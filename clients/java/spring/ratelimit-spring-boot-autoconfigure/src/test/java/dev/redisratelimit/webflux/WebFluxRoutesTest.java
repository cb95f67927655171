package dev.redisratelimit.webflux;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.SharedRedis;
import java.net.http.HttpResponse;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** ratelimit.routes on WebFlux (the MVC test's application-routes.yml) over real HTTP against a real redis-server. */
@SpringBootTest(classes = ReactiveTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "spring.main.web-application-type=reactive")
@ActiveProfiles("routes")
class WebFluxRoutesTest {

    static final String PREFIX = "wr" + UUID.randomUUID().toString().substring(0, 8) + ":";

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) {
        r.add("spring.data.redis.url", () -> SharedRedis.get().url());
        r.add("ratelimit.prefix", () -> PREFIX);
    }

    @LocalServerPort
    int port;

    Http http() {
        return new Http(port);
    }

    static String key() {
        return UUID.randomUUID().toString().substring(0, 12);
    }

    static long rlAllCalls() throws Exception {
        for (String line : SharedRedis.get().cli("INFO", "commandstats").split("\n")) {
            if (line.startsWith("cmdstat_rl.all:calls=")) {
                return Long.parseLong(line.substring("cmdstat_rl.all:calls=".length()).split(",")[0].trim());
            }
        }
        return 0;
    }

    static long zcard(String key) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("ZCARD", PREFIX + key).trim());
    }

    @Test
    void aRouteByIpLimitsAnUnannotatedHandlerWithOneRlAllPerRequest() throws Exception {
        String ip = "198.51.100." + (int) (Math.random() * 250);
        long before = rlAllCalls();
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
        assertThat(rlAllCalls() - before).isEqualTo(4);
        assertThat(zcard("per-ip:{" + ip + "}:ip")).isEqualTo(3);
    }

    @Test
    void byHeaderByPrincipalBySpelAndTheMethodFilter() throws Exception {
        String k = key();
        assertThat(http().get("/r/key/a", "X-Api-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/key/b", "X-Api-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/key/c", "X-Api-Key", k).statusCode()).isEqualTo(429);
        HttpResponse<String> none = http().get("/r/key/a");
        assertThat(none.statusCode()).isEqualTo(401);
        assertThat(none.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/unauthorized\"").contains("X-Api-Key");

        String user = key();
        assertThat(http().get("/r/user", "X-Principal", user).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/user", "X-User", user).statusCode()).isEqualTo(200); // the user-header when no principal
        assertThat(http().get("/r/user", "X-Principal", user).statusCode()).isEqualTo(429);
        assertThat(http().get("/r/user").statusCode()).isEqualTo(401);

        assertThat(http().get("/r/tenant/acme", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/tenant/acme", "X-Key", k).statusCode()).isEqualTo(200);
        assertThat(http().get("/r/tenant/acme", "X-Key", k).statusCode()).isEqualTo(429);
        assertThat(zcard("per-tenant:{acme:" + k + "}:tenant")).isEqualTo(2);

        for (int i = 0; i < 2; i++) {
            assertThat(http().get("/r/items", "X-Key", k).statusCode()).isEqualTo(200);
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
        long before = rlAllCalls();
        HttpResponse<String> first = http().get("/r/both/1", "X-Key", k);
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(http().get("/r/both/2", "X-Key", k).statusCode()).isEqualTo(200);
        HttpResponse<String> third = http().get("/r/both/3", "X-Key", k);
        assertThat(third.statusCode()).isEqualTo(429);
        assertThat(third.body()).contains("Rate limit 'route' exceeded");
        assertThat(rlAllCalls() - before).isEqualTo(3);
        assertThat(zcard("both-route:{" + k + "}:route")).isEqualTo(2);
        assertThat(zcard("both-method:{" + k + "}:method")).isEqualTo(2);
        assumeTrue(SharedRedis.details(), "the loaded module has no RL.ALL DETAILS yet");
        assertThat(first.headers().firstValue("RateLimit-Policy")).hasValue("\"route\";q=2;w=60, \"method\";q=4;w=60");
        assertThat(third.headers().firstValue("RateLimit")).hasValueSatisfying(v -> assertThat(v).matches("\"route\";r=0;t=\\d+, \"method\";r=1;t=\\d+"));
    }

    long leaseRemaining(String k) throws Exception {
        return Long.parseLong(SharedRedis.get().cli("RL.LEASEPEEK", PREFIX + "one-at-a-time:{" + k + "}:inflight", "*", "1", "COST", "0")
                .split("\n")[3].trim());
    }
}
