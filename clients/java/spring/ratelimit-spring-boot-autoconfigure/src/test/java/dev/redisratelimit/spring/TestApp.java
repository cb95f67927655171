package dev.redisratelimit.spring;

import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.Map;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigurationExcludeFilter;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.context.TypeExcludeFilter;
import org.springframework.context.annotation.ComponentScan;
import org.springframework.context.annotation.FilterType;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * The app the starter's tests drive over HTTP: one endpoint per feature, the
 * same endpoints and policies as the WebFlux tests' ReactiveTestApp (the
 * contract both run: {@code AnnotationHttpContract}). Its
 * package holds the starter's own classes too: the scan leaves out the
 * WebFlux adapter's (registered by the auto-configuration in a reactive app).
 */
@SpringBootConfiguration
@EnableAutoConfiguration
@ComponentScan(excludeFilters = {@ComponentScan.Filter(type = FilterType.CUSTOM, classes = TypeExcludeFilter.class),
        @ComponentScan.Filter(type = FilterType.CUSTOM, classes = AutoConfigurationExcludeFilter.class),
        @ComponentScan.Filter(type = FilterType.REGEX, pattern = "dev\\.redisratelimit\\.spring\\.reactive\\..*")})
public class TestApp {

    @RestController
    public static class Endpoints {

        @GetMapping("/one")
        @RateLimited(policy = "one", limits = @Limit(name = "per-key", count = 10, window = "60s"), key = "#request.getHeader('X-Key')")
        public Map<String, Object> one() {
            return Map.of("ok", true);
        }

        // A cost the client chooses (a header): CLIENTS.md §5, what the policy cannot take is a 400.
        @GetMapping("/costly")
        @RateLimited(policy = "costly", key = "#request.getHeader('X-Key')",
                limits = @Limit(name = "w", count = 10, window = "60s", cost = "#request.getHeader('X-Cost')"))
        public Map<String, Object> costly() {
            return Map.of("ok", true);
        }

        @GetMapping("/two")
        @RateLimited(policy = "two", key = "#request.getHeader('X-Key')",
                limits = {@Limit(name = "short", count = 2, window = "10s"), @Limit(name = "long", count = 5, window = "1h")})
        public Map<String, Object> two() {
            return Map.of("ok", true);
        }

        @PostMapping("/work")
        @RateLimited(policy = "work", key = "#request.getHeader('X-Key')", limits = {
                @Limit(name = "inflight", type = LimitType.CONCURRENCY, count = 2, ttl = "60s"),
                @Limit(name = "tokens", type = LimitType.QUOTA, period = QuotaPeriod.DAY, count = 1000, zone = "UTC",
                        cost = "#estimate", settle = "#result['used']")})
        public Map<String, Object> work(@RequestParam long estimate, @RequestParam long used, @RequestParam(defaultValue = "0") long delayMs,
                @RequestParam(defaultValue = "false") boolean fail) throws InterruptedException {
            Thread.sleep(delayMs);
            if (fail) {
                throw new IllegalStateException("the work failed");
            }
            return Map.of("used", used);
        }

        @GetMapping("/mixed")
        @RateLimited(policy = "mixed", key = "#request.getHeader('X-Key')", limits = {
                @Limit(name = "per", count = 5, window = "60s"),
                @Limit(name = "all", count = 3, window = "60s", global = true)})
        public Map<String, Object> mixed() {
            return Map.of("ok", true);
        }

        @GetMapping("/ocr")
        @RateLimited(policy = "ocr", by = KeyBy.USER)
        public Map<String, Object> ocr() {
            return Map.of("ok", true);
        }

        @GetMapping("/default")
        @RateLimited(onRedisDown = OnRedisDown.FAIL_OPEN)
        public Map<String, Object> byDefault() {
            return Map.of("ok", true);
        }

        @GetMapping("/closed")
        @RateLimited(policy = "closed", limits = @Limit(name = "c", count = 100, window = "60s"), onRedisDown = OnRedisDown.FAIL_CLOSED)
        public Map<String, Object> closed() {
            return Map.of("ok", true);
        }

        @GetMapping("/open")
        @RateLimited(policy = "open", limits = @Limit(name = "o", count = 100, window = "60s"), onRedisDown = OnRedisDown.FAIL_OPEN)
        public Map<String, Object> open() {
            return Map.of("ok", true);
        }

        @GetMapping("/local")
        @RateLimited(policy = "local", limits = @Limit(name = "l", count = 3, window = "60s"), onRedisDown = OnRedisDown.LOCAL)
        public Map<String, Object> local() {
            return Map.of("ok", true);
        }

