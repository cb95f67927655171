package dev.redisratelimit.webflux;


import dev.redisratelimit.spring.test.RoutesContract;
import dev.redisratelimit.spring.test.SharedRedis;
import java.util.UUID;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.context.ActiveProfiles;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** ratelimit.routes on WebFlux: {@link RoutesContract}. */
@SpringBootTest(classes = ReactiveTestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "spring.main.web-application-type=reactive")
@ActiveProfiles("routes")
class WebFluxRoutesTest extends RoutesContract {

    static final String PREFIX = "wr" + UUID.randomUUID().toString().substring(0, 8) + ":";

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry r) {
        r.add("spring.data.redis.url", () -> SharedRedis.get().url());
        r.add("ratelimit.prefix", () -> PREFIX);
    }

    @Override
    protected String prefix() {
        return PREFIX;
    }
}
