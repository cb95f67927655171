package dev.redisratelimit.spring.web;

import java.io.IOException;
import java.io.OutputStream;
import java.util.function.BiConsumer;
import org.springframework.http.ResponseEntity;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * A {@code @RateLimited} method that returns a {@link StreamingResponseBody}
 * (bare or in a {@link ResponseEntity}) has its body written after it
 * returned, on Spring MVC's async executor. The permit must last as long as
 * the stream (CLIENTS.md §4: closed once the response is fully sent), so the
 * body is wrapped: when its {@code writeTo} ends — the last byte written, or
 * an exception such as the client going away — the permit is closed with the
 * original body as {@code #result}, so a settle expression reads what it sent.
 * Only loaded when spring-webmvc is on the class path.
 */
final class Streams {

    private Streams() {
    }

    /** {@code result} with its stream wrapped, or {@code result} itself when it is no stream. */
    static Object hold(Object result, BiConsumer<Object, Boolean> close) {
        if (result instanceof StreamingResponseBody body) {
            return wrap(body, close);
        }
        if (result instanceof ResponseEntity<?> re && re.getBody() instanceof StreamingResponseBody body) {
            return ResponseEntity.status(re.getStatusCode()).headers(re.getHeaders()).body(wrap(body, close));
        }
        return result;
    }

    private static StreamingResponseBody wrap(StreamingResponseBody body, BiConsumer<Object, Boolean> close) {
        return new StreamingResponseBody() {
            @Override
            public void writeTo(OutputStream out) throws IOException {
                boolean failed = true;
                try {
                    body.writeTo(out);
                    out.flush(); // the last byte sent before the permit closes
                    failed = false;
                } finally {
                    close.accept(body, failed);
                }
            }
        };
    }
}
