package dev.redisratelimit.gateway;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.client.FailMode;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.client.RedisAvailability;
import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.client.RuntimeLimits;
import dev.redisratelimit.spring.http.DefaultRateLimitAnswers;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.Test;
import org.springframework.cloud.gateway.filter.GatewayFilter;
import org.springframework.http.codec.ServerCodecConfigurer;
import org.springframework.mock.http.server.reactive.MockServerHttpRequest;
import org.springframework.mock.web.server.MockServerWebExchange;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * The RateLimit filter's lease when the client goes away: before Redis
 * answers (released when the admission comes), and while the routed call
 * runs (released at once, once), on a transport that answers when told.
 */
class FilterCancelTest {

    static final class Pending implements RateLimitTransport {
        final List<RedisCall> calls = new ArrayList<>();
        final List<CompletableFuture<Object>> replies = new ArrayList<>();

        @Override
        public synchronized CompletionStage<Object> execute(RedisCall call) {
            CompletableFuture<Object> f = new CompletableFuture<>();
            calls.add(call);
            replies.add(f);
            return f;
        }

        synchronized List<String> commands() {
            return calls.stream().map(RedisCall::command).toList();
        }
    }

    // A policy of one concurrency limit is one RL.LEASE (CLIENTS.md §2):
    // admitted (limit 2, one unit left, ttl 60 s) with the token it sent.
    List<Object> admitted() {
        List<String> args = transport.calls.get(0).args();
        return List.of(0L, 1L, 2L, 1L, -1L, 60_000L, args.get(args.indexOf("TOKEN") + 1));
    }

    Pending transport = new Pending();
    RateLimiter limiter = new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", 5000),
            new RedisAvailability(transport, Duration.ofSeconds(30), Duration.ofSeconds(5)), null, "p:",
            Duration.ofSeconds(5), FailMode.CLOSED);

    GatewayFilter filter() {
        limiter.register(Policy.builder("w").concurrency("inflight", 2, Duration.ofSeconds(60)).build());
        RateLimitGatewayFilterFactory f = new RateLimitGatewayFilterFactory(limiter,
                new DefaultRateLimitAnswers(true, false, Duration.ofSeconds(1)), exchange -> Mono.just("k1"), ServerCodecConfigurer.create());
        return f.apply(new RateLimitGatewayFilterFactory.Config().setPolicy("w"));
    }

    static MockServerWebExchange exchange() {
        return MockServerWebExchange.from(MockServerHttpRequest.get("/x"));
    }

    @Test
    void cancelledWhileDecidingReleasesTheLeaseItIsGiven() {
        Disposable d = filter().filter(exchange(), ex -> Mono.never()).subscribe();
        assertThat(transport.commands()).containsExactly("RL.LEASE");
        d.dispose(); // the client went away before Redis answered
        transport.replies.get(0).complete(admitted());
        assertThat(transport.commands()).containsExactly("RL.LEASE", "RL.RELEASE");
    }

    @Test
    void cancelledWhileRoutedReleasesAtOnceAndOnlyOnce() {
        Disposable d = filter().filter(exchange(), ex -> Mono.never()).subscribe();
        transport.replies.get(0).complete(admitted());
        assertThat(transport.commands()).containsExactly("RL.LEASE"); // admitted: the routed call is pending
        d.dispose();
        assertThat(transport.commands()).containsExactly("RL.LEASE", "RL.RELEASE");
        d.dispose();
        assertThat(transport.commands()).containsExactly("RL.LEASE", "RL.RELEASE");
    }

    @Test
    void routedResponseEndedReleases() {
        filter().filter(exchange(), ex -> Mono.empty()).subscribe();
        transport.replies.get(0).complete(admitted());
        assertThat(transport.commands()).containsExactly("RL.LEASE", "RL.RELEASE");
    }
}
