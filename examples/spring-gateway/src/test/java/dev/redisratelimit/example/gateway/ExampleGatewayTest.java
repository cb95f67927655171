package dev.redisratelimit.example.gateway;

import dev.redisratelimit.spring.test.RedisServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The example gateway on standalone Redis, in front of a stub backend, over HTTP. */
// A budget for a loaded CI machine (the example's 200 ms would answer a cold first call with the Redis-down mode).
@SpringBootTest(classes = ExampleGateway.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "ratelimit.decision-budget=2s")
class ExampleGatewayTest extends GatewayRoutesChecks {

    static RedisServer redis;
    static StubBackend backend;

    @DynamicPropertySource
    static void props(DynamicPropertyRegistry r) throws Exception {
        redis = RedisServer.launch();
        backend = new StubBackend();
        r.add("spring.data.redis.url", () -> redis.url());
        r.add("backend.uri", () -> backend.uri());
    }

    @AfterAll
    static void stop() throws Exception {
        redis.close();
        backend.close();
    }

    @LocalServerPort
    int port;

    @Override
    int port() {
        return port;
    }

    @Override
    StubBackend backend() {
        return backend;
    }

    @Test
    void apiRoute() throws Exception {
        apiRouteBurstThenProblem();
        apiRouteLeasesUntilTheResponseEnds();
        noKey();
    }

    @Test
    void scgRoute() throws Exception {
        scgRouteHeadersAndBare429();
    }
}
