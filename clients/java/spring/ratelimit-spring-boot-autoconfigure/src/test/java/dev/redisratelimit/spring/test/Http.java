package dev.redisratelimit.spring.test;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** A small JDK HTTP client for the tests (real requests to the running app). */
public final class Http {
    // HTTP/1.1 from the first request: no h2c upgrade attempt on each new connection (the test servers speak HTTP/1.1).
    // A client per Http (tests make one per request or per app): a JVM-wide client kept idle connections
    // to the test apps across test methods, and a request sent on one the server no longer read waited
    // for its 20 s timeout (WebFlux tests, intermittently; see clients/java/README.md, "What a new user trips over").
    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();

    private final String base;

    public Http(int port) {
        this.base = "http://127.0.0.1:" + port;
    }

    public HttpResponse<String> send(String method, String path, String body, String... headers) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(20))
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (body != null) {
            b.header("Content-Type", "application/json");
        }
        for (int i = 0; i + 1 < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        try {
            return client.send(b.build(), HttpResponse.BodyHandlers.ofString());
        } catch (Exception e) {
            throw new IllegalStateException(method + " " + path + ": " + e, e);
        }
    }

    public HttpResponse<String> get(String path, String... headers) {
        return send("GET", path, null, headers);
    }

    public HttpResponse<String> post(String path, String body, String... headers) {
        return send("POST", path, body, headers);
    }
}
