package dev.redisratelimit.bench;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * make bench-java: starts a redis-server with the module ($RL_MODULE) and
 * {@link BenchApp} on free ports, then drives the three endpoints with
 * {@code BENCH_CONCURRENCY} (8) threads of java.net.http.HttpClient for
 * {@code BENCH_ROUNDS} interleaved rounds of {@code BENCH_SECONDS} each
 * (contestant order rotated every round), and prints per contestant the
 * throughput, p50/p99 latency, the Redis commands per request and their
 * server-side time from INFO commandstats (reset before each segment), and the
 * ratios the targets are stated in. The load generator shares the
 * machine (and the JVM) with the app and Redis, as the issue asks.
 */
public final class SpringBench {

    /** A contestant: its endpoint, and which commandstats entries are its own top-level calls. */
    record Contestant(String label, String path, Predicate<String> own) {}

    /** What a contestant accumulated over its segments. */
    static final class Tally {
        long requests;
        long non200;
        long nanos;
        final List<long[]> latencies = new ArrayList<>();
        final Map<String, long[]> commands = new TreeMap<>(); // name -> {calls, usec}
        final List<Double> roundRps = new ArrayList<>();
        final Map<String, Long> cpu = new java.util.LinkedHashMap<>(); // group -> ns over the segments (CpuMeter)
        long[] sorted;

        /** CPU microseconds per request of a group (CpuMeter.GROUPS, "jvm", "redis"). */
        double cpuUsPerRequest(String group) {
            return cpu.getOrDefault(group, 0L) / 1e3 / requests;
        }

        double rps() {
            return requests / (nanos / 1e9);
        }

        double percentileMs(double p) {
            if (sorted == null) {
                int n = latencies.stream().mapToInt(a -> a.length).sum();
                sorted = new long[n];
                int i = 0;
                for (long[] a : latencies) {
                    System.arraycopy(a, 0, sorted, i, a.length);
                    i += a.length;
                }
                Arrays.sort(sorted);
            }
            if (sorted.length == 0) {
                return Double.NaN;
            }
            int idx = (int) Math.min(sorted.length - 1, Math.ceil(p / 100.0 * sorted.length) - 1);
            return sorted[Math.max(0, idx)] / 1e6;
        }

        double ownCallsPerRequest(Predicate<String> own) {
            return commands.entrySet().stream().filter(e -> own.test(e.getKey())).mapToLong(e -> e.getValue()[0]).sum() / (double) requests;
        }

        double ownUsecPerRequest(Predicate<String> own) {
            return commands.entrySet().stream().filter(e -> own.test(e.getKey())).mapToLong(e -> e.getValue()[1]).sum() / (double) requests;
        }
    }

