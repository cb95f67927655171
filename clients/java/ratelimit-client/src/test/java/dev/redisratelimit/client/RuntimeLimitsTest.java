package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Runtime limits: a slow read begun before a change never puts the old value back after a later read applied the new one. */
class RuntimeLimitsTest {

    /** Holds every HGETALL until the test answers it. */
    static final class Pending implements RateLimitTransport {
        final List<CompletableFuture<Object>> reads = new CopyOnWriteArrayList<>();

        @Override
        public CompletionStage<Object> execute(RedisCall call) {
            CompletableFuture<Object> f = new CompletableFuture<>();
            reads.add(f);
            return f;
        }
    }

    @Test
    void aReadOvertakenByALaterOneIsDropped() throws Exception {
        Pending redis = new Pending();
        RuntimeLimits limits = new RuntimeLimits(redis, "", 5000);
        Limit hour = Limit.quota("hour", null, QuotaPeriod.HOUR, 5);
        CompletableFuture<Void> slow = CompletableFuture.runAsync(limits::refresh); // the background refresher's read
        await(redis, 1);
        CompletableFuture<Void> fresh = CompletableFuture.runAsync(limits::refresh); // the read after a change
        await(redis, 2);
        redis.reads.get(1).complete(List.of("ocr/hour", "3"));
        fresh.get(5, TimeUnit.SECONDS);
        assertThat(limits.count("ocr", hour)).isEqualTo(3);
        redis.reads.get(0).complete(List.of()); // the old state, answered last
        slow.get(5, TimeUnit.SECONDS);
        assertThat(limits.count("ocr", hour)).isEqualTo(3);
        CompletableFuture<Void> next = CompletableFuture.runAsync(limits::refresh); // a later read applies
        await(redis, 3);
        redis.reads.get(2).complete(List.of());
        next.get(5, TimeUnit.SECONDS);
        assertThat(limits.count("ocr", hour)).isEqualTo(5);
    }

    static void await(Pending redis, int reads) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (redis.reads.size() < reads && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertThat(redis.reads).hasSize(reads);
    }
}
