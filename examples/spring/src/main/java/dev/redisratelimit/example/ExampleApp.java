package dev.redisratelimit.example;

import dev.redisratelimit.client.Backend;
import java.util.HashMap;
import java.util.Map;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The seed services (shared/SERVICES.md). Environment: PORT, REDIS_URL or
 * REDIS_CLUSTER (host:port,... seeds; wins over REDIS_URL), RL_PREFIX,
 * RL_BACKEND (module, the default; functions: the Functions library, loaded
 * at start-up, no module needed; auto).
 */
@SpringBootApplication
public class ExampleApp {

    public static void main(String[] args) {
        String invalid = invalidSetting(System.getenv());
        if (invalid != null) { // one line and a non-zero exit, as the other example apps (no stack trace)
            System.err.println("example-java: " + invalid);
            System.exit(1);
        }
        try {
            start(System.getenv(), args);
        } catch (RuntimeException e) {
            if (BackendMissingReporter.oneLine(e) == null) {
                throw e; // Spring Boot has reported it
            }
            System.exit(1); // BackendMissingReporter has said it in one line
        }
    }

    /** What is wrong with the environment's settings, or null. */
    static String invalidSetting(Map<String, String> env) {
        try {
            Backend.parse(backend(env));
            return null;
        } catch (IllegalArgumentException e) {
            return "RL_BACKEND: " + e.getMessage();
        }
    }

    private static String backend(Map<String, String> env) {
        String value = env.get("RL_BACKEND");
        return value == null || value.isEmpty() ? "module" : value; // unset or empty: the module, as in the other apps
    }

    /** Starts the app with the given environment (the tests start several instances this way). */
    public static ConfigurableApplicationContext start(Map<String, String> env, String... args) {
        Map<String, Object> props = new HashMap<>();
        props.put("server.port", env.getOrDefault("PORT", "8080"));
        props.put("ratelimit.prefix", env.getOrDefault("RL_PREFIX", ""));
        props.put("ratelimit.backend", backend(env));
        String cluster = env.get("REDIS_CLUSTER");
        if (cluster != null && !cluster.isBlank()) {
            props.put("spring.data.redis.cluster.nodes", cluster);
        } else {
            props.put("spring.data.redis.url", env.getOrDefault("REDIS_URL", "redis://127.0.0.1:6379"));
        }
        SpringApplication app = new SpringApplication(ExampleApp.class);
        app.setDefaultProperties(props);
        return app.run(args);
    }
}
