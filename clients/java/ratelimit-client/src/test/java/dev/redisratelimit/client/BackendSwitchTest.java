package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.Test;

/**
 * Backend AUTO under Cluster: when the module goes missing at run time, the
 * library is loaded on every primary the transport names (as at start-up,
 * and as the Python and Node clients do), then the call is sent once more as
 * an FCALL.
 */
class BackendSwitchTest {

    /** Three primaries (routes p1..p3), none with the module or the library until FUNCTION LOAD reaches it. */
    static final class ThreePrimaries implements RateLimitTransport {
        final List<String> sent = new ArrayList<>();
        final List<String> loaded = new ArrayList<>();

        @Override
        public List<String> primaryRoutes() {
            return List.of("p1", "p2", "p3");
        }

        @Override
        public CompletionStage<Object> execute(RedisCall call) {
            String node = call.routingKey();
            sent.add(call.command() + " " + (call.args().isEmpty() ? "" : call.args().get(0)) + " @" + node);
            if (call.command().startsWith("RL.")) {
                return CompletableFuture.failedFuture(new RateLimitException("ERR unknown command '" + call.command() + "'"));
            }
            if (call.command().equals("FUNCTION")) {
                loaded.add(node);
                return CompletableFuture.completedFuture("ratelimit");
            }
            if (call.args().get(0).equals("rl_version")) {
                return CompletableFuture.failedFuture(new RateLimitException("ERR Function not found"));
            }
            return CompletableFuture.completedFuture(List.of(0L, 1L, 5L, 4L, -1L, 1000L));
        }

        @Override
        public void close() {
        }
    }

    @Test
    void theModuleGoneLoadsTheLibraryOnEveryPrimaryThenSendsTheCallAgain() {
        ThreePrimaries redis = new ThreePrimaries();
        BackendTransport t = new BackendTransport(redis, Backend.AUTO);
        Object reply = t.execute(new RedisCall("RL.CHECK", List.of("k", "*", "5", "1000"), 0)).toCompletableFuture().join();
        assertThat(reply).isEqualTo(List.of(0L, 1L, 5L, 4L, -1L, 1000L));
        assertThat(t.backend()).isEqualTo(Backend.FUNCTIONS);
        assertThat(redis.loaded).startsWith("p1", "p2", "p3"); // then the call's node (here unknown to the fake)
        assertThat(redis.sent.get(0)).isEqualTo("RL.CHECK k @k");
        assertThat(redis.sent.get(redis.sent.size() - 1)).isEqualTo("FCALL rl_check @k");
    }
}
