package dev.redisratelimit.example;

import dev.redisratelimit.spring.test.Http;
import java.util.HashMap;
import java.util.Map;
import org.springframework.context.ConfigurableApplicationContext;

/** One running instance of the example app (its own Spring context and port), started as `make example-java` would. */
final class App implements AutoCloseable {
    // The tests' output stays readable in `make test`; warnings and errors still show.
    static final String QUIET = "--logging.level.root=WARN";

    final ConfigurableApplicationContext context;
    final int port;
    final Http http;

    private App(ConfigurableApplicationContext context) {
        this.context = context;
        // the port the embedded server bound (PORT=0), as Spring Boot publishes it on every version
        this.port = context.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
        this.http = new Http(port);
    }

    static App standalone(String redisUrl, String prefix) {
        return standalone(redisUrl, prefix, "module");
    }

    /** {@code backend}: RL_BACKEND (module, functions, auto). */
    static App standalone(String redisUrl, String prefix, String backend) {
        Map<String, String> env = new HashMap<>();
        env.put("PORT", "0");
        env.put("REDIS_URL", redisUrl);
        env.put("RL_PREFIX", prefix);
        env.put("RL_BACKEND", backend);
        return new App(ExampleApp.start(env, QUIET));
    }

    static App cluster(String seeds, String prefix) {
        return cluster(seeds, prefix, "module");
    }

    /** {@code backend}: RL_BACKEND (module, functions, auto). */
    static App cluster(String seeds, String prefix, String backend) {
        Map<String, String> env = new HashMap<>();
        env.put("RL_BACKEND", backend);
        env.put("PORT", "0");
        env.put("REDIS_CLUSTER", seeds);
        env.put("REDIS_URL", "redis://127.0.0.1:1"); // ignored when REDIS_CLUSTER is set
        env.put("RL_PREFIX", prefix);
        return new App(ExampleApp.start(env, QUIET));
    }

    @Override
    public void close() {
        context.close();
    }
}
