package dev.redisratelimit.spring.test;

/** One Redis for the test classes that share an application context; stopped when the JVM exits. */
public final class SharedRedis {
    private static RedisServer server;

    private SharedRedis() {
    }

    public static synchronized RedisServer get() {
        if (server == null) {
            try {
                server = RedisServer.launch();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
            RedisServer s = server;
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    s.close();
                } catch (InterruptedException ignored) {
                    Thread.currentThread().interrupt();
                }
            }));
        }
        return server;
    }

    /** True when the loaded module answers RL.ALL's DETAILS option. */
    public static boolean details() {
        try {
            String out = get().cli("RL.ALLPEEK", "1", "details-probe", "*", "CHECK", "1", "1", "1000", "COST", "0", "DETAILS");
            return !out.contains("ERR");
        } catch (Exception e) {
            return false;
        }
    }
}
