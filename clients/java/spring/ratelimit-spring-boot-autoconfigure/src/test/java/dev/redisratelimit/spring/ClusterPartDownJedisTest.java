package dev.redisratelimit.spring;

import org.springframework.boot.test.context.SpringBootTest;

/**
 * {@link ClusterPartDownTest} with Spring Data's Jedis driver: the circuits
 * follow Jedis's own slot table, so one primary down opens its circuit alone
 * and the live primaries' keys are still decided by Redis (CLIENTS.md §3).
 * Jedis blocks, so its timeout is the decision budget (README, "Jedis").
 */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.data.redis.client-type=jedis", "spring.data.redis.timeout=500ms",
                "spring.data.redis.connect-timeout=500ms"})
class ClusterPartDownJedisTest extends ClusterPartDownTest {
}
