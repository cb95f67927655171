package dev.redisratelimit.bench;

import dev.redisratelimit.bench.seed.RateRule;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.core.io.ClassPathResource;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.core.RedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.data.redis.core.script.RedisScript;
import org.springframework.data.redis.serializer.GenericToStringSerializer;
import org.springframework.data.redis.serializer.StringRedisSerializer;
import org.springframework.scripting.support.ResourceScriptSource;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * One Spring MVC app, one endpoint per contestant, the same 2 ms of work behind
 * each: (a) /starter with the starter's {@code @RateLimited} (three sliding
 * windows: one RL.ALL), (b) /seed with seed 000's {@code @RateLimiter} aspect
 * and its Lua script (the same three rules), (c) /none unguarded, (d)
 * /roundtrip: one PING through the starter's transport, no limiter. The three
 * rules are seed 000's shape at sizes no caller of the benchmark reaches, so
 * every request is admitted and does the work.
 */
@SpringBootApplication
public class BenchApp {

    /** The endpoint's own work: a 2 ms wait (a downstream call), the same for every contestant. */
    static String work() throws InterruptedException {
        Thread.sleep(2);
        return "ok";
    }

    @RestController
    public static class Endpoints {

        private final RateLimitTransport transport;

        public Endpoints(RateLimitTransport transport) {
            this.transport = transport;
        }

        @GetMapping("/starter")
        @RateLimited(policy = "bench", by = KeyBy.USER, limits = {
                @Limit(name = "burst", count = 50, window = "10s"),
                @Limit(name = "minute", count = 500, window = "60s"),
                @Limit(name = "hour", count = 5000, window = "1h")})
        public String starter() throws InterruptedException {
            return work();
        }

        @GetMapping("/seed")
        @dev.redisratelimit.bench.seed.RateLimiter(limitType = dev.redisratelimit.bench.seed.LimitType.USER_ID, rules = {
                @RateRule(count = 50, time = 10, timeUnit = TimeUnit.SECONDS),
                @RateRule(count = 500, time = 60, timeUnit = TimeUnit.SECONDS),
                @RateRule(count = 5000, time = 1, timeUnit = TimeUnit.HOURS)})
        public String seed() throws InterruptedException {
            return work();
        }

        @GetMapping("/none")
        public String none() throws InterruptedException {
            return work();
        }

        /**
         * (d), the floor under (a): one PING through the starter's own
         * transport (Spring Data's Lettuce connection), waited for as (a)
         * waits for its RL.ALL, and no limiter logic. (a) minus (d) is what
         * the starter adds beyond the one round trip it cannot avoid.
         */
        @GetMapping("/roundtrip")
        public String roundtrip() throws Exception {
            transport.execute(new RedisCall("PING", List.of(), -1)).toCompletableFuture().get(1, TimeUnit.SECONDS);
            return work();
        }
    }

    /**
     * Seed 000's template: String keys; values written as their decimal text
     * (the seed's RuoYi writes them as JSON, the same bytes for a Long), so the
     * script's tonumber(ARGV[i]) reads the rules.
     */
    @Bean
    RedisTemplate<String, Object> redisTemplate(RedisConnectionFactory factory) {
        RedisTemplate<String, Object> t = new RedisTemplate<>();
        t.setConnectionFactory(factory);
        t.setKeySerializer(new StringRedisSerializer());
        t.setValueSerializer(new GenericToStringSerializer<>(Object.class));
        return t;
    }

    /** Seed 000's RedisScript&lt;Boolean&gt; (EVALSHA through RedisTemplate.execute). */
    @Bean
    RedisScript<Boolean> limitScript() {
        DefaultRedisScript<Boolean> s = new DefaultRedisScript<>();
        s.setScriptSource(new ResourceScriptSource(new ClassPathResource("seed000_limit.lua")));
        s.setResultType(Boolean.class);
        return s;
    }
}
