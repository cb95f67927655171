package dev.redisratelimit.it.support;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.redisratelimit.client.AllDecision;
import dev.redisratelimit.client.Call;
import dev.redisratelimit.client.Calls;
import dev.redisratelimit.client.Clause;
import dev.redisratelimit.client.Decision;
import dev.redisratelimit.client.LeaseDecision;
import dev.redisratelimit.client.Options;
import dev.redisratelimit.client.QuotaLimit;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.client.RateLimitClient;
import dev.redisratelimit.client.RateLimitException;
import dev.redisratelimit.client.SlidingWindow;
import dev.redisratelimit.client.TokenBucket;
import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * The same calls through any transport: every command on keys spread over
 * many slots, RL.ALL on hash-tagged keys, a pipeline of independent
 * decisions, and an error reply. Checks values, so a transport that loses or
 * misroutes a reply fails here.
 */
public final class Workload {

    private Workload() {
    }

    public static void run(RateLimitClient rl) {
        rl.verifyModule();
        String run = UUID.randomUUID().toString();
        Duration minute = Duration.ofMinutes(1);
        for (int i = 0; i < 30; i++) {
            String user = "user:" + i + ":" + run;
            Decision first = rl.check("w:" + user, SlidingWindow.of(2, minute));
            assertTrue(first.admitted());
            assertEquals(1, first.remaining());
            assertEquals(0, rl.check("w:" + user, SlidingWindow.of(2, minute)).remaining());
            assertTrue(rl.check("w:" + user, SlidingWindow.of(2, minute)).limited());
            assertEquals(0, rl.peek("w:" + user, List.of(SlidingWindow.of(2, minute)), Options.none().withCost(0)).remaining());
            assertEquals(4, rl.throttle("b:" + user, new TokenBucket(5, 5, minute)).remaining());
            assertEquals(4, rl.throttlePeek("b:" + user, List.of(new TokenBucket(5, 5, minute)), Options.none().withCost(0)).remaining());
            assertEquals(9, rl.quota("q:" + user, ZoneId.of("UTC"), QuotaLimit.of(QuotaPeriod.DAY, 10)).remaining());
            assertEquals(9, rl.quotaPeek("q:" + user, ZoneId.of("UTC"), List.of(QuotaLimit.of(QuotaPeriod.DAY, 10)), Options.none().withCost(0)).remaining());
            String tag = "{" + user + "}";
            assertTrue(rl.dayhour(tag + ":d", tag + ":h", 5, 5, Duration.ofHours(1), minute).admitted());
            assertTrue(rl.lockcount(tag + ":lock", tag + ":count", minute, 3, minute).admitted());
            LeaseDecision lease = rl.lease("l:" + user, 2, minute);
            String token = lease.token().orElseThrow();
            assertEquals(1, rl.leasePeek("l:" + user, 2, Options.none().withCost(0)).remaining());
            assertEquals(List.of(1L), rl.renew("l:" + user, minute, token));
            assertEquals(List.of(1L), rl.release("l:" + user, token));
            AllDecision all = rl.all(List.of(Clause.check(tag + ":aw", SlidingWindow.of(3, minute)),
                    Clause.lease(tag + ":al", 1, minute, "req-" + i)), Options.none().withDetails());
            assertTrue(all.admitted());
            assertEquals(2, all.details().size());
            assertEquals(2, all.details().get(0).get(0).remaining());
            assertTrue(rl.allPeek(Clause.check(tag + ":aw", SlidingWindow.of(3, minute)).withCost(0)).admitted());
        }
        // a pipeline of independent decisions on keys in different slots
        List<Call<?>> calls = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            calls.add(Calls.check("p:" + i + ":" + run, List.of(SlidingWindow.of(1, minute)), Options.none()));
        }
        calls.add(Calls.check("p:0:" + run, List.of(SlidingWindow.of(1, minute)), Options.none()));
        List<Object> replies = rl.pipeline(calls);
        assertEquals(21, replies.size());
        for (int i = 0; i < 20; i++) {
            assertTrue(((Decision) replies.get(i)).admitted(), "pipelined decision " + i);
        }
        assertTrue(((Decision) replies.get(20)).limited(), "the repeated key, sent after its first call, is refused");
        // a policy's permit: one RL.ALL, then release + settlement pipelined on the policy's slot
        dev.redisratelimit.client.Policy llm = dev.redisratelimit.client.Policy.builder("llm")
                .slidingWindow("rpm", 5, minute)
                .limit(dev.redisratelimit.client.Limit.tokenBucket("tpm", 1000, minute, 1000).estimated())
                .concurrency("inflight", 1, minute)
                .build();
        try (dev.redisratelimit.client.RateLimiter limiter = dev.redisratelimit.client.RateLimiter.builder(rl.transport())
                .prefix("rl:").budget(java.time.Duration.ofSeconds(5)).policy(llm).build()) {
            for (int i = 0; i < 5; i++) {
                String customer = "c" + i + ":" + run;
                try (dev.redisratelimit.client.Permit p = limiter.acquire(dev.redisratelimit.client.PolicyCall.of(llm, customer).withEstimate(100))) {
                    assertEquals(List.of(4L, 900L, 0L), p.decision().limits().stream().map(l -> l.r()).toList());
                    p.used(40);
                }
                assertEquals(1, rl.leasePeek("rl:llm:{" + customer + "}:inflight", 1, Options.none().withCost(0)).remaining());
                long left = rl.throttlePeek("rl:llm:{" + customer + "}:tpm", List.of(TokenBucket.of(1000, minute, 1000)),
                        Options.none().withCost(0)).remaining();
                assertTrue(left >= 960 && left <= 1000, "40 used of 1000: " + left);
            }
        }
        // an error reply carries the server's text: RL.CHECK on RL.DAYHOUR's string counter
        RateLimitException e = org.junit.jupiter.api.Assertions.assertThrows(RateLimitException.class,
                () -> rl.check("{user:0:" + run + "}:d", SlidingWindow.of(2, minute)));
        assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value", e.getMessage());
    }
}
