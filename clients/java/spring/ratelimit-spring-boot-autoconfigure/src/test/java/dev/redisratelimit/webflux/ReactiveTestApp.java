package dev.redisratelimit.webflux;

import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.time.Duration;
import java.util.Map;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The reactive app the WebFlux tests drive over HTTP (Reactor Netty): the
 * MVC test app's endpoints and policies on methods returning Mono and Flux
 * (the contract both run: {@code AnnotationHttpContract}), and what only
 * WebFlux has (a streamed result, a plain return value on the event loop).
 */
@SpringBootApplication
public class ReactiveTestApp {

    @RestController
    public static class Endpoints {

        @GetMapping("/one")
        @RateLimited(policy = "one", limits = @Limit(name = "per-key", count = 10, window = "60s"), key = "#request.headers.getFirst('X-Key')")
        public Mono<Map<String, Object>> one() {
            return Mono.just(Map.of("ok", true));
        }

        // A cost the client chooses (a header): CLIENTS.md §5, what the policy cannot take is a 400.
        @GetMapping("/costly")
        @RateLimited(policy = "costly", key = "#request.headers.getFirst('X-Key')",
                limits = @Limit(name = "w", count = 10, window = "60s", cost = "#request.headers.getFirst('X-Cost')"))
        public Mono<Map<String, Object>> costly() {
            return Mono.just(Map.of("ok", true));
        }

        @GetMapping("/mixed")
        @RateLimited(policy = "mixed", key = "#request.headers.getFirst('X-Key')", limits = {
                @Limit(name = "per", count = 5, window = "60s"),
                @Limit(name = "all", count = 3, window = "60s", global = true)})
        public Mono<Map<String, Object>> mixed() {
            return Mono.just(Map.of("ok", true));
        }

        @GetMapping("/ocr")
        @RateLimited(policy = "ocr", by = KeyBy.USER)
        public Mono<Map<String, Object>> ocr() {
            return Mono.just(Map.of("ok", true));
        }

        @GetMapping("/nullkey")
        @RateLimited(policy = "nullkey", limits = @Limit(name = "n", count = 5, window = "10s"), key = "#request.headers.getFirst('X-None')")
        public Mono<Map<String, Object>> nullKey() {
            return Mono.just(Map.of("ok", true));
        }

        @GetMapping("/off")
        @RateLimited(policy = "off", limits = @Limit(name = "q", type = LimitType.QUOTA, count = 0, period = QuotaPeriod.DAY))
        public Mono<Map<String, Object>> off() {
            return Mono.just(Map.of("ok", true));
        }

        @GetMapping("/bucket")
        @RateLimited(policy = "bucket", key = "#request.headers.getFirst('X-Key')",
                limits = @Limit(name = "rate", type = LimitType.TOKEN_BUCKET, count = 60, window = "1h", burst = 3))
        public Mono<Map<String, Object>> bucket() {
            return Mono.just(Map.of("ok", true));
        }

        @GetMapping("/login")
        @RateLimited(policy = "login", by = KeyBy.IP_AND_PATH,
                limits = @Limit(name = "login", type = LimitType.LOCKOUT, count = 2, window = "10s", lockTime = "30s"))
        public Mono<Map<String, Object>> login() {
            return Mono.just(Map.of("ok", true));
        }

        // the same policy as the MVC TestApp's /two: both apps must answer alike
        @GetMapping("/two")
        @RateLimited(policy = "two", key = "#request.headers.getFirst('X-Key')",
                limits = {@Limit(name = "short", count = 2, window = "10s"), @Limit(name = "long", count = 5, window = "1h")})
        public Mono<Map<String, Object>> two() {
            return Mono.just(Map.of("ok", true));
        }

        @PostMapping("/work")
        @RateLimited(policy = "work", key = "#request.headers.getFirst('X-Key')", limits = {
                @Limit(name = "inflight", type = LimitType.CONCURRENCY, count = 2, ttl = "60s"),
                @Limit(name = "tokens", type = LimitType.QUOTA, period = QuotaPeriod.DAY, count = 1000, zone = "UTC",
                        cost = "#estimate", settle = "#result['used']")})
        public Mono<Map<String, Object>> work(@RequestParam long estimate, @RequestParam long used,
                @RequestParam(defaultValue = "0") long delayMs, @RequestParam(defaultValue = "false") boolean fail) {
            Mono<Long> wait = delayMs > 0 ? Mono.delay(Duration.ofMillis(delayMs)) : Mono.just(0L);
            return wait.flatMap(x -> fail ? Mono.error(new IllegalStateException("the work failed")) : Mono.just(Map.of("used", used)));
        }

        // A slow stream holding the only lease of its key; #result is its last element.
        @GetMapping("/stream")
        @RateLimited(policy = "stream", key = "#request.headers.getFirst('X-Key')", limits = {
                @Limit(name = "inflight", type = LimitType.CONCURRENCY, count = 1, ttl = "60s"),
                @Limit(name = "chunks", type = LimitType.QUOTA, period = QuotaPeriod.DAY, count = 1000, zone = "UTC",
                        cost = "#n", settle = "#result")})
        public Flux<Long> stream(@RequestParam long n, @RequestParam(defaultValue = "0") long everyMs) {
            Flux<Long> f = Flux.range(1, (int) n).map(Integer::longValue);
            return everyMs > 0 ? f.delayElements(Duration.ofMillis(everyMs)) : f;
        }

        @GetMapping("/ip")
        @RateLimited(policy = "ip", by = KeyBy.IP, limits = @Limit(name = "per-ip", count = 100, window = "60s"))
        public Mono<String> ip() {
            return Mono.just("ok");
        }

