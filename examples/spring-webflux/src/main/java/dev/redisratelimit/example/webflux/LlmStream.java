package dev.redisratelimit.example.webflux;

import dev.redisratelimit.spring.annotation.RateLimited;
import java.time.Duration;
import org.springframework.http.MediaType;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Endpoint 6: endpoint 5 streamed as NDJSON under the same policy "llm" (the
 * same slots, bucket, budget and global window). The starter holds the permit
 * of a method returning a Flux until the Flux ends: the in-flight lease is
 * kept to the last line, and the budget is settled from
 * {@code #result.usedTokens()} on the Flux's last element — U after the last
 * line, or, when the client goes away mid-stream (the Flux is cancelled), the
 * tokens of the lines emitted so far.
 */
@RestController
public class LlmStream {

    /** One NDJSON line ({@link NdjsonLines} writes it): {"tokens": k}, the last one {"used_tokens": U}, or none. */
    public record Line(String ndjson, long usedTokens) {
        /**
         * No bytes: the stream's first element, so the status and headers go out at once (WebFlux commits the
         * response at its first element) rather than with the first line, 100 ms of "model" later.
         */
        static final Line HEADERS = new Line("", 0);

        static Line tokens(long k, long sentSoFar) {
            return new Line("{\"tokens\": " + k + "}\n", sentSoFar);
        }

        static Line last(long used) {
            return new Line("{\"used_tokens\": " + used + "}\n", used);
        }
    }

    @PostMapping(value = "/llm/stream", produces = MediaType.APPLICATION_NDJSON_VALUE)
    @RateLimited(policy = "llm", key = "#apiKey", zone = "#zone.id()")
    public Flux<Line> stream(@RequestHeader("X-Api-Key") String apiKey, @RequestHeader("X-Zone") LlmComplete.IanaZone zone,
            @RequestBody LlmComplete.Completion body, @RequestHeader(value = "X-Sleep-Ms", required = false) String sleepMs,
            @RequestHeader(value = "X-Used-Tokens", required = false) String usedTokens,
            @RequestHeader(value = "X-Fail", required = false) String fail) {
        if ("1".equals(fail)) {
            throw new LlmComplete.ModelFailure(); // a 500 before the first byte; the estimate refunded
        }
        long n = body.maxTokens();
        long used = Math.min(LlmComplete.headerLong(usedTokens, n / 2), n); // above N counts as N
        int lines = (int) Math.max(1, Math.min(LlmComplete.headerLong(sleepMs, 100) / 100, 10_000));
        // one line every 100 ms, U split evenly, the last line taking the remainder
        Flux<Line> tokens = Flux.interval(Duration.ofMillis(100)).take(lines).map(i -> {
            long before = i * (used / lines);
            long after = i == lines - 1 ? used : before + used / lines;
            return Line.tokens(after - before, after);
        });
        return Flux.concat(Mono.just(Line.HEADERS), tokens, Mono.fromSupplier(() -> Line.last(used)));
    }
}