    public static void main(String[] args) throws Exception {
        int rounds = env("BENCH_ROUNDS", 5);
        int seconds = env("BENCH_SECONDS", 4);
        int concurrency = env("BENCH_CONCURRENCY", 8);
        int users = env("BENCH_USERS", 1000);
        int warmup = env("BENCH_WARMUP_SECONDS", 10);
        String module = System.getenv("RL_MODULE");
        if (module == null || !Files.isRegularFile(Path.of(module))) {
            throw new IllegalStateException("set RL_MODULE to the module's .so (make build makes target/release/libredis_ratelimit.so)");
        }
        String server = System.getenv().getOrDefault("RL_REDIS_SERVER", "redis-server");
        String loadBefore = Files.readString(Path.of("/proc/loadavg")).trim();

        Path dir = Files.createTempDirectory("rl-spring-bench");
        int redisPort = freePort();
        Process redis = new ProcessBuilder(server, "--port", Integer.toString(redisPort), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", dir.toString(), "--loadmodule", module)
                .redirectErrorStream(true).redirectOutput(dir.resolve("redis.log").toFile()).start();
        Runtime.getRuntime().addShutdownHook(new Thread(redis::destroyForcibly));
        waitForPort(redis, redisPort, dir);

        ConfigurableApplicationContext app = new SpringApplicationBuilder(BenchApp.class).properties(Map.of(
                "server.port", "0",
                "spring.data.redis.host", "127.0.0.1",
                "spring.data.redis.port", Integer.toString(redisPort),
                "ratelimit.user-header", "X-User",
                "spring.main.banner-mode", "off",
                "logging.level.root", "WARN")).run(args);
        int appPort = app.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
        RedisClient client = RedisClient.create("redis://127.0.0.1:" + redisPort);
        try (StatefulRedisConnection<String, String> conn = client.connect()) {
            RedisCommands<String, String> r = conn.sync();
            List<Contestant> all = List.of(
                    new Contestant("(a) starter @RateLimited", "/starter", n -> n.startsWith("rl.")),
                    new Contestant("(b) seed 000 aspect + Lua", "/seed", n -> n.equals("evalsha") || n.equals("eval")),
                    new Contestant("(c) no limiter", "/none", n -> false),
                    new Contestant("(d) one PING round trip", "/roundtrip", n -> n.equals("ping")));
            // BENCH_ONLY=a (or a,c ...) drives only those contestants: for profiling one of them.
            String only = System.getenv().getOrDefault("BENCH_ONLY", "").trim();
            List<Contestant> contestants = only.isEmpty() ? all
                    : all.stream().filter(c -> only.contains(c.label().substring(1, 2))).toList();
            HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
            Map<Contestant, HttpRequest[]> requests = new java.util.HashMap<>();
            for (Contestant c : contestants) {
                HttpRequest[] byUser = new HttpRequest[users];
                for (int u = 0; u < users; u++) {
                    byUser[u] = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + appPort + c.path()))
                            .header("X-User", "user-" + u).timeout(Duration.ofSeconds(10)).GET().build();
                }
                requests.put(c, byUser);
            }

            // Every contestant must really decide (a key written in Redis) and admit.
            for (Contestant c : contestants) {
                int status = http.send(requests.get(c)[0], HttpResponse.BodyHandlers.discarding()).statusCode();
                if (status != 200) {
                    throw new IllegalStateException(c.label() + " answered " + status + " to its first request");
                }
            }
            System.out.printf(Locale.ROOT, "keys after one request each: starter %d, seed %d%n",
                    r.keys("*user-0*").stream().filter(k -> !k.startsWith("rate_limit:")).count(),
                    r.keys("rate_limit:*").size());

            System.out.printf(Locale.ROOT, "warm-up: %d s per contestant%n", warmup);
            for (Contestant c : contestants) {
                segment(requests.get(c), concurrency, warmup, http, new Tally());
            }

            Map<Contestant, Tally> tallies = new java.util.LinkedHashMap<>();
            contestants.forEach(c -> tallies.put(c, new Tally()));
            for (int round = 0; round < rounds; round++) {
                for (int i = 0; i < contestants.size(); i++) {
                    Contestant c = contestants.get((i + round) % contestants.size());
                    Tally t = tallies.get(c);
                    r.configResetstat();
                    long before = t.requests;
                    CpuMeter.Reading cpu0 = CpuMeter.read(r.info("cpu"));
                    long nanos = segment(requests.get(c), concurrency, seconds, http, t);
                    CpuMeter.between(cpu0, CpuMeter.read(r.info("cpu"))).forEach((g, ns) -> t.cpu.merge(g, ns, Long::sum));
                    t.roundRps.add((t.requests - before) / (nanos / 1e9));
                    commandStats(r.info("commandstats")).forEach((name, v) -> {
                        long[] sum = t.commands.computeIfAbsent(name, k -> new long[2]);
                        sum[0] += v[0];
                        sum[1] += v[1];
                    });
                }
                System.out.printf(Locale.ROOT, "round %d/%d done%n", round + 1, rounds);
            }
            String loadAfter = Files.readString(Path.of("/proc/loadavg")).trim();
            report(contestants, tallies, rounds, seconds, concurrency, users, loadBefore, loadAfter);
        } finally {
            client.shutdown();
            app.close();
            redis.destroyForcibly();
            redis.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** Runs the load for {@code seconds}; adds each request's latency to {@code t}; returns the segment's length. */
    static long segment(HttpRequest[] byUser, int concurrency, int seconds, HttpClient http, Tally t) throws InterruptedException {
        CountDownLatch start = new CountDownLatch(1);
        long[][] lat = new long[concurrency][];
        int[] counts = new int[concurrency];
        int[] bad = new int[concurrency];
        Thread[] threads = new Thread[concurrency];
        long[] window = new long[2];
        for (int i = 0; i < concurrency; i++) {
            int me = i;
            threads[i] = new Thread(() -> {
                long[] mine = new long[1 << 14];
                int n = 0;
                try {
                    start.await();
                    long end = window[1];
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    while (System.nanoTime() < end) {
                        HttpRequest req = byUser[rnd.nextInt(byUser.length)];
                        long t0 = System.nanoTime();
                        int status;
                        try {
                            status = http.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
                        } catch (IOException e) {
                            status = -1;
                        }
                        long took = System.nanoTime() - t0;
                        if (n == mine.length) {
                            mine = Arrays.copyOf(mine, n * 2);
                        }
                        mine[n++] = took;
                        if (status != 200) {
                            bad[me]++;
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                lat[me] = Arrays.copyOf(mine, n);
                counts[me] = n;
            }, "load-" + i);
            threads[i].start();
        }
        window[0] = System.nanoTime();
        window[1] = window[0] + TimeUnit.SECONDS.toNanos(seconds);
        start.countDown();
        for (Thread th : threads) {
            th.join();
        }
        long nanos = System.nanoTime() - window[0];
        for (int i = 0; i < concurrency; i++) {
            t.latencies.add(lat[i]);
            t.requests += counts[i];
            t.non200 += bad[i];
        }
        t.nanos += nanos;
        return nanos;
    }

    /** INFO commandstats → command name → {calls, usec}. */
    static Map<String, long[]> commandStats(String info) {
        Map<String, long[]> out = new TreeMap<>();
        for (String line : info.split("\r?\n")) {
            if (!line.startsWith("cmdstat_")) {
                continue;
            }
            String name = line.substring("cmdstat_".length(), line.indexOf(':'));
            long calls = 0;
            long usec = 0;
            for (String kv : line.substring(line.indexOf(':') + 1).split(",")) {
                String[] p = kv.split("=");
                if (p[0].equals("calls")) {
                    calls = Long.parseLong(p[1]);
                } else if (p[0].equals("usec")) {
                    usec = Long.parseLong(p[1]);
                }
            }
            out.put(name, new long[] {calls, usec});
        }
        return out;
    }

    static void report(List<Contestant> cs, Map<Contestant, Tally> ts, int rounds, int seconds, int concurrency, int users, String loadBefore,
            String loadAfter) {
        System.out.printf(Locale.ROOT, "%nSpring MVC endpoint (2 ms of work), concurrency %d, %d users, %d interleaved rounds x %d s per contestant%n",
                concurrency, users, rounds, seconds);
        System.out.printf(Locale.ROOT, "machine: %d cores, load average before %s, after %s (shared and noisy: figures vary run to run)%n%n",
                Runtime.getRuntime().availableProcessors(), loadBefore, loadAfter);
        System.out.printf(Locale.ROOT, "%-28s %9s %8s %8s %8s %14s %14s%n", "contestant", "req/s", "p50 ms", "p99 ms", "non-200",
                "Redis calls/req", "server us/req");
        for (Contestant c : cs) {
            Tally t = ts.get(c);
            System.out.printf(Locale.ROOT, "%-28s %9.0f %8.2f %8.2f %8d %14.3f %14.2f%n", c.label(), t.rps(), t.percentileMs(50),
                    t.percentileMs(99), t.non200, t.ownCallsPerRequest(c.own()), t.ownUsecPerRequest(c.own()));
        }
        System.out.println("\nper round req/s (order rotated each round):");
        for (Contestant c : cs) {
            System.out.printf(Locale.ROOT, "  %-28s %s%n", c.label(),
                    ts.get(c).roundRps.stream().map(v -> String.format(Locale.ROOT, "%.0f", v)).toList());
        }
        System.out.println("\nevery command Redis ran during each contestant's segments, calls per request (usec per call):");
        for (Contestant c : cs) {
            Tally t = ts.get(c);
            StringBuilder sb = new StringBuilder();
            t.commands.forEach((name, v) -> {
                if (!name.startsWith("config") && !name.equals("info")) {
                    sb.append(String.format(Locale.ROOT, " %s=%.3f (%.2f)", name, v[0] / (double) t.requests, v[0] == 0 ? 0.0 : v[1] / (double) v[0]));
                }
            });
            System.out.printf(Locale.ROOT, "  %-28s%s%n", c.label(), sb);
        }
        System.out.println("  (commands a script runs are listed too; their time is inside EVALSHA's, so only the top-level");
        System.out.println("   RL.* / EVALSHA calls make the server us/req column; background calls of the starter are listed, not counted)");

        System.out.println("\nCPU per request, microseconds (load-insensitive: what each request costs whoever else runs;");
        System.out.println(" the JVM holds the load generator too, split by thread group: see CpuMeter; jit: compiling (warm-up); rest: GC, VM threads;");
        System.out.println(" app+redis: tomcat + lettuce + rest + redis, the app's and Redis's CPU without the load generator's;");
        System.out.println(" alloc: heap bytes allocated per request by the named groups' threads):");
        System.out.printf(Locale.ROOT, "%-28s %9s %9s %9s %9s %9s %9s %9s %13s %10s%n", "contestant", "jvm", "tomcat", "lettuce", "loadgen", "jit",
                "rest", "redis", "app+redis", "alloc KB");
        for (Contestant c : cs) {
            Tally t = ts.get(c);
            System.out.printf(Locale.ROOT, "%-28s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %13.1f %10.1f%n", c.label(), t.cpuUsPerRequest("jvm"),
                    t.cpuUsPerRequest("tomcat"), t.cpuUsPerRequest("lettuce"), t.cpuUsPerRequest("loadgen"), t.cpuUsPerRequest("jit"),
                    t.cpuUsPerRequest("rest"),
                    t.cpuUsPerRequest("redis"), steady(t),
                    t.cpu.getOrDefault("alloc", 0L) / 1024.0 / t.requests);
        }
        Map<Character, Tally> by = new java.util.HashMap<>();
        Map<Character, Contestant> who = new java.util.HashMap<>();
        for (Contestant x : cs) {
            by.put(x.label().charAt(1), ts.get(x));
            who.put(x.label().charAt(1), x);
        }
        if (!by.keySet().containsAll(List.of('a', 'b', 'c'))) {
            return; // BENCH_ONLY: no ratios against absent contestants
        }
        Tally a = by.get('a');
        Tally b = by.get('b');
        Tally c = by.get('c');
        Tally d = by.get('d');
        System.out.println("  CPU per request beyond (c)'s (the app's in the JVM: tomcat + lettuce + rest; and redis-server's), us:");
        for (char k : new char[] {'a', 'b', 'd'}) {
            Tally t = by.get(k);
            if (t != null) {
                System.out.printf(Locale.ROOT, "    %-28s app %7.1f + redis %6.1f = %7.1f%n", who.get(k).label(), steadyJvm(t) - steadyJvm(c),
                        t.cpuUsPerRequest("redis") - c.cpuUsPerRequest("redis"), steady(t) - steady(c));
            }
        }
        System.out.printf(Locale.ROOT, "  ratios: (a)/(b) of that CPU %.3f (app %.3f, redis %.3f); whole request (a)/(c) %.3f, (b)/(c) %.3f%n",
                (steady(a) - steady(c)) / (steady(b) - steady(c)), (steadyJvm(a) - steadyJvm(c)) / (steadyJvm(b) - steadyJvm(c)),
                (a.cpuUsPerRequest("redis") - c.cpuUsPerRequest("redis")) / (b.cpuUsPerRequest("redis") - c.cpuUsPerRequest("redis")),
                steady(a) / steady(c), steady(b) / steady(c));
        System.out.println("  (whole request: the app's CPU in the JVM and redis-server's, the load generator's left out)");
        if (d != null) {
            System.out.printf(Locale.ROOT, "  (a)'s gap to (c) = (d)-(c), one round trip through the transport, + (a)-(d), the starter beyond it:%n");
            System.out.printf(Locale.ROOT, "    CPU  %+.1f us = %+.1f + %+.1f (app %+.1f, redis %+.1f)%n", steady(a) - steady(c), steady(d) - steady(c),
                    steady(a) - steady(d), steadyJvm(a) - steadyJvm(d), a.cpuUsPerRequest("redis") - d.cpuUsPerRequest("redis"));
            System.out.printf(Locale.ROOT, "    p50  %+.2f ms = %+.2f + %+.2f%n", a.percentileMs(50) - c.percentileMs(50),
                    d.percentileMs(50) - c.percentileMs(50), a.percentileMs(50) - d.percentileMs(50));
        }

        double aCalls = a.ownCallsPerRequest(who.get('a').own());
        double costRatio = a.ownUsecPerRequest(who.get('a').own()) / b.ownUsecPerRequest(who.get('b').own());
        double p50Delta = a.percentileMs(50) - c.percentileMs(50);
        System.out.println("\nratios:");
        System.out.printf(Locale.ROOT, "  throughput (a)/(c) %.3f, (b)/(c) %.3f, (a)/(b) %.3f%n", a.rps() / c.rps(), b.rps() / c.rps(), a.rps() / b.rps());
        System.out.printf(Locale.ROOT, "  p50 (a)-(c) %+.2f ms, (b)-(c) %+.2f ms; p99 (a)/(c) %.2f, (b)/(c) %.2f%n", p50Delta,
                b.percentileMs(50) - c.percentileMs(50), a.percentileMs(99) / c.percentileMs(99), b.percentileMs(99) / c.percentileMs(99));
        System.out.printf(Locale.ROOT, "  server-side cost per request (a)/(b) %.3f%n", costRatio);
        System.out.println("\ntargets:");
        System.out.printf(Locale.ROOT, "  (a) one Redis round trip per request: %.3f RL calls/request -> %s%n", aCalls,
                Math.abs(aCalls - 1.0) < 0.01 ? "met" : "MISSED");
        System.out.printf(Locale.ROOT, "  (a) server cost <= 0.5 x (b): %.3f -> %s%n", costRatio, costRatio <= 0.5 ? "met" : "MISSED");
        System.out.printf(Locale.ROOT, "  (a) p50 <= (c) p50 + 1 ms: %+.2f ms -> %s%n", p50Delta, p50Delta <= 1.0 ? "met" : "MISSED");
        if (d != null) {
            // Issue 33 item 4: the starter's own app CPU beyond one PING round trip through the same transport.
            double own = steadyJvm(a) - steadyJvm(d);
            System.out.printf(Locale.ROOT, "  (a) app CPU beyond (d) <= 40 us per request: %.1f us (JIT %.1f us/request in (a) during the"
                    + " segments, %.1f in (d): above a few us, warm-up was short) -> %s%n", own, a.cpuUsPerRequest("jit"),
                    d.cpuUsPerRequest("jit"), own <= 40 ? "met" : "MISSED");
        }
    }

    /**
     * The app's CPU per request in the JVM: the process's less the JIT
     * compilers' (warm-up, not a per-request cost) and less the load
     * generator's (not the app; and the noisiest group, as its threads wait
     * on the app).
     */
    static double steadyJvm(Tally t) {
        return t.cpuUsPerRequest("jvm") - t.cpuUsPerRequest("jit") - t.cpuUsPerRequest("loadgen");
    }

    /** The app's steady CPU per request plus redis-server's. */
    static double steady(Tally t) {
        return steadyJvm(t) + t.cpuUsPerRequest("redis");
    }

    static int env(String name, int dflt) {
        String v = System.getenv(name);
        return v == null || v.isBlank() ? dflt : Integer.parseInt(v.trim());
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(true);
            s.bind(new InetSocketAddress("127.0.0.1", 0));
            return s.getLocalPort();
        }
    }

    static void waitForPort(Process p, int port, Path dir) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            if (!p.isAlive()) {
                throw new IllegalStateException("redis-server exited: " + Files.readString(dir.resolve("redis.log")));
            }
            try (Socket ignored = new Socket("127.0.0.1", port)) {
                return;
            } catch (IOException e) {
                Thread.sleep(20);
            }
        }
        throw new IllegalStateException("redis-server did not listen on " + port);
    }

    private SpringBench() {}
}
