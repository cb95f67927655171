package dev.redisratelimit.example.gateway;

import dev.redisratelimit.spring.test.RedisCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The example gateway on a three-primary Cluster (the callers' keys spread over the slots), over HTTP. */
// A budget for a loaded CI machine (the example's 200 ms would answer a cold first call with the Redis-down mode).
@SpringBootTest(classes = ExampleGateway.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "ratelimit.decision-budget=2s")
class ExampleGatewayClusterTest extends GatewayRoutesChecks {

    static RedisCluster cluster;
    static StubBackend backend;

    @DynamicPropertySource
    static void props(DynamicPropertyRegistry r) throws Exception {
        cluster = RedisCluster.start();
        backend = new StubBackend();
        r.add("spring.data.redis.cluster.nodes", () -> cluster.seeds());
        r.add("backend.uri", () -> backend.uri());
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
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
    void routesOnCluster() throws Exception {
        apiRouteBurstThenProblem();
        apiRouteLeasesUntilTheResponseEnds();
        scgRouteHeadersAndBare429();
    }
}
