package dev.redisratelimit.example;

import dev.redisratelimit.spring.annotation.RateLimited;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Endpoint 6: endpoint 5 streamed as NDJSON, under the same policy "llm" (the
 * same slots, bucket, budget and global window). The starter keeps the permit
 * of a method that returns a {@link StreamingResponseBody} open until the body
 * is written: the in-flight lease is held to the last byte, and the budget is
 * settled from {@code #result.usedTokens()} — U after the last line, or the
 * tokens of the lines sent when the client went away mid-stream.
 */
@RestController
public class LlmStream {

    /** The fake model's stream: one line every 100 ms, U split evenly, then {"used_tokens": U}. */
    public static final class Tokens implements StreamingResponseBody {
        private final int lines;
        private final long used;
        private volatile long sent;

        Tokens(int lines, long used) {
            this.lines = lines;
            this.used = used;
        }

        /** What the budget is settled to: the tokens of the lines written so far. */
        public long usedTokens() {
            return sent;
        }

        @Override
        public void writeTo(OutputStream out) throws IOException {
            out.flush(); // the status and headers at once, before the first line
            for (int i = 0; i < lines; i++) {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted", e);
                }
                long k = i == lines - 1 ? used - sent : used / lines;
                // a client that left fails this write: the stream ends, settled to what was sent
                out.write(("{\"tokens\": " + k + "}\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
                sent += k;
            }
            out.write(("{\"used_tokens\": " + used + "}\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    @PostMapping("/llm/stream")
    @RateLimited(policy = "llm", key = "#apiKey", zone = "#zone.id()")
    public ResponseEntity<StreamingResponseBody> stream(@RequestHeader("X-Api-Key") String apiKey,
            @RequestHeader("X-Zone") LlmComplete.IanaZone zone, @RequestBody LlmComplete.Completion body,
            @RequestHeader(value = "X-Sleep-Ms", required = false) String sleepMs,
            @RequestHeader(value = "X-Used-Tokens", required = false) String usedTokens,
            @RequestHeader(value = "X-Fail", required = false) String fail) {
        if ("1".equals(fail)) {
            throw new LlmComplete.ModelFailure(); // a 500 before the first byte; the estimate refunded
        }
        long n = body.maxTokens();
        long used = Math.min(LlmComplete.headerLong(usedTokens, n / 2), n); // above N counts as N
        int lines = (int) Math.max(1, Math.min(LlmComplete.headerLong(sleepMs, 100) / 100, 10_000));
        return ResponseEntity.ok().contentType(MediaType.parseMediaType("application/x-ndjson")).body(new Tokens(lines, used));
    }
}
