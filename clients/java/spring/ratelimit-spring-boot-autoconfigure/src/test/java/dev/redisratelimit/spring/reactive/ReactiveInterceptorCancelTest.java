package dev.redisratelimit.spring.reactive;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RedisCall;
import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.RateLimited;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.autoconfigure.RateLimitProperties;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.client.RedisAvailability;
import dev.redisratelimit.client.RuntimeLimits;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.Test;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.beans.factory.support.StaticListableBeanFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * The reactive interceptor's ends of a call, against a transport that answers
 * when the test says so: a subscriber that cancels while the decision is in
 * flight has the lease it is then given released (nobody else would), and a
 * subscriber that cancels while the method runs releases at once.
 */
class ReactiveInterceptorCancelTest {

    /** Records each command; answers nothing until the test completes it. */
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

    public static class Work {
        final Sinks.One<String> done = Sinks.one();

        public Sinks.One<String> done() { // through the proxy (its own fields are not the target's)
            return done;
        }

        @RateLimited(policy = "w", key = "#k", limits = @Limit(name = "inflight", type = LimitType.CONCURRENCY, count = 2, ttl = "60s"))
        public Mono<String> call(String k) {
            return done.asMono();
        }
    }

    Pending transport = new Pending();
    RateLimiter limiter = new RateLimiter(new RateLimitAsyncClient(transport), new RuntimeLimits(transport, "p:", 5000),
            new RedisAvailability(transport, Duration.ofSeconds(30), Duration.ofSeconds(5)), null, "p:",
            Duration.ofSeconds(5), dev.redisratelimit.client.FailMode.CLOSED);

    Work proxy() {
        StaticListableBeanFactory beans = new StaticListableBeanFactory();
        beans.addBean("policies", new AnnotationPolicies(new RateLimitProperties(), limiter));
        beans.addBean("limiter", limiter);
        ProxyFactory pf = new ProxyFactory(new Work());
        pf.setProxyTargetClass(true);
        pf.addAdvice(new ReactiveRateLimitInterceptor(beans.getBeanProvider(AnnotationPolicies.class), beans.getBeanProvider(RateLimiter.class),
                beans.getBeanProvider(ReactiveCallerResolver.class), beans.getBeanProvider(dev.redisratelimit.spring.http.RateLimitAnswers.class),
                beans.getBeanProvider(ReactiveOffload.class)));
        return (Work) pf.getProxy();
    }

    // RL.LEASE's reply (a one-limit policy is its own command): six integers and the token
    static final List<Object> ADMITTED = java.util.Arrays.asList(0L, 1L, 2L, 1L, -1L, 60_000L, null);

    @Test
    void cancelledWhileDecidingReleasesTheLeaseItIsGiven() {
        Work w = proxy();
        Disposable d = w.call("k1").subscribe();
        assertThat(transport.commands()).containsExactly("RL.LEASE");
        d.dispose(); // the client went away before Redis answered
        transport.replies.get(0).complete(ADMITTED);
        assertThat(transport.commands()).containsExactly("RL.LEASE", "RL.RELEASE");
        assertThat(transport.calls.get(1).args()).contains(transport.calls.get(0).args().stream()
                .filter(a -> a.length() == 36 && a.chars().filter(c -> c == '-').count() == 4).findFirst().orElseThrow());
    }

    @Test
    void cancelledWhileRunningReleasesAtOnceAndOnlyOnce() {
        Work w = proxy();
        Disposable d = w.call("k2").subscribe();
        transport.replies.get(0).complete(ADMITTED);
        assertThat(transport.commands()).containsExactly("RL.LEASE"); // admitted: the method's Mono is pending
        d.dispose();
        assertThat(transport.commands()).containsExactly("RL.LEASE", "RL.RELEASE");
        w.done().tryEmitValue("late"); // nothing more happens
        d.dispose();
        assertThat(transport.commands()).containsExactly("RL.LEASE", "RL.RELEASE");
    }
}
