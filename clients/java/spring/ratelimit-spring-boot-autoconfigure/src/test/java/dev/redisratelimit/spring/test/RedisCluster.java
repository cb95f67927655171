package dev.redisratelimit.spring.test;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Three primaries with the module, joined by {@code redis-cli --cluster create}; stopped by close(). */
public final class RedisCluster implements AutoCloseable {

    public final List<RedisServer> nodes = new ArrayList<>();

    public static RedisCluster start() throws IOException, InterruptedException {
        return start(true);
    }

    /** Three primaries without the module (the Functions backend). */
    public static RedisCluster startWithoutModule() throws IOException, InterruptedException {
        return start(false);
    }

    /**
     * Three primaries that keep serving their slots while one is down
     * ({@code cluster-require-full-coverage no}, SERVICES.md "Part of a Cluster down").
     */
    public static RedisCluster startPartialCoverage() throws IOException, InterruptedException {
        return start(true, "--cluster-require-full-coverage", "no");
    }

    private static RedisCluster start(boolean module, String... extra) throws IOException, InterruptedException {
        RedisCluster c = new RedisCluster();
        try {
            for (int i = 0; i < 3; i++) {
                List<String> all = new ArrayList<>(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", "5000"));
                all.addAll(List.of(extra));
                String[] args = all.toArray(String[]::new);
                c.nodes.add(module ? RedisServer.launch(args) : RedisServer.launchWithoutModule(args));
            }
            List<String> cmd = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
            for (RedisServer n : c.nodes) {
                cmd.add("127.0.0.1:" + n.port);
            }
            cmd.add("--cluster-yes");
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IllegalStateException("cluster create failed: " + out);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!c.nodes.stream().allMatch(n -> info(n).contains("cluster_state:ok"))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("cluster not ok");
                }
                Thread.sleep(100);
            }
            return c;
        } catch (IOException | InterruptedException | RuntimeException e) {
            c.close();
            throw e;
        }
    }

    private static String info(RedisServer n) {
        try {
            return n.cli("cluster", "info");
        } catch (Exception e) {
            return "";
        }
    }

    /** host:port,host:port,... */
    public String seeds() {
        return String.join(",", nodes.stream().map(n -> "127.0.0.1:" + n.port).toList());
    }

    /** The sum of errorstat_MOVED over the primaries. */
    public long moved() throws IOException, InterruptedException {
        long total = 0;
        for (RedisServer n : nodes) {
            for (String line : n.cli("info", "errorstats").split("\n")) {
                if (line.startsWith("errorstat_MOVED:count=")) {
                    total += Long.parseLong(line.trim().substring("errorstat_MOVED:count=".length()).split(",")[0]);
                }
            }
        }
        return total;
    }

    @Override
    public void close() throws InterruptedException {
        for (RedisServer n : nodes) {
            n.close();
        }
    }
}
