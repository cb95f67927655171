package dev.redisratelimit.gateway;

import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitConfigurationException;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimitUnavailableException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitKeyMissingException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.cloud.gateway.filter.GatewayFilter;
import org.springframework.cloud.gateway.filter.factory.AbstractGatewayFilterFactory;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.core.ResolvableType;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;
import org.springframework.http.codec.HttpMessageWriter;
import org.springframework.http.codec.ServerCodecConfigurer;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * The {@code RateLimit} gateway filter: the starter's answers at the gateway.
 *
 * <pre>{@code
 * filters:
 *   - name: RateLimit
 *     args:
 *       policy: api, daily              # ratelimit.policies names, decided in one RL.ALL
 *       key-resolver: "#{@userKeyResolver}"
 * }</pre>
 *
 * Admitted: the RateLimit headers and the route goes on; the permit (leases,
 * estimates) is closed when the routed response ends — completed, failed or
 * cancelled. Refused: 429 problem+json with Retry-After; Redis down: the
 * policy's mode within the decision budget (open, local, or closed: 503
 * problem+json); no key: 401 problem+json. The key resolver defaults to the
 * app's single {@link KeyResolver} bean (Spring Cloud Gateway's principal
 * name one unless the app has its own).
 */
public class RateLimitGatewayFilterFactory extends AbstractGatewayFilterFactory<RateLimitGatewayFilterFactory.Config> {

    private static final Logger log = LoggerFactory.getLogger(RateLimitGatewayFilterFactory.class);

    private final RateLimiter limiter;
    private final RateLimitAnswers answers;
    private final KeyResolver defaultKeyResolver;
    private final ServerCodecConfigurer codecs;

    public RateLimitGatewayFilterFactory(RateLimiter limiter, RateLimitAnswers answers, KeyResolver defaultKeyResolver,
            ServerCodecConfigurer codecs) {
        super(Config.class);
        this.limiter = limiter;
        this.answers = answers;
        this.defaultKeyResolver = defaultKeyResolver;
        this.codecs = codecs;
    }

    @Override
    public List<String> shortcutFieldOrder() {
        return List.of("policy", "keyResolver");
    }

    @Override
    public ShortcutType shortcutType() {
        return ShortcutType.DEFAULT;
    }

    @Override
    public GatewayFilter apply(Config config) {
        List<String> names = config.policyNames();
        if (names.isEmpty()) {
            throw new IllegalArgumentException("the RateLimit filter needs a policy (a ratelimit.policies name)");
        }
        // Unknown names fail the route now, not its first request.
        names.forEach(limiter::policy);
        KeyResolver resolver = config.getKeyResolver() != null ? config.getKeyResolver() : defaultKeyResolver;
        return (exchange, chain) -> resolver.resolve(exchange).defaultIfEmpty("")
                .flatMap(key -> {
                    if (key.isEmpty()) {
                        return Mono.error(new RateLimitKeyMissingException(
                                "no key to count the caller by for rate-limit policy " + names + " (the key resolver gave none)", true));
                    }
                    List<PolicyCall> calls = new ArrayList<>(names.size());
                    for (String name : names) {
                        calls.add(PolicyCall.of(limiter.policy(name), key));
                    }
                    return Mono.usingWhen(Decisions.permit(() -> limiter.acquireAsync(calls)), p -> {
                        if (p.decision() != null) {
                            HttpHeaders target = exchange.getResponse().getHeaders();
                            answers.headers(p.decision()).forEach(target::put);
                        }
                        return chain.filter(exchange);
                    }, RateLimitGatewayFilterFactory::close, (p, e) -> close(p), RateLimitGatewayFilterFactory::close);
                })
                .onErrorResume(e -> isOurs(e) && !exchange.getResponse().isCommitted(), e -> answer(exchange, e));
    }

    private static Mono<Void> close(Permit p) {
        return Mono.fromCompletionStage(() -> p.closeAsync(Map.of()));
    }

    private static boolean isOurs(Throwable e) {
        return e instanceof RateLimitRefusedException || e instanceof RateLimitUnavailableException
                || e instanceof RateLimitKeyMissingException || e instanceof RateLimitConfigurationException;
    }

    // The starter's answers (dev.redisratelimit.spring.http), written with the gateway's codecs.
    private Mono<Void> answer(ServerWebExchange exchange, Throwable e) {
        HttpHeaders headers = new HttpHeaders();
        ProblemDetail body;
        if (e instanceof RateLimitRefusedException r) {
            headers.putAll(answers.headers(r.getDecision()));
            Long retry = answers.retryAfterSeconds(r.getDecision());
            if (retry != null) {
                headers.set(HttpHeaders.RETRY_AFTER, Long.toString(retry));
            }
            body = answers.refused(r.getDecision());
        } else if (e instanceof RateLimitUnavailableException u) {
            body = answers.unavailable(u.getPolicy());
        } else if (e instanceof RateLimitKeyMissingException k) {
            body = answers.missingKey(k);
        } else {
            log.error("rate limit misconfigured: {}", e.getMessage());
            body = answers.misconfigured(e.getMessage());
        }
        exchange.getResponse().setStatusCode(HttpStatus.valueOf(body.getStatus()));
        exchange.getResponse().getHeaders().putAll(headers);
        // The request body drained first: answering before it is read makes Reactor Netty close the connection.
        return exchange.getRequest().getBody().doOnNext(DataBufferUtils::release).then(Mono.defer(() -> write(exchange, body)));
    }

    @SuppressWarnings("unchecked")
    private Mono<Void> write(ServerWebExchange exchange, ProblemDetail body) {
        ResolvableType type = ResolvableType.forClass(ProblemDetail.class);
        for (HttpMessageWriter<?> w : codecs.getWriters()) {
            if (w.canWrite(type, MediaType.APPLICATION_PROBLEM_JSON)) {
                return ((HttpMessageWriter<ProblemDetail>) w).write(Mono.just(body), type, MediaType.APPLICATION_PROBLEM_JSON,
                        exchange.getResponse(), Map.of());
            }
        }
        return exchange.getResponse().setComplete(); // no JSON codec: the status and headers alone
    }

    /** The filter's args: {@code policy} (one name, or several separated by commas) and {@code key-resolver}. */
    public static class Config {

        private String policy;
        private KeyResolver keyResolver;

        public String getPolicy() {
            return policy;
        }

        public Config setPolicy(String policy) {
            this.policy = policy;
            return this;
        }

        public KeyResolver getKeyResolver() {
            return keyResolver;
        }

        public Config setKeyResolver(KeyResolver keyResolver) {
            this.keyResolver = keyResolver;
            return this;
        }

        List<String> policyNames() {
            return policy == null ? List.of()
                    : Arrays.stream(policy.split(",")).map(String::trim).filter(s -> !s.isEmpty()).toList();
        }
    }
}
