package dev.redisratelimit.example;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.test.Http;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;

/** The HTTP-level checks of SERVICES.md shared by the standalone and Cluster runs. */
final class Checks {
    private Checks() {
    }

    static final String JSON = "application/json";

    static HttpResponse<String> sms(Http h, String body) {
        return h.post("/seed000/sms", body);
    }

    static HttpResponse<String> llm(Http h, String zone, String key, String body, String... more) {
        List<String> headers = new ArrayList<>(List.of("X-Api-Key", key, "X-Zone", zone));
        headers.addAll(List.of(more));
        return h.post("/llm/complete", body, headers.toArray(String[]::new));
    }

    static void isProblem(HttpResponse<String> r, int status, String typeSuffix) {
        assertThat(r.statusCode()).as(r.body()).isEqualTo(status);
        assertThat(r.headers().firstValue("Content-Type").orElse("")).startsWith("application/problem+json");
        assertThat(r.body()).contains("\"status\":" + status).contains("\"title\":").contains("\"detail\":")
                .contains("\"type\":\"https://redis-ratelimit.dev/problems/" + typeSuffix + "\"");
    }

    static long retryAfter(HttpResponse<String> r) {
        return Long.parseLong(r.headers().firstValue("Retry-After").orElseThrow(() -> new AssertionError("no Retry-After: " + r.headers())));
    }

    /** Runs n calls at once (released together) and returns their answers. */
    static List<HttpResponse<String>> concurrently(int n, Function<Integer, HttpResponse<String>> call) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            CountDownLatch go = new CountDownLatch(1);
            List<Future<HttpResponse<String>>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int idx = i;
                fs.add(pool.submit(() -> {
                    go.await();
                    return call.apply(idx);
                }));
            }
            go.countDown();
            List<HttpResponse<String>> out = new ArrayList<>();
            for (Future<HttpResponse<String>> f : fs) {
                out.add(f.get());
            }
            return out;
        } finally {
            pool.shutdown();
        }
    }

    static long count(List<HttpResponse<String>> rs, int status) {
        return rs.stream().filter(r -> r.statusCode() == status).count();
    }
}
