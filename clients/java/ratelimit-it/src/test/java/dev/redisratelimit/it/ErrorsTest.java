package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.Clause;
import dev.redisratelimit.client.ModuleNotLoadedException;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.QuotaLimit;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.RateLimitException;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.client.SlidingWindow;
import dev.redisratelimit.client.TokenBucket;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;

/** Server errors carry the server's text; arguments the module would refuse never reach Redis. */
@ExtendWith(RedisServers.class)
class ErrorsTest {

    static RedisClient redis;
    static LettuceTransport lettuce;
    static final AtomicInteger SENT = new AtomicInteger();
    static RateLimitClient rl;

    @BeforeAll
    static void connect(RedisServers.Standalone server) {
        redis = RedisClient.create(server.uri());
        lettuce = LettuceTransport.create(redis);
        // counts what reaches the transport, to show refused arguments never do
        rl = new RateLimitClient(new RateLimitTransport() {
            @Override
            public CompletionStage<Object> execute(RedisCall call) {
                SENT.incrementAndGet();
                return lettuce.execute(call);
            }
        });
    }

    @AfterAll
    static void close() {
        lettuce.close();
        redis.shutdown();
    }

    @Test
    void serverErrorsCarryTheServersText() {
        String key = "str:" + UUID.randomUUID();
        redis.connect().sync().set(key, "x");
        RateLimitException wrongType = assertThrows(RateLimitException.class, () -> rl.check(key, SlidingWindow.of(1, Duration.ofSeconds(1))));
        assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value", wrongType.getMessage());
        // the same error through the async client: the stage fails with it
        RateLimitException async = assertThrows(RateLimitException.class, () -> {
            try {
                rl.async().check(key, SlidingWindow.of(1, Duration.ofSeconds(1))).toCompletableFuture().join();
            } catch (java.util.concurrent.CompletionException e) {
                throw e.getCause();
            }
        });
        assertTrue(async.getMessage().startsWith("WRONGTYPE"), async.getMessage());
    }

    @Test
    void argumentsTheModuleRefusesAreRefusedBeforeAnyCall() {
        int before = SENT.get();
        SlidingWindow ok = SlidingWindow.of(5, Duration.ofSeconds(1));
        List<Executable> refused = List.of(
                // a window of 0
                () -> rl.check("k", SlidingWindow.of(5, Duration.ZERO)),
                () -> rl.throttle("k", new TokenBucket(1, 1, Duration.ZERO)),
                () -> rl.lease("k", 1, Duration.ZERO),
                // a cost above the cap: the smallest count, and 10000
                () -> rl.check("k", List.of(ok), Options.none().withCost(6)),
                () -> rl.check("k", List.of(SlidingWindow.of(20_000, Duration.ofSeconds(1))), Options.none().withCost(10_001)),
                () -> rl.throttle("k", List.of(new TokenBucket(3, 1, Duration.ofSeconds(1))), Options.none().withCost(4)),
                () -> rl.lease("k", 2, Duration.ofSeconds(1), Options.none().withCost(3)),
                () -> rl.check("k", List.of(ok), Options.none().withCost(0)),
                // more than 64 rules
                () -> rl.check("k", Collections.nCopies(65, ok), Options.none()),
                () -> rl.all(Clause.check("k", Collections.nCopies(65, ok).toArray(SlidingWindow[]::new))),
                // an unknown zone, and offsets the module cannot take
                () -> rl.quota("k", "Mars/Olympus_Mons", QuotaLimit.of(QuotaPeriod.DAY, 1)),
                () -> rl.quota("k", ZoneOffset.ofHoursMinutesSeconds(1, 0, 30), QuotaLimit.of(QuotaPeriod.DAY, 1)),
                // and the rest of the module's argument rules
                () -> rl.quota("k", ZoneOffset.UTC, QuotaLimit.of(QuotaPeriod.DAY, 1), QuotaLimit.of(QuotaPeriod.DAY, 2)),
                () -> rl.throttle("k", new TokenBucket(1, 1, Duration.ofSeconds(1)), new TokenBucket(2, 2, Duration.ofSeconds(1))),
                () -> rl.dayhour("same", "same", 1, 1, Duration.ofHours(1), Duration.ofMinutes(1)),
                () -> rl.lockcount("same", "same", Duration.ofHours(1), 1, Duration.ofMinutes(1)),
                () -> rl.release("k", "a b"),
                () -> rl.release("k", "tok", "tok"),
                () -> rl.renew("k", Duration.ofSeconds(1), "has#hash"),
                () -> rl.all(Clause.lease("k", 1, Duration.ofSeconds(1), null)),
                () -> rl.all(Clause.check("k", ok), Clause.check("k", ok)),
                () -> rl.peek("k", List.of(ok), Options.none().withRefund()),
                () -> rl.check("k", List.of(ok), Options.none().withReserve(Duration.ofSeconds(1))),
                () -> rl.check("k", List.of(SlidingWindow.of(5, Duration.ofNanos(1_500_000))), Options.none()));
        List<String> messages = new ArrayList<>();
        for (Executable call : refused) {
            messages.add(assertThrows(IllegalArgumentException.class, call).getMessage());
        }
        assertEquals(before, SENT.get(), "a refused argument reached Redis");
        assertTrue(messages.get(0).contains("window"), messages.get(0));
        assertTrue(messages.get(3).contains("cost") && messages.get(3).contains("from 1 to 5"), messages.get(3));
        assertTrue(messages.get(8).contains("64"), messages.get(8));
        assertTrue(messages.get(10).startsWith("invalid zone 'Mars/Olympus_Mons'"), messages.get(10));
    }

    @Test
    void theModuleCheck(RedisServers.Plain plain, RedisServers.Standalone withModule) {
        RedisClient bare = RedisClient.create("redis://127.0.0.1:" + plain.port());
        try (RateLimitClient client = new RateLimitClient(LettuceTransport.create(bare))) {
            ModuleNotLoadedException e = assertThrows(ModuleNotLoadedException.class, client::verifyModule);
            assertTrue(e.getMessage().contains("redis-ratelimit module is not loaded") && e.getMessage().contains("--loadmodule"), e.getMessage());
        } finally {
            bare.shutdown();
        }
        assertDoesNotThrow(rl::verifyModule);
    }
}
