package dev.redisratelimit.it;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.redisratelimit.client.FailMode;
import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RateLimitUnavailableException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.it.support.RedisProcess;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import dev.redisratelimit.springdata.SpringDataTransport;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.data.redis.connection.RedisClusterConfiguration;
import org.springframework.data.redis.connection.jedis.JedisClientConfiguration;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * CLIENTS.md §3, "the circuit is per node": with one primary of three killed
 * (servers run with {@code cluster-require-full-coverage no}), keys served by
 * the live primaries are still decided by Redis while the dead primary's keys
 * get the Redis-down mode (here: closed, 503), at once once its circuit is
 * open; when it comes back (has rejoined: {@code cluster_state:ok}), its keys
 * are decided by Redis again within 2 s.
 * Every Java transport: plain Lettuce, and Spring Data's Lettuce and Jedis
 * drivers (what the Spring starter uses; Jedis's circuits follow its own slot
 * table, so a dead primary's failures open its circuit alone).
 */
class ClusterCircuitTest {

    static final Duration BUDGET = Duration.ofMillis(500);

    @Test
    void onePrimaryDownOnlyItsKeysGetTheRedisDownModeUntilItAnswersAgain() throws Exception {
        RedisServers.Cluster cluster = RedisServers.ownCluster(List.of("--cluster-require-full-coverage", "no"));
        List<RedisProcess> nodes = new ArrayList<>(cluster.nodes());
        // Lettuce retries a lost connection with a back-off capped at 200 ms (its default grows to 30 s; the
        // Spring starter caps it with ratelimit.max-reconnect-delay): a node back is reconnected at once.
        ClientResources resources = ClientResources.builder()
                .reconnectDelay(Delay.exponential(Duration.ofMillis(10), Duration.ofMillis(200), 2, TimeUnit.MILLISECONDS)).build();
        List<RedisURI> seeds = nodes.stream().map(n -> RedisURI.create("127.0.0.1", n.port())).toList();
        RedisClusterClient lettuce = RedisClusterClient.create(resources, seeds);
        LettuceConnectionFactory factory = new LettuceConnectionFactory(
                new RedisClusterConfiguration(nodes.stream().map(n -> "127.0.0.1:" + n.port()).toList()),
                LettuceClientConfiguration.builder().clientResources(resources).build());
        factory.afterPropertiesSet();
        factory.start();
        // Jedis blocks: its timeouts are the budget (README, "Jedis").
        JedisConnectionFactory jedis = new JedisConnectionFactory(
                new RedisClusterConfiguration(nodes.stream().map(n -> "127.0.0.1:" + n.port()).toList()),
                JedisClientConfiguration.builder().readTimeout(BUDGET).connectTimeout(BUDGET).build());
        jedis.afterPropertiesSet();
        jedis.start();
        Policy policy = Policy.builder("circuit").slidingWindow("minute", 1_000_000, Duration.ofMinutes(1)).onRedisDown(FailMode.CLOSED).build();
        LettuceTransport plain = LettuceTransport.create(lettuce);
        SpringDataTransport spring = SpringDataTransport.of(factory);
        SpringDataTransport springJedis = SpringDataTransport.of(jedis);
        List<RateLimiter> limiters = List.of(limiter(plain, policy), limiter(spring, policy), limiter(springJedis, policy));
        try {
            // A key on each primary (by the transports' own view of the slots).
            Map<Integer, String> keyOf = new LinkedHashMap<>();
            for (int i = 0; keyOf.size() < 3; i++) {
                String node = plain.nodeOf("{u" + i + "}");
                assertThat(spring.nodeOf("{u" + i + "}")).isEqualTo(node);
                assertThat(springJedis.nodeOf("{u" + i + "}")).as("Jedis's slot table").isEqualTo(node);
                keyOf.putIfAbsent(Integer.parseInt(node.substring(node.lastIndexOf(':') + 1)), "u" + i);
            }
            for (RateLimiter l : limiters) {
                for (String key : keyOf.values()) {
                    admittedByRedis(l, key);
                }
            }
            RedisProcess dead = nodes.get(0);
            String deadKey = keyOf.get(dead.port());
            dead.kill();

            // For 3 s: the live primaries' keys decided by Redis every time; the dead one's refused (closed),
            // after a few overruns at once (its circuit open).
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
            long lastDeadMs = Long.MAX_VALUE;
            int rounds = 0;
            while (System.nanoTime() < until || rounds < 10) {
                rounds++;
                for (RateLimiter l : limiters) {
                    for (Map.Entry<Integer, String> e : keyOf.entrySet()) {
                        if (e.getKey() == dead.port()) {
                            long t0 = System.nanoTime();
                            assertThatThrownBy(() -> l.acquire("circuit", deadKey).close())
                                    .isInstanceOf(RateLimitUnavailableException.class);
                            lastDeadMs = (System.nanoTime() - t0) / 1_000_000;
                            // Jedis blocks, and its first call to the dead node runs through its own retries (until
                            // timeout x max-redirects: 500 ms x 5, README "Jedis"); the budget bounds the others.
                            long bound = l == limiters.get(2) ? BUDGET.toMillis() * 5 + 1_000 : BUDGET.toMillis() + 1_000;
                            assertThat(lastDeadMs).as("a decision waits at most the budget (Jedis: its retries)").isLessThan(bound);
                        } else {
                            admittedByRedis(l, e.getValue());
                        }
                    }
                }
                Thread.sleep(50);
            }
            // Open: answered without a round trip (microseconds); a closed circuit would wait the
            // 500 ms budget. Half the budget separates the two on a loaded 2-core machine too.
            assertThat(lastDeadMs).as("the dead primary's circuit is open: its keys answered without waiting").isLessThan(BUDGET.toMillis() / 2);

            RedisProcess back = dead.restart();
            nodes.set(0, back);
            // It answers PING at once but CLUSTERDOWN until it has rejoined: "answering" is from then on.
            back.awaitClusterOk();
            long answering = System.nanoTime();
            for (RateLimiter l : limiters) {
                while (true) {
                    try (Permit p = l.acquire("circuit", deadKey)) {
                        assertThat(p.decision()).isNotNull();
                        break;
                    } catch (RateLimitUnavailableException stillOpen) {
                        assertThat((System.nanoTime() - answering) / 1_000_000).as("decided by Redis again within 2 s of it answering")
                                .isLessThan(2_000);
                        Thread.sleep(20);
                    }
                }
            }
        } finally {
            limiters.forEach(RateLimiter::close);
            plain.close();
            factory.destroy();
            jedis.destroy();
            lettuce.shutdown();
            resources.shutdown();
            nodes.forEach(RedisProcess::stop);
        }
    }

    private static RateLimiter limiter(RateLimitTransport t, Policy policy) {
        return RateLimiter.builder(t).budget(BUDGET).probeInterval(Duration.ofMillis(100)).onRedisDown(FailMode.CLOSED)
                .policy(policy).build();
    }

    private static void admittedByRedis(RateLimiter l, String key) {
        try (Permit p = l.acquire("circuit", key)) {
            assertThat(p.decision()).as("decided by Redis: " + key).isNotNull();
            assertThat(p.decision().admitted()).isTrue();
        }
    }
}
