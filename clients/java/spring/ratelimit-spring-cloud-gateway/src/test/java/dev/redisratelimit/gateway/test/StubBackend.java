package dev.redisratelimit.gateway.test;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The service behind the gateway: the JDK's HTTP server on a free port.
 * {@code /hello} answers 200 "hello"; {@code /slow?ms=N} answers after N ms
 * (a routed response in flight). Counts the requests that reached it.
 */
public final class StubBackend implements AutoCloseable {

    private final HttpServer server;
    public final AtomicInteger hits = new AtomicInteger();

    public StubBackend() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
        server.setExecutor(Executors.newFixedThreadPool(8));
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
            exchange.getResponseHeaders().set("Content-Type", "text/plain");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
    }

    public String uri() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    @Override
    public void close() {
        server.stop(0);
        ((java.util.concurrent.ExecutorService) server.getExecutor()).shutdownNow();
    }
}
