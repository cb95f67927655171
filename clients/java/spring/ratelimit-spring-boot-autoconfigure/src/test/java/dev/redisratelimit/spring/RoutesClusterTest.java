package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.RedisCluster;
import java.net.http.HttpResponse;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.data.redis.connection.ClusterSlotHashUtil;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A route keyed by IP and a handler's @RateLimited keyed by X-Key on a
 * three-primary Cluster: their keys hash to different slots, so the starter
 * decides slot by slot and refunds the slot that admitted when the other
 * refuses — a refusal writes nothing in the end, as one RL.ALL would.
 */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ActiveProfiles("routes")
class RoutesClusterTest {

    static RedisCluster cluster;

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) throws Exception {
        cluster = RedisCluster.start();
        r.add("spring.data.redis.cluster.nodes", () -> cluster.seeds());
    }

    @AfterAll
    static void stop() throws InterruptedException {
        if (cluster != null) {
            cluster.close();
        }
    }

    @LocalServerPort
    int port;

    // A key of the handler's policy whose slot differs from the IP's (so the two policies' keys cross slots).
    static String keyOffSlotOf(String ip) {
        while (true) {
            String k = UUID.randomUUID().toString().substring(0, 12);
            if (ClusterSlotHashUtil.calculateSlot(k) != ClusterSlotHashUtil.calculateSlot(ip)) {
                return k;
            }
        }
    }

    static long zcard(String key) throws Exception {
        return Long.parseLong(cluster.nodes.get(0).cli("-c", "ZCARD", key).trim());
    }

    HttpResponse<String> get(String ip, String key) {
        return new Http(port).get("/r/mixed", "X-Forwarded-For", ip, "X-Key", key);
    }

    @Test
    void policiesOnDifferentSlotsDecideSlotBySlotAndARefusalIsRefunded() throws Exception {
        String ip = "203.0.113." + (int) (Math.random() * 250);
        String ipKey = "mixed-ip:{" + ip + "}:per-ip";
        String k1 = keyOffSlotOf(ip);
        assertThat(get(ip, k1).statusCode()).isEqualTo(200);
        HttpResponse<String> second = get(ip, k1);
        assertThat(second.statusCode()).isEqualTo(200);
        assertThat(second.headers().firstValue("RateLimit-Policy")).hasValue("\"per-ip\";q=3;w=60, \"per-key\";q=2;w=60");
        assertThat(second.headers().firstValue("RateLimit")).hasValue("\"per-ip\";r=1;t=60, \"per-key\";r=0;t=60");

        // the handler's policy refuses: the IP's slot had admitted and is refunded
        HttpResponse<String> third = get(ip, k1);
        assertThat(third.statusCode()).isEqualTo(429);
        assertThat(third.body()).contains("Rate limit 'per-key' exceeded");
        assertThat(zcard(ipKey)).isEqualTo(2);
        assertThat(zcard("mixed-method:{" + k1 + "}:per-key")).isEqualTo(2);

        // a new key: the IP's third admission
        assertThat(get(ip, keyOffSlotOf(ip)).statusCode()).isEqualTo(200);
        assertThat(zcard(ipKey)).isEqualTo(3);

        // the route refuses: the new key's slot had admitted and is refunded
        String k3 = keyOffSlotOf(ip);
        HttpResponse<String> refused = get(ip, k3);
        assertThat(refused.statusCode()).isEqualTo(429);
        assertThat(refused.body()).contains("Rate limit 'per-ip' exceeded");
        assertThat(zcard("mixed-method:{" + k3 + "}:per-key")).isEqualTo(0);
        assertThat(zcard(ipKey)).isEqualTo(3);
    }
}