        /** LOCAL with an estimate settled from the result (RedisDownContract: charged and settled while Redis is down). */
        @GetMapping("/local/llm")
        @RateLimited(policy = "local-llm", key = "#request.getParameter('k')", onRedisDown = OnRedisDown.LOCAL,
                limits = @Limit(name = "tokens", count = 10_000, window = "60s", cost = "5000", settle = "#result['used']"))
        public Map<String, Object> localLlm(@RequestParam long used) {
            return Map.of("used", used);
        }

        // A stream whose permit lasts to its last byte: a line every gapMs, lines times (StarterHttpTest).
        @PostMapping("/stream")
        @RateLimited(policy = "stream", key = "#request.getHeader('X-Key')",
                limits = @Limit(name = "inflight", type = LimitType.CONCURRENCY, count = 2, ttl = "60s"))
        public org.springframework.http.ResponseEntity<org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody> stream(
                @RequestParam int lines, @RequestParam long gapMs) {
            return org.springframework.http.ResponseEntity.ok().contentType(org.springframework.http.MediaType.APPLICATION_NDJSON).body(out -> {
                for (int i = 0; i < lines; i++) {
                    // 16 KiB a line: more than the container's response buffer, so each line leaves at once
                    out.write(("{\"line\": " + i + ", \"pad\": \"" + "x".repeat(16_384) + "\"}\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
                    out.flush();
                    try {
                        Thread.sleep(gapMs);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new java.io.IOException(e);
                    }
                }
            });
        }

        @GetMapping("/nullkey")
        @RateLimited(policy = "nullkey", limits = @Limit(name = "n", count = 5, window = "10s"), key = "#request.getHeader('X-None')")
        public Map<String, Object> nullKey() {
            return Map.of("ok", true);
        }

        @GetMapping("/off")
        @RateLimited(policy = "off", limits = @Limit(name = "q", type = LimitType.QUOTA, count = 0, period = QuotaPeriod.DAY))
        public Map<String, Object> off() {
            return Map.of("ok", true);
        }

        @GetMapping("/bucket")
        @RateLimited(policy = "bucket", key = "#request.getHeader('X-Key')",
                limits = @Limit(name = "rate", type = LimitType.TOKEN_BUCKET, count = 60, window = "1h", burst = 3))
        public Map<String, Object> bucket() {
            return Map.of("ok", true);
        }

        @GetMapping("/ip")
        @RateLimited(policy = "ip", by = KeyBy.IP, limits = @Limit(name = "per-ip", count = 100, window = "60s"))
        public String ip() {
            return "ok";
        }

        @GetMapping("/user")
        @RateLimited(policy = "user", by = KeyBy.USER, limits = @Limit(name = "per-user", count = 1, window = "60s"))
        public String user() {
            return "ok";
        }

        @PostMapping("/once")
        @RateLimited(policy = "once", key = "#request.getHeader('X-Key')", preventDuplicate = "10s",
                limits = @Limit(name = "per", count = 100, window = "60s"))
        public String once(@org.springframework.web.bind.annotation.RequestBody Map<String, Object> body) {
            return "ok";
        }

        @GetMapping("/login")
        @RateLimited(policy = "login", by = KeyBy.IP_AND_PATH,
                limits = @Limit(name = "login", type = LimitType.LOCKOUT, count = 2, window = "10s", lockTime = "30s"))
        public Map<String, Object> login() {
            return Map.of("ok", true);
        }

        // Two @RateLimited on one method (a per-key limit and a global budget): one decision, one RL.ALL.
        @GetMapping("/pair")
        @RateLimited(policy = "pair-key", key = "#request.getHeader('X-Key')", limits = @Limit(name = "per-key", count = 3, window = "10s"))
        @RateLimited(policy = "pair-all", by = KeyBy.GLOBAL, limits = @Limit(name = "everyone", count = 5, window = "1h"))
        public Map<String, Object> pair() {
            return Map.of("ok", true);
        }

        // Two @RateLimited, each with a lease or an estimate settled by its own expression.
        @PostMapping("/pair/work")
        @RateLimited(policy = "pw-key", key = "#request.getHeader('X-Key')", limits = {
                @Limit(name = "inflight", type = LimitType.CONCURRENCY, count = 2, ttl = "60s"),
                @Limit(name = "tokens", type = LimitType.QUOTA, period = QuotaPeriod.DAY, count = 1000, zone = "UTC",
                        cost = "#estimate", settle = "#result['used']")})
        @RateLimited(policy = "pw-all", key = "#request.getHeader('X-Key')", limits = @Limit(name = "all-tokens", type = LimitType.QUOTA,
                period = QuotaPeriod.DAY, count = 100_000, zone = "UTC", cost = "#estimate * 2", settle = "#result['used'] * 2"))
        public Map<String, Object> pairWork(@RequestParam long estimate, @RequestParam long used,
                @RequestParam(defaultValue = "false") boolean fail) {
            if (fail) {
                throw new IllegalStateException("the work failed");
            }
            return Map.of("used", used);
        }
    }
}