        @GetMapping("/user")
        @RateLimited(policy = "user", by = KeyBy.USER, limits = @Limit(name = "per-user", count = 1, window = "60s"))
        public Mono<String> user() {
            return Mono.just("ok");
        }

        @PostMapping("/once")
        @RateLimited(policy = "once", key = "#request.headers.getFirst('X-Key')", preventDuplicate = "10s",
                limits = @Limit(name = "per", count = 100, window = "60s"))
        public Mono<String> once(@RequestBody Map<String, Object> body) {
            return Mono.just("ok");
        }

        @GetMapping("/plain")
        @RateLimited(policy = "plain", key = "'k'", limits = @Limit(name = "p", count = 100, window = "60s"))
        public String plain() {
            return "ok";
        }

        // Not rate-limited: a blocking call on the event loop, for BlockHound's sanity check.
        @GetMapping("/sleepy")
        public Mono<String> sleepy() {
            return Mono.fromCallable(() -> {
                Thread.sleep(1);
                return "slept";
            });
        }

        @GetMapping("/closed")
        @RateLimited(policy = "closed", limits = @Limit(name = "c", count = 100, window = "60s"), onRedisDown = OnRedisDown.FAIL_CLOSED)
        public Mono<String> closed() {
            return Mono.just("ok");
        }

        // A POST whose handler never reads its body (the keep-alive test: admitted and refused with the body unread).
        @PostMapping("/unread")
        @RateLimited(policy = "unread", key = "#request.headers.getFirst('X-Key')", onRedisDown = OnRedisDown.FAIL_CLOSED,
                limits = @Limit(name = "u", count = 1, window = "1h"))
        public Mono<String> unread() {
            return Mono.just("ok");
        }

        // Not rate-limited: the client's port, so a test can tell its requests shared one connection.
        @GetMapping("/peer")
        public Mono<String> peer(org.springframework.http.server.reactive.ServerHttpRequest request) {
            return Mono.just(Integer.toString(request.getRemoteAddress().getPort()));
        }

        @GetMapping("/open")
        @RateLimited(policy = "open", limits = @Limit(name = "o", count = 100, window = "60s"), onRedisDown = OnRedisDown.FAIL_OPEN)
        public Mono<String> open() {
            return Mono.just("ok");
        }

        /** LOCAL with an estimate settled from the result (RedisDownContract: charged and settled while Redis is down). */
        @GetMapping("/local/llm")
        @RateLimited(policy = "local-llm", key = "#request.queryParams.getFirst('k')", onRedisDown = OnRedisDown.LOCAL,
                limits = @Limit(name = "tokens", count = 10_000, window = "60s", cost = "5000", settle = "#result['used']"))
        public Mono<Map<String, Object>> localLlm(@RequestParam long used) {
            return Mono.just(Map.of("used", used));
        }

        @GetMapping("/local")
        @RateLimited(policy = "local", limits = @Limit(name = "l", count = 3, window = "60s"), onRedisDown = OnRedisDown.LOCAL)
        public Mono<String> local() {
            return Mono.just("ok");
        }

        // Two @RateLimited on one method (a per-key limit and a global budget): one decision, one RL.ALL.
        @GetMapping("/pair")
        @RateLimited(policy = "pair-key", key = "#request.headers.getFirst('X-Key')", limits = @Limit(name = "per-key", count = 3, window = "10s"))
        @RateLimited(policy = "pair-all", by = KeyBy.GLOBAL, limits = @Limit(name = "everyone", count = 5, window = "1h"))
        public Mono<Map<String, Object>> pair() {
            return Mono.just(Map.of("ok", true));
        }

        // Two @RateLimited, each with a lease or an estimate settled by its own expression.
        @PostMapping("/pair/work")
        @RateLimited(policy = "pw-key", key = "#request.headers.getFirst('X-Key')", limits = {
                @Limit(name = "inflight", type = LimitType.CONCURRENCY, count = 2, ttl = "60s"),
                @Limit(name = "tokens", type = LimitType.QUOTA, period = QuotaPeriod.DAY, count = 1000, zone = "UTC",
                        cost = "#estimate", settle = "#result['used']")})
        @RateLimited(policy = "pw-all", key = "#request.headers.getFirst('X-Key')", limits = @Limit(name = "all-tokens",
                type = LimitType.QUOTA, period = QuotaPeriod.DAY, count = 100_000, zone = "UTC", cost = "#estimate * 2",
                settle = "#result['used'] * 2"))
        public Mono<Map<String, Object>> pairWork(@RequestParam long estimate, @RequestParam long used,
                @RequestParam(defaultValue = "false") boolean fail) {
            return fail ? Mono.error(new IllegalStateException("the work failed")) : Mono.just(Map.of("used", used));
        }

        // fallbackMethod under WebFlux: a Mono falling back to a Mono (with the refusal), a Flux to a plain value.
        @GetMapping("/fallback/mono")
        @RateLimited(policy = "fb-mono", key = "#request.headers.getFirst('X-Key')", limits = @Limit(name = "fb", count = 1, window = "1h"),
                fallbackMethod = "later")
        public Mono<String> fallbackMono(@RequestParam String who) {
            return Mono.just("hello " + who);
        }

        public Mono<String> later(String who, dev.redisratelimit.client.RateLimitRefusedException refused) {
            return Mono.just("later " + who + " (" + refused.getDecision().policy() + ")");
        }

        @GetMapping("/fallback/flux")
        @RateLimited(policy = "fb-flux", key = "#request.headers.getFirst('X-Key')", limits = @Limit(name = "fb", count = 1, window = "1h"),
                fallbackMethod = "cached")
        public Flux<String> fallbackFlux() {
            return Flux.just("a", "b");
        }

        public String cached() {
            return "cached";
        }
    }
}
