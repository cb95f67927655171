package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.Backend;
import dev.redisratelimit.client.FailMode;
import dev.redisratelimit.client.Limit;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitUnavailableException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.client.BackendTransport;
import dev.redisratelimit.client.FunctionsLibrary;
import dev.redisratelimit.client.LibraryNotLoadedException;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.QuotaLimit;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.RateLimitException;
import dev.redisratelimit.client.SlidingWindow;
import dev.redisratelimit.it.support.RedisProcess;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import dev.redisratelimit.springdata.SpringDataTransport;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.time.Duration;
import java.time.ZoneId;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.data.redis.connection.RedisClusterConfiguration;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;

/**
 * Backend FUNCTIONS on servers without the module: the library loaded when
 * absent or older, again after {@code Function not found} on the node that
 * answered it (Cluster: every primary used), a user without FUNCTION LOAD
 * told the command to run, the module's OOM error, zones.
 */
@ExtendWith(RedisServers.class)
class FunctionsBackendTest {


    private static final SlidingWindow FIVE = SlidingWindow.of(5, Duration.ofMinutes(1));

    private static long version(RedisProcess server) {
        String out = server.cli("FCALL", "rl_version", "0").trim();
        return out.matches("\\d+") ? Long.parseLong(out) : -1;
    }

    private static long loads(RedisProcess server) {
        for (String line : server.cli("INFO", "commandstats").split("\r?\n")) {
            if (line.startsWith("cmdstat_function|load:calls=")) {
                String rest = line.substring("cmdstat_function|load:calls=".length());
                return Long.parseLong(rest.substring(0, rest.indexOf(',')));
            }
        }
        return 0;
    }

    @Test
    void loadsTheLibraryDecidesAndLoadsItAgainWhenGone(RedisServers.Plain plain) {
        RedisProcess server = plain.server();
        server.cli("FUNCTION", "FLUSH");
        RedisClient redis = RedisClient.create("redis://127.0.0.1:" + plain.port());
        try (BackendTransport t = new BackendTransport(LettuceTransport.create(redis), Backend.FUNCTIONS)) {
            RateLimitClient rl = new RateLimitClient(t);
            rl.verifyModule();
            long want = FunctionsLibrary.versionOf(FunctionsLibrary.source());
            assertEquals(want, version(server));
            assertEquals(4, rl.check("j:fn", FIVE).remaining());
            assertEquals(3, rl.check("j:fn", FIVE).remaining());
            assertEquals(4, rl.check("j:fn", List.of(FIVE), Options.none().withRefund()).remaining());
            assertEquals(19, rl.quota("j:q", ZoneId.of("Asia/Shanghai"), QuotaLimit.of(QuotaPeriod.DAY, 20)).remaining());
            IllegalArgumentException dst = assertThrows(IllegalArgumentException.class,
                    () -> rl.quota("j:q2", ZoneId.of("Europe/Paris"), QuotaLimit.of(QuotaPeriod.DAY, 20)));
            assertTrue(dst.getMessage().contains("daylight saving"), dst.getMessage());
            assertNull(t.problem().toCompletableFuture().join());

            long loads = loads(server);
            rl.verifyModule(); // present and current: not loaded again
            assertEquals(loads, loads(server));

            server.cli("FUNCTION", "FLUSH"); // a flush, or a failover to a primary that never had it
            assertTrue(t.problem().toCompletableFuture().join().contains("Functions library is not loaded"));
            assertEquals(4, rl.check("j:fn2", FIVE).remaining());
            assertEquals(want, version(server));

            server.cli("CONFIG", "SET", "maxmemory", "1");
            try {
                RateLimitException oom = assertThrows(RateLimitException.class, () -> rl.check("j:fn2", FIVE));
                assertEquals("OOM command not allowed when used memory > 'maxmemory'.", oom.getMessage());
                assertEquals(5, rl.check("j:fn2", List.of(FIVE), Options.none().withRefund()).remaining());
            } finally {
                server.cli("CONFIG", "SET", "maxmemory", "0");
            }
        } finally {
            redis.shutdown();
        }
    }

    /** The jar's library with its {@code RL_VERSION} set to {@code v} (another client's release). */
    private static String withVersion(long v) {
        String source = FunctionsLibrary.source();
        String changed = source.replaceFirst("(?m)^(local\\s+(?:RL_)?VERSION\\s*=\\s*)\\d+", "$1" + v);
        assertEquals(v, FunctionsLibrary.versionOf(changed));
        return changed;
    }

    /** Starts a client with backend FUNCTIONS (its start-up check) and makes one decision with it. */
    private static void startAndDecide(int port, String key) {
        RedisClient redis = RedisClient.create("redis://127.0.0.1:" + port);
        try (BackendTransport t = new BackendTransport(LettuceTransport.create(redis), Backend.FUNCTIONS)) {
            RateLimitClient rl = new RateLimitClient(t);
            rl.verifyModule();
            assertEquals(4, rl.check(key, FIVE).remaining());
        } finally {
            redis.shutdown();
        }
    }

