package dev.redisratelimit.webflux;

import dev.redisratelimit.spring.test.RedisDownContract;
import dev.redisratelimit.spring.test.RedisServer;
import org.junit.jupiter.api.AfterAll;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** Redis frozen, stopped and restarted under a running WebFlux app: {@link RedisDownContract}. */
@SpringBootTest(classes = ReactiveTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.main.web-application-type=reactive", "ratelimit.prefix=wfdown:", "ratelimit.decision-budget=300ms"})
class WebFluxRedisDownTest extends RedisDownContract {

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
