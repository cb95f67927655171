package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.it.support.Workload;
import dev.redisratelimit.lettuce.LettuceTransport;
import dev.redisratelimit.springdata.SpringDataTransport;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.data.redis.connection.RedisClusterConfiguration;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * The workload through every transport, standalone and on a three-primary
 * Cluster; on the Cluster, every command goes to its key's node: no MOVED
 * ({@code errorstat_MOVED} in {@code INFO errorstats}, summed over the nodes).
 */
@ExtendWith(RedisServers.class)
class TransportsTest {

    @Test
    void lettuceStandalone(RedisServers.Standalone server) {
        RedisClient redis = RedisClient.create(server.uri());
        try (RateLimitClient rl = new RateLimitClient(LettuceTransport.create(redis))) {
            Workload.run(rl);
        } finally {
            redis.shutdown();
        }
    }

    @Test
    void lettuceCluster(RedisServers.Cluster cluster) {
        long moved = cluster.movedErrors();
        List<RedisURI> seeds = cluster.ports().stream().map(p -> RedisURI.create("127.0.0.1", p)).toList();
        RedisClusterClient redis = RedisClusterClient.create(seeds);
        try (RateLimitClient rl = new RateLimitClient(LettuceTransport.create(redis))) {
            Workload.run(rl);
        } finally {
            redis.shutdown();
        }
        assertEquals(moved, cluster.movedErrors(), "MOVED answered to the Lettuce Cluster transport");
    }

    @Test
    void springDataLettuceStandalone(RedisServers.Standalone server) {
        withFactory(new LettuceConnectionFactory(new RedisStandaloneConfiguration("127.0.0.1", server.port())));
    }

    @Test
    void springDataJedisStandalone(RedisServers.Standalone server) {
        withFactory(new JedisConnectionFactory(new RedisStandaloneConfiguration("127.0.0.1", server.port())));
    }

    @Test
    void springDataLettuceCluster(RedisServers.Cluster cluster) {
        long moved = cluster.movedErrors();
        withFactory(new LettuceConnectionFactory(clusterConfig(cluster)));
        assertEquals(moved, cluster.movedErrors(), "MOVED answered to Spring Data's Lettuce driver");
    }

    @Test
    void springDataJedisCluster(RedisServers.Cluster cluster) {
        long moved = cluster.movedErrors();
        withFactory(new JedisConnectionFactory(clusterConfig(cluster)));
        assertEquals(moved, cluster.movedErrors(), "MOVED answered to Spring Data's Jedis driver");
    }

    private static RedisClusterConfiguration clusterConfig(RedisServers.Cluster cluster) {
        return new RedisClusterConfiguration(cluster.ports().stream().map(p -> "127.0.0.1:" + p).toList());
    }

    private static void withFactory(RedisConnectionFactory factory) {
        try {
            if (factory instanceof LettuceConnectionFactory l) {
                l.afterPropertiesSet();
                l.start();
            } else if (factory instanceof JedisConnectionFactory j) {
                j.afterPropertiesSet();
                j.start();
            }
            Workload.run(new RateLimitClient(SpringDataTransport.of(factory)));
        } finally {
            if (factory instanceof LettuceConnectionFactory l) {
                l.destroy();
            } else if (factory instanceof JedisConnectionFactory j) {
                j.destroy();
            }
        }
    }
}
