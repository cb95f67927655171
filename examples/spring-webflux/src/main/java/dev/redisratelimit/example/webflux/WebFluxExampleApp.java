package dev.redisratelimit.example.webflux;

import java.util.HashMap;
import java.util.Map;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * Endpoints 3, 5 and 6 of shared/SERVICES.md on Spring WebFlux (Reactor
 * Netty). Environment: PORT, REDIS_URL or REDIS_CLUSTER (host:port,... seeds;
 * wins over REDIS_URL), RL_PREFIX, RL_BACKEND (module, the default;
 * functions; auto) — as examples/spring reads them.
 */
@SpringBootApplication
public class WebFluxExampleApp {

    public static void main(String[] args) {
        Map<String, String> env = System.getenv();
        Map<String, Object> props = new HashMap<>();
        props.put("server.port", env.getOrDefault("PORT", "8080"));
        props.put("ratelimit.prefix", env.getOrDefault("RL_PREFIX", ""));
        String backend = env.get("RL_BACKEND");
        props.put("ratelimit.backend", backend == null || backend.isEmpty() ? "module" : backend);
        String cluster = env.get("REDIS_CLUSTER");
        if (cluster != null && !cluster.isBlank()) {
            props.put("spring.data.redis.cluster.nodes", cluster);
        } else {
            props.put("spring.data.redis.url", env.getOrDefault("REDIS_URL", "redis://127.0.0.1:6379"));
        }
        SpringApplication app = new SpringApplication(WebFluxExampleApp.class);
        app.setDefaultProperties(props);
        app.run(args);
    }
}