    // SPEC.md "The Functions library": a client loads it when absent or older than itself (rl_version), and
    // never replaces a newer one (another app's newer client loaded it), as in Python and Node.
    @Test
    void anOlderLibraryIsReplacedANewerOneKept(RedisServers.Plain plain) {
        RedisProcess server = plain.server();
        long mine = FunctionsLibrary.versionOf(FunctionsLibrary.source());
        RedisClient admin = RedisClient.create("redis://127.0.0.1:" + plain.port());
        try (var a = admin.connect()) {
            a.sync().functionLoad(withVersion(mine - 1), true);
            assertEquals(mine - 1, version(server));
            startAndDecide(plain.port(), "j:older");
            assertEquals(mine, version(server)); // replaced

            a.sync().functionLoad(withVersion(mine + 1), true);
        } finally {
            admin.shutdown();
        }
        try {
            long loads = loads(server);
            startAndDecide(plain.port(), "j:newer");
            assertEquals(mine + 1, version(server)); // kept, not downgraded
            assertEquals(loads, loads(server)); // no FUNCTION LOAD sent
        } finally {
            server.cli("FUNCTION", "FLUSH"); // the next test on this shared server starts without it
        }
    }

    @Test
    void aUserWithoutFunctionLoadIsToldTheCommandThenUsesAHandLoadedLibrary(RedisServers.Plain plain) {
        RedisProcess server = plain.server();
        server.cli("FUNCTION", "FLUSH");
        server.cli("ACL", "SETUSER", "japp", "on", ">pw", "~*", "+@all", "-function|load");
        RedisClient redis = RedisClient.create(RedisURI.builder().withHost("127.0.0.1").withPort(plain.port())
                .withAuthentication("japp", "pw".toCharArray()).build());
        try (BackendTransport t = new BackendTransport(LettuceTransport.create(redis), Backend.FUNCTIONS)) {
            RateLimitClient rl = new RateLimitClient(t);
            LibraryNotLoadedException e = assertThrows(LibraryNotLoadedException.class, rl::verifyModule);
            assertTrue(e.getMessage().contains("FUNCTION LOAD REPLACE"), e.getMessage());
            // what the operator runs once, as an administrator
            RedisClient admin = RedisClient.create("redis://127.0.0.1:" + plain.port());
            try (var c = admin.connect()) {
                c.sync().functionLoad(FunctionsLibrary.source(), true);
            } finally {
                admin.shutdown();
            }
            rl.verifyModule();
            assertEquals(4, rl.check("j:acl", FIVE).remaining());
        } finally {
            redis.shutdown();
            server.cli("ACL", "DELUSER", "japp");
        }
    }

    @Test
    void autoSwitchesToTheLibraryWhenTheModuleGoesMissing(RedisServers.Unloadable server) {
        RedisClient redis = RedisClient.create("redis://127.0.0.1:" + server.port());
        try (BackendTransport t = new BackendTransport(LettuceTransport.create(redis), Backend.AUTO)) {
            RateLimitClient rl = new RateLimitClient(t);
            rl.verifyModule();
            assertEquals(Backend.MODULE, t.backend());
            assertEquals(4, rl.check("j:auto", FIVE).remaining());
            server.server().cli("MODULE", "UNLOAD", "ratelimit"); // as a failover to a server without it
            assertEquals(3, rl.check("j:auto", FIVE).remaining()); // the same key, counted on by the library
            assertEquals(Backend.FUNCTIONS, t.backend());
            assertNull(t.problem().toCompletableFuture().join());
        } finally {
            redis.shutdown();
        }
    }

    // CLIENTS.md §3 "Module missing at run time": no engine to decide with is the Redis-down mode (a
    // fail-closed policy unavailable: the adapters' 503; a fail-open one admitted), never a configuration
    // error (the adapters' 500), as in Python and Node; the same when the library is gone and this user may
    // not load it again. Decided by Redis again once the engine is back.
    private static final Policy CLOSED = Policy.builder("gone-closed").limit(Limit.slidingWindow("w", 5, Duration.ofMinutes(1)))
            .onRedisDown(FailMode.CLOSED).build();
    private static final Policy OPEN = Policy.builder("gone-open").limit(Limit.slidingWindow("w", 5, Duration.ofMinutes(1)))
            .onRedisDown(FailMode.OPEN).build();

    private static void goneIsRedisDown(RateLimiter l, Runnable gone, Runnable back) {
        l.acquire(PolicyCall.of(CLOSED, "k")).close();
        gone.run();
        assertThrows(RateLimitUnavailableException.class, () -> l.acquire(PolicyCall.of(CLOSED, "k")));
        l.acquire(PolicyCall.of(OPEN, "k")).close(); // admitted without a decision
        back.run();
        l.acquire(PolicyCall.of(CLOSED, "k")).close();
        assertEquals(3, l.peek(CLOSED, "k").limits().get(0).r()); // two admitted by Redis, none while it was gone
    }

