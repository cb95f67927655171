package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.Http;
import dev.redisratelimit.spring.test.RedisCluster;
import dev.redisratelimit.spring.test.RedisServer;
import java.net.http.HttpResponse;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.data.redis.connection.ClusterSlotHashUtil;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * SERVICES.md "Part of a Cluster down" over HTTP (Spring MVC): with one
 * primary of three killed, requests whose keys the live primaries serve are
 * still decided by Redis (200, then 429, with their headers) within the
 * budget; those on the dead primary get the Redis-down answer (503, the
 * endpoint fails closed) — never a 500, and not every endpoint (the circuit
 * is per node, CLIENTS.md §3).
 */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class ClusterPartDownTest {

    static RedisCluster cluster;

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) throws Exception {
        cluster = RedisCluster.startPartialCoverage();
        r.add("spring.data.redis.cluster.nodes", () -> cluster.seeds());
        r.add("ratelimit.on-redis-down", () -> "FAIL_CLOSED");
    }

    @AfterAll
    static void stop() throws InterruptedException {
        if (cluster != null) {
            cluster.close();
        }
    }

    @LocalServerPort
    int port;

    // A key of policy "one" (keys one:{<key>}:per-key) in a slot the node `node` serves.
    static String keyOn(RedisServer node) throws Exception {
        String nodes = cluster.nodes.get(0).cli("CLUSTER", "NODES");
        while (true) {
            String k = UUID.randomUUID().toString().substring(0, 12);
            if (ownerPort(nodes, ClusterSlotHashUtil.calculateSlot(k)) == node.port) {
                return k;
            }
        }
    }

    // The port of the primary serving `slot`, from CLUSTER NODES (id host:port@bus flags ... slot ranges).
    static int ownerPort(String clusterNodes, int slot) {
        for (String line : clusterNodes.split("\n")) {
            String[] f = line.trim().split(" ");
            if (f.length < 9 || !f[2].contains("master")) {
                continue;
            }
            int port = Integer.parseInt(f[1].substring(f[1].indexOf(':') + 1, f[1].indexOf('@')));
            for (int i = 8; i < f.length; i++) {
                String[] range = f[i].split("-");
                int lo = Integer.parseInt(range[0]);
                int hi = range.length > 1 ? Integer.parseInt(range[1]) : lo;
                if (slot >= lo && slot <= hi) {
                    return port;
                }
            }
        }
        return -1;
    }

    @Test
    void onlyTheDeadPrimarysKeysGetTheRedisDownAnswer() throws Exception {
        Http http = new Http(port);
        RedisServer dead = cluster.nodes.get(2);
        String deadKey = keyOn(dead);
        String liveKey = keyOn(cluster.nodes.get(0));
        String otherLive = keyOn(cluster.nodes.get(1));
        assertThat(http.get("/one", "X-Key", deadKey).statusCode()).isEqualTo(200);
        dead.stop();

        // For 3 s: the live keys decided by Redis (headers, the count going down), the dead one's 503; never 500.
        long until = System.nanoTime() + 3_000_000_000L;
        int liveCalls = 0;
        int dead503 = 0;
        while (System.nanoTime() < until || liveCalls < 6) {
            for (String k : new String[] {liveKey, otherLive}) {
                long t0 = System.nanoTime();
                HttpResponse<String> r = http.get("/one", "X-Key", k);
                if (liveCalls < 20) {
                    assertThat(r.statusCode()).as("live key, call " + liveCalls).isIn(200, 429);
                    assertThat(r.headers().firstValue("RateLimit")).isPresent();
                }
                assertThat((System.nanoTime() - t0) / 1_000_000).as("within the budget").isLessThan(2_000);
            }
            liveCalls++;
            HttpResponse<String> d = http.get("/one", "X-Key", deadKey);
            assertThat(d.statusCode()).as("the dead primary's key").isEqualTo(503);
            assertThat(d.body()).contains("/problems/unavailable");
            dead503++;
            Thread.sleep(50);
        }
        // /one admits 10 per minute per key: a live key reaches its limit, decided by Redis to the end
        HttpResponse<String> last = http.get("/one", "X-Key", liveKey);
        for (int i = 0; i < 11 && last.statusCode() == 200; i++) {
            last = http.get("/one", "X-Key", liveKey);
        }
        assertThat(last.statusCode()).isEqualTo(429);
        assertThat(last.headers().firstValue("Retry-After")).isPresent();
        assertThat(dead503).isGreaterThan(3);
    }
}
