package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.redisratelimit.client.Decision;
import dev.redisratelimit.client.LeaseDecision;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.SlidingWindow;
import dev.redisratelimit.client.TokenBucket;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import dev.redisratelimit.springdata.SpringDataTransport;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/** 50 threads on one key admit exactly the limit, through each transport. */
@ExtendWith(RedisServers.class)
class ConcurrencyTest {

    private static final int THREADS = 50;

    /** Runs {@code call} once on each of 50 threads released together; how many were admitted. */
    static int admitted(Callable<Boolean> call) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        try {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<Boolean>> results = new ArrayList<>();
            for (int i = 0; i < THREADS; i++) {
                results.add(pool.submit(() -> {
                    start.await();
                    return call.call();
                }));
            }
            start.countDown();
            int admitted = 0;
            for (Future<Boolean> f : results) {
                admitted += f.get() ? 1 : 0;
            }
            return admitted;
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void lettuce(RedisServers.Standalone server) throws Exception {
        RedisClient redis = RedisClient.create(server.uri());
        try (RateLimitClient rl = new RateLimitClient(LettuceTransport.create(redis))) {
            String window = "conc:w:" + UUID.randomUUID();
            assertEquals(17, admitted(() -> rl.check(window, SlidingWindow.of(17, Duration.ofMinutes(1))).admitted()));
            String bucket = "conc:b:" + UUID.randomUUID();
            assertEquals(9, admitted(() -> rl.throttle(bucket, new TokenBucket(9, 1, Duration.ofMinutes(1))).admitted()));
            String lease = "conc:l:" + UUID.randomUUID();
            assertEquals(4, admitted(() -> {
                LeaseDecision d = rl.lease(lease, 4, Duration.ofMinutes(1), Options.none().withToken(UUID.randomUUID().toString()));
                return d.admitted();
            }));
        } finally {
            redis.shutdown();
        }
    }

    @Test
    void springDataLettuceAsync(RedisServers.Standalone server) throws Exception {
        LettuceConnectionFactory factory = new LettuceConnectionFactory(new RedisStandaloneConfiguration("127.0.0.1", server.port()));
        factory.afterPropertiesSet();
        factory.start();
        try {
            RateLimitClient rl = new RateLimitClient(SpringDataTransport.of(factory));
            String window = "conc:lw:" + UUID.randomUUID();
            assertEquals(13, admitted(() -> rl.async().check(window, SlidingWindow.of(13, Duration.ofMinutes(1)))
                    .toCompletableFuture().get().admitted()));
        } finally {
            factory.destroy();
        }
    }

    @Test
    void springDataJedisPool(RedisServers.Standalone server) throws Exception {
        JedisConnectionFactory factory = new JedisConnectionFactory(new RedisStandaloneConfiguration("127.0.0.1", server.port()));
        factory.afterPropertiesSet();
        factory.start();
        try {
            RateLimitClient rl = new RateLimitClient(SpringDataTransport.of(factory));
            String window = "conc:jw:" + UUID.randomUUID();
            assertEquals(11, admitted(() -> {
                Decision d = rl.check(window, SlidingWindow.of(11, Duration.ofMinutes(1)));
                return d.admitted();
            }));
        } finally {
            factory.destroy();
        }
    }
}
