package dev.redisratelimit.example.gateway;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/** The backend behind the example gateway: the JDK's HTTP server on a free port; {@code /slow?ms=N} answers after N ms. */
final class StubBackend implements AutoCloseable {

    private final HttpServer server;
    private final ExecutorService pool = Executors.newFixedThreadPool(16);
    final AtomicInteger hits = new AtomicInteger();

    StubBackend() throws IOException {
        // Headers and body are two writes: without TCP_NODELAY each answer waits out a delayed ACK (~40 ms).
        System.setProperty("sun.net.httpserver.nodelay", "true");
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 256);
        server.setExecutor(pool);
        server.createContext("/", exchange -> {
            hits.incrementAndGet();
            String query = exchange.getRequestURI().getQuery();
            if (exchange.getRequestURI().getPath().endsWith("/slow") && query != null && query.startsWith("ms=")) {
                try {
                    Thread.sleep(Long.parseLong(query.substring(3)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            byte[] body = "hello".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
    }

    String uri() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    @Override
    public void close() {
        server.stop(0);
        pool.shutdownNow();
    }
}
