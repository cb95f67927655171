package dev.redisratelimit.spring;

import dev.redisratelimit.spring.test.RedisDownContract;
import dev.redisratelimit.spring.test.RedisServer;
import org.junit.jupiter.api.AfterAll;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** Redis frozen, stopped and restarted under a running Spring MVC app: {@link RedisDownContract}. */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "ratelimit.prefix=down:")
class RedisDownTest extends RedisDownContract {

    static RedisServer redis;

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) throws Exception {
        redis = RedisServer.launch();
        r.add("spring.data.redis.url", () -> redis.url());
    }

    @AfterAll
    static void stop() throws Exception {
        redis.close();
    }

    @Override
    protected RedisServer redis() {
        return redis;
    }
}
