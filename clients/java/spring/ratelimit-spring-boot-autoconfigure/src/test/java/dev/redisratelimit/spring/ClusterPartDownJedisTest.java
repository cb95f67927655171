package dev.redisratelimit.spring;

import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;

/**
 * {@link ClusterPartDownTest} with Spring Data's Jedis driver: the circuits
 * follow Jedis's own slot table, so one primary down opens its circuit alone
 * and the live primaries' keys are still decided by Redis (CLIENTS.md §3).
 * Jedis blocks, so its timeout is the decision budget (README, "Jedis").
 * The app is closed with the class: its probes and pool would otherwise keep
 * calling the stopped Cluster while the next tests run.
 */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.data.redis.client-type=jedis", "spring.data.redis.timeout=500ms",
                "spring.data.redis.connect-timeout=500ms"})
@DirtiesContext
class ClusterPartDownJedisTest extends ClusterPartDownTest {
}
