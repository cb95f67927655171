package dev.redisratelimit.example.gateway;

import dev.redisratelimit.spring.test.RedisServer;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * make bench-gateway (never in make test: tag "bench"): SCG's RedisRateLimiter
 * against redis-ratelimit's RateLimiter in the same RequestRateLimiter filter,
 * the RateLimit filter, and no limiter, on four routes alike to one stub
 * backend, every request admitted. Interleaved rounds (the order rotates);
 * per request: Redis server time (INFO commandstats usec, reset before each
 * batch), gateway CPU (the CPU time of the gateway's own threads — Reactor
 * Netty's event loops, Lettuce's, Reactor's schedulers — not the load
 * generator's or the backend's) and the client's p50. Printed as ratios to
 * SCG's RedisRateLimiter. BENCH_ROUNDS, BENCH_REQUESTS, BENCH_CONCURRENCY tune it.
 */
@Tag("bench")
class GatewayBench {

    static final String[] ROUTES = {"bench-scg", "bench-ours", "bench-filter", "bench-none"};
    static final String[] LABELS = {"SCG RedisRateLimiter", "redis-ratelimit RateLimiter", "redis-ratelimit RateLimit filter",
            "no limiter"};

    static int env(String name, int dflt) {
        String v = System.getenv(name);
        return v == null || v.isBlank() ? dflt : Integer.parseInt(v);
    }

    @Test
    void bench() throws Exception {
        int rounds = env("BENCH_ROUNDS", 5);
        int requests = env("BENCH_REQUESTS", 1000);
        int concurrency = env("BENCH_CONCURRENCY", 8);
        try (RedisServer redis = RedisServer.launch(); StubBackend backend = new StubBackend();
                ConfigurableApplicationContext app = new SpringApplicationBuilder(ExampleGateway.class).profiles("bench")
                        // arguments, not default properties: application.yml's own values outrank those
                        .run("--server.port=0", "--spring.data.redis.url=" + redis.url(), "--backend.uri=" + backend.uri())) {
            int port = ((WebServerApplicationContext) app).getWebServer().getPort();
            HttpClient http = HttpClient.newHttpClient();
            ExecutorService load = Executors.newFixedThreadPool(concurrency, r -> new Thread(r, "bench-load"));
            double[][] redisUs = new double[ROUTES.length][rounds];
            double[][] cpuUs = new double[ROUTES.length][rounds];
            List<List<Long>> latencies = new ArrayList<>();
            for (int i = 0; i < ROUTES.length; i++) {
                latencies.add(Collections.synchronizedList(new ArrayList<>()));
            }
            for (int i = 0; i < ROUTES.length; i++) {
                run(http, load, port, ROUTES[i], 300, concurrency, null); // warm-up: JIT, connections
            }
            for (int round = 0; round < rounds; round++) {
                for (int j = 0; j < ROUTES.length; j++) {
                    int i = (j + round) % ROUTES.length;
                    redis.cli("CONFIG", "RESETSTAT");
                    Map<Long, Long> cpu0 = gatewayCpu();
                    run(http, load, port, ROUTES[i], requests, concurrency, latencies.get(i));
                    cpuUs[i][round] = cpuDelta(cpu0, gatewayCpu()) / 1000.0 / requests;
                    redisUs[i][round] = redisUsec(redis.cli("INFO", "commandstats")) / requests;
                }
            }
            load.shutdownNow();
            StringBuilder out = new StringBuilder();
            out.append(String.format("Spring Cloud Gateway, %d rounds x %d requests per route, %d concurrent, medians of the rounds%n",
                    rounds, requests, concurrency));
            out.append(String.format("%-34s %12s %8s %13s %8s %9s %8s%n", "route limiter", "Redis us/req", "ratio", "gateway us/req",
                    "ratio", "p50 ms", "ratio"));
            double r0 = median(redisUs[0]), c0 = median(cpuUs[0]), p0 = p50(latencies.get(0));
            for (int i = 0; i < ROUTES.length; i++) {
                double r = median(redisUs[i]), c = median(cpuUs[i]), p = p50(latencies.get(i));
                out.append(String.format("%-34s %12.1f %8s %13.1f %8.2f %9.3f %8.2f%n", LABELS[i], r, r0 > 0 ? String.format("%.2f", r / r0) : "-",
                        c, c / c0, p, p / p0));
            }
            System.out.print(out);
            Files.writeString(Path.of("target", "bench-gateway.txt"), out);
        }
    }

    static void run(HttpClient http, ExecutorService load, int port, String route, int n, int concurrency, List<Long> lat)
            throws Exception {
        AtomicInteger next = new AtomicInteger();
        List<Future<?>> workers = new ArrayList<>();
        for (int w = 0; w < concurrency; w++) {
            workers.add(load.submit(() -> {
                int k;
                while ((k = next.getAndIncrement()) < n) {
                    HttpRequest req = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/" + route + "/hello"))
                            .header("X-Api-Key", "user-" + (k % 64)).build();
                    long t0 = System.nanoTime();
                    HttpResponse<Void> r = http.send(req, HttpResponse.BodyHandlers.discarding());
                    long t = System.nanoTime() - t0;
                    if (r.statusCode() != 200) {
                        throw new IllegalStateException(route + " answered " + r.statusCode());
                    }
                    if (lat != null) {
                        lat.add(t);
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : workers) {
            f.get();
        }
    }

    // CPU ns of the gateway's threads, by thread id.
    static Map<Long, Long> gatewayCpu() {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        Map<Long, Long> m = new LinkedHashMap<>();
        for (ThreadInfo t : mx.dumpAllThreads(false, false)) {
            String n = t.getThreadName();
            if (n.startsWith("reactor-") || n.startsWith("lettuce-") || n.startsWith("boundedElastic") || n.startsWith("parallel")) {
                long c = mx.getThreadCpuTime(t.getThreadId());
                if (c > 0) {
                    m.put(t.getThreadId(), c);
                }
            }
        }
        return m;
    }

    static long cpuDelta(Map<Long, Long> before, Map<Long, Long> after) {
        long sum = 0;
        for (Map.Entry<Long, Long> e : after.entrySet()) {
            sum += e.getValue() - before.getOrDefault(e.getKey(), 0L);
        }
        return sum;
    }

    // Server time of every command but the measurement's own (INFO, CONFIG).
    static double redisUsec(String info) {
        double sum = 0;
        for (String line : info.split("\n")) {
            line = line.trim();
            if (!line.startsWith("cmdstat_") || line.startsWith("cmdstat_info:") || line.startsWith("cmdstat_config")) {
                continue;
            }
            for (String part : line.substring(line.indexOf(':') + 1).split(",")) {
                if (part.startsWith("usec=")) {
                    sum += Double.parseDouble(part.substring(5));
                }
            }
        }
        return sum;
    }

    static double median(double[] v) {
        double[] s = v.clone();
        java.util.Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    static double p50(List<Long> ns) {
        List<Long> s = new ArrayList<>(ns);
        Collections.sort(s);
        return s.isEmpty() ? 0 : s.get(s.size() / 2) / 1e6;
    }
}
