package dev.redisratelimit.example.webflux;

import com.fasterxml.jackson.annotation.JsonProperty;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.time.Duration;
import java.time.ZoneId;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * Endpoint 5: an LLM call guarded by four limits in one RL.ALL (policy "llm"
 * in application.yml, shared with endpoint 6, {@link LlmStream}). The fake
 * model is a {@code Mono.delay}: a client that goes away cancels it, and the
 * budget is then settled to 0 (SERVICES.md: "0 when it raised or was cancelled").
 */
@RestController
public class LlmComplete {

    /** {"max_tokens": N}, N an integer from 1 to 100000 (else 400 before any Redis call). */
    public record Completion(@JsonProperty("max_tokens") Object maxTokensValue) {
        public Completion {
            if (!(maxTokensValue instanceof Integer || maxTokensValue instanceof Long)
                    || ((Number) maxTokensValue).longValue() < 1 || ((Number) maxTokensValue).longValue() > 100_000) {
                throw new IllegalArgumentException("max_tokens must be an integer from 1 to 100000");
            }
        }

        public long maxTokens() {
            return ((Number) maxTokensValue).longValue();
        }
    }

    /** An IANA zone name from the X-Zone header (a fixed offset or an unknown name is a 400). */
    public record IanaZone(String id) {
        public IanaZone {
            if (id == null || !ZoneId.getAvailableZoneIds().contains(id)) {
                throw new IllegalArgumentException("X-Zone must be an IANA time zone");
            }
        }
    }

    public record Answer(@JsonProperty("used_tokens") long usedTokens) {
    }

    /** The fake model's failure (X-Fail: 1): the app answers 500. */
    public static class ModelFailure extends RuntimeException {
        public ModelFailure() {
            super("the model failed");
        }
    }

    @PostMapping("/llm/complete")
    @RateLimited(policy = "llm", key = "#apiKey", zone = "#zone.id()")
    public Mono<Answer> complete(@RequestHeader("X-Api-Key") String apiKey, @RequestHeader("X-Zone") IanaZone zone,
            @RequestBody Completion body, @RequestHeader(value = "X-Sleep-Ms", required = false) String sleepMs,
            @RequestHeader(value = "X-Used-Tokens", required = false) String usedTokens,
            @RequestHeader(value = "X-Fail", required = false) String fail) {
        long n = body.maxTokens();
        long used = Math.min(headerLong(usedTokens, n / 2), n); // above N counts as N (SERVICES.md)
        Mono<Answer> model = "1".equals(fail) ? Mono.error(new ModelFailure()) : Mono.just(new Answer(used));
        return Mono.delay(Duration.ofMillis(Math.min(headerLong(sleepMs, 100), MAX_SLEEP_MS))).then(model);
    }

    /** A day: the longest fake model (X-Sleep-Ms beyond a long counts as Long.MAX_VALUE; no delay needs more). */
    static final long MAX_SLEEP_MS = 86_400_000L;

    /**
     * The fake model's knobs as every example app reads them: a non-negative integer, else the default
     * (never a 400: SERVICES.md lists no such bad input); one beyond a long counts as Long.MAX_VALUE.
     */
    static long headerLong(String value, long otherwise) {
        if (value == null || !value.matches("[0-9]+")) {
            return otherwise;
        }
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException e) {
            return Long.MAX_VALUE;
        }
    }
}