    @Test
    void theModuleGoneAtRunTimeIsDecidedByTheRedisDownMode() throws Exception {
        RedisProcess server = RedisServers.ownUnloadable();
        RedisClient redis = RedisClient.create("redis://127.0.0.1:" + server.port());
        try (RateLimiter l = RateLimiter.builder(new BackendTransport(LettuceTransport.create(redis), Backend.MODULE))
                .prefix("gone:").policy(CLOSED).policy(OPEN).build()) {
            String path = System.getenv("RL_MODULE");
            goneIsRedisDown(l, () -> server.cli("MODULE", "UNLOAD", "ratelimit"), () -> server.cli("MODULE", "LOAD", path));
        } finally {
            redis.shutdown();
            server.stop();
        }
    }

    @Test
    void theLibraryGoneAtRunTimeWithAUserWithoutFunctionLoadIsDecidedByTheRedisDownMode(RedisServers.Plain plain) {
        RedisProcess server = plain.server();
        server.cli("ACL", "SETUSER", "jgone", "on", ">pw", "~*", "+@all", "-function|load");
        RedisClient admin = RedisClient.create("redis://127.0.0.1:" + plain.port());
        RedisClient redis = RedisClient.create(RedisURI.builder().withHost("127.0.0.1").withPort(plain.port())
                .withAuthentication("jgone", "pw".toCharArray()).build());
        try (var a = admin.connect();
                RateLimiter l = RateLimiter.builder(new BackendTransport(LettuceTransport.create(redis), Backend.FUNCTIONS))
                        .prefix("jgone:").policy(CLOSED).policy(OPEN).build()) {
            a.sync().functionLoad(FunctionsLibrary.source(), true);
            goneIsRedisDown(l, () -> a.sync().functionFlush(io.lettuce.core.FlushMode.SYNC),
                    () -> a.sync().functionLoad(FunctionsLibrary.source(), true));
        } finally {
            redis.shutdown();
            admin.shutdown();
            server.cli("ACL", "DELUSER", "jgone");
        }
    }

    @Test
    void lettuceClusterEveryPrimaryUsedGetsTheLibrary(RedisServers.PlainCluster plain) {
        RedisServers.Cluster cluster = plain.cluster();
        cluster.nodes().forEach(n -> n.cli("FUNCTION", "FLUSH"));
        RedisClusterClient redis = RedisClusterClient.create(cluster.ports().stream().map(p -> RedisURI.create("127.0.0.1", p)).toList());
        try (BackendTransport t = new BackendTransport(LettuceTransport.create(redis), Backend.AUTO)) {
            RateLimitClient rl = new RateLimitClient(t);
            rl.verifyModule();
            assertEquals(Backend.FUNCTIONS, t.backend());
            long loaded = FunctionsLibrary.versionOf(FunctionsLibrary.source());
            cluster.nodes().forEach(n -> assertEquals(loaded, version(n), "after verify, primary :" + n.port()));
            cluster.nodes().forEach(n -> n.cli("FUNCTION", "FLUSH")); // each gets it again on its first call
            long moved = cluster.movedErrors();
            for (int i = 0; i < 30; i++) {
                assertEquals(4, rl.check("jc:" + i, FIVE).remaining());
            }
            long want = FunctionsLibrary.versionOf(FunctionsLibrary.source());
            cluster.nodes().forEach(n -> assertEquals(want, version(n), "primary :" + n.port()));
            assertEquals(moved, cluster.movedErrors());
        } finally {
            redis.shutdown();
        }
    }

    @Test
    void springDataJedisClusterLoadsOnEveryPrimaryThenOnTheNodeThatLacksIt(RedisServers.PlainCluster plain) {
        RedisServers.Cluster cluster = plain.cluster();
        cluster.nodes().forEach(n -> n.cli("FUNCTION", "FLUSH"));
        JedisConnectionFactory factory = new JedisConnectionFactory(
                new RedisClusterConfiguration(cluster.ports().stream().map(p -> "127.0.0.1:" + p).toList()));
        factory.afterPropertiesSet();
        factory.start();
        try {
            BackendTransport t = new BackendTransport(SpringDataTransport.of(factory), Backend.FUNCTIONS);
            assertEquals(cluster.nodes().size(), SpringDataTransport.of(factory).primaryRoutes().size());
            RateLimitClient rl = new RateLimitClient(t);
            rl.verifyModule(); // at start-up: every primary (CLUSTER SLOTS), before any call
            long loaded = FunctionsLibrary.versionOf(FunctionsLibrary.source());
            cluster.nodes().forEach(n -> assertEquals(loaded, version(n), "after verify, primary :" + n.port()));
            cluster.nodes().forEach(n -> n.cli("FUNCTION", "FLUSH")); // each gets it again on its first call
            for (int i = 0; i < 30; i++) {
                assertEquals(4, rl.check("jj:" + i, FIVE).remaining());
            }
            long want = FunctionsLibrary.versionOf(FunctionsLibrary.source());
            cluster.nodes().forEach(n -> assertEquals(want, version(n), "primary :" + n.port()));
        } finally {
            factory.destroy();
        }
    }
}
