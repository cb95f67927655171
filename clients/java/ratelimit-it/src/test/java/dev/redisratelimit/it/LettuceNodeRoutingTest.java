package dev.redisratelimit.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.it.support.RedisServers;
import dev.redisratelimit.lettuce.LettuceTransport;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A keyless call routed to a Cluster primary (the module check, the Functions
 * library's load on each primary) is often sent from a completion stage that
 * runs on one of Lettuce's event loops. Lettuce's blocking
 * {@code getConnection(nodeId)} there waited for a node connection that the
 * same loop had to establish: the application hung (a CI run of the Spring
 * example waited for ever in its context's close). The transport now asks
 * for the node's connection asynchronously.
 */
@ExtendWith(RedisServers.class)
class LettuceNodeRoutingTest {

    @Test
    void aRoutedCallSentFromLettucesEventLoopToNodesNotYetConnectedIsAnswered(RedisServers.PlainCluster plain) throws Exception {
        List<Integer> ports = plain.cluster().ports();
        // Fresh clients each round, so no primary has a node connection yet; two event loops (Lettuce's default on
        // 2 cores): a node's connection is made on the blocked loop about every other time.
        for (int round = 0; round < 5; round++) {
            RedisClusterClient redis = RedisClusterClient.create(ports.stream().map(p -> RedisURI.create("127.0.0.1", p)).toList());
            try {
                LettuceTransport t = LettuceTransport.create(redis);
                CompletableFuture<List<Object>> pings = t.execute(new RedisCall("PING", List.of(), -1))
                        .thenCompose(first -> { // runs on the event loop that read PING's reply
                            List<CompletableFuture<Object>> each = new ArrayList<>();
                            for (int slot : new int[] {100, 8000, 16000}) { // one slot of each primary's third
                                String key = "{" + slotKey(slot) + "}";
                                each.add(t.execute(RedisCall.onNodeOf(key, "PING", List.of())).toCompletableFuture());
                            }
                            return CompletableFuture.allOf(each.toArray(CompletableFuture[]::new))
                                    .thenApply(v -> each.stream().map(CompletableFuture::join).toList());
                        }).toCompletableFuture();
                List<Object> replies = pings.get(10, TimeUnit.SECONDS); // hung before the fix
                assertEquals(3, replies.size());
                replies.forEach(r -> assertTrue(String.valueOf(r).contains("PONG"), String.valueOf(r)));
            } finally {
                // Bounded: with a blocked event loop a plain shutdown() never returns (the test would hang, not fail).
                redis.shutdownAsync(0, 2, TimeUnit.SECONDS).get(15, TimeUnit.SECONDS);
            }
        }
    }

    // A key whose slot lies at or just above the given one (only the node behind it matters).
    private static String slotKey(int slot) {
        for (int i = 0; ; i++) {
            String k = "n" + i;
            if (io.lettuce.core.cluster.SlotHash.getSlot(k) >= slot && io.lettuce.core.cluster.SlotHash.getSlot(k) < slot + 300) {
                return k;
            }
        }
    }
}
