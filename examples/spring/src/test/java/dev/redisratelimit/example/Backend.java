package dev.redisratelimit.example;

/**
 * What decides for the instances of a services test (their RL_BACKEND), and
 * what follows from it for the test: whether its Redis loads the module, and
 * the zone of endpoint 5's calls (the library takes none with daylight
 * saving: SERVICES.md "On a Redis without the module"). The Functions
 * variants of {@link StandaloneServicesTest} and {@link ClusterServicesTest}
 * differ from them by this alone.
 */
enum Backend {
    MODULE("module", true, "Europe/Paris"),
    FUNCTIONS("functions", false, "Asia/Tokyo");

    /** RL_BACKEND of every instance. */
    final String env;
    /** Whether the test's redis-server processes load the module. */
    final boolean withModule;
    /** The X-Zone of endpoint 5's calls. */
    final String zone;

    Backend(String env, boolean withModule, String zone) {
        this.env = env;
        this.withModule = withModule;
        this.zone = zone;
    }
}
