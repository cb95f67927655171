package dev.redisratelimit.spring.reactive;

import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitConfigurationException;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimitUnavailableException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.http.ExemptCallers;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.http.BadInput;
import dev.redisratelimit.spring.http.RateLimitKeyMissingException;
import dev.redisratelimit.spring.http.RateLimitRoutes;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.core.Ordered;
import org.springframework.core.ResolvableType;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.spel.support.StandardEvaluationContext;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;
import org.springframework.http.codec.HttpMessageWriter;
import org.springframework.http.codec.ServerCodecConfigurer;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerMapping;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * {@code ratelimit.routes} on WebFlux: the routes a request matches are
 * decided without blocking (one RL.ALL for all of them) before the handler,
 * the rate-limit headers written, and the permit closed when the exchange
 * ends — completed, failed or cancelled. A refusal is answered here with the
 * same problem+json as the annotations' (written with the app's codecs: a
 * WebFilter is outside {@code @RestControllerAdvice}'s reach).
 *
 * <p>When the request's handler method has {@code @RateLimited}, the routes
 * are not decided here: they wait in an exchange attribute for the reactive
 * method interceptor, which decides them with the method's policy in the same
 * RL.ALL. Ordered after Spring Security's filter chain (-100), so the
 * principal is known.
 */
public class RateLimitRouteWebFilter implements WebFilter, Ordered {

    /** The exchange attribute holding the route calls deferred to the handler's @RateLimited. */
    public static final String DEFERRED = RateLimitRouteWebFilter.class.getName() + ".deferred";

    private static final Logger log = LoggerFactory.getLogger(RateLimitRouteWebFilter.class);

    private final RateLimitRoutes routes;
    private final RateLimiter limiter;
    private final AnnotationPolicies policies;
    private final ReactiveCallerResolver caller;
    private final RateLimitAnswers answers;
    private final ReactiveOffload offload;
    private final ObjectProvider<RequestMappingHandlerMapping> mapping;
    private final ObjectProvider<ServerCodecConfigurer> codecs;
    private volatile List<RequestMappingHandlerMapping> mappingList;

    public RateLimitRouteWebFilter(RateLimitRoutes routes, RateLimiter limiter, AnnotationPolicies policies, ReactiveCallerResolver caller,
            RateLimitAnswers answers, ReactiveOffload offload, ObjectProvider<RequestMappingHandlerMapping> mapping,
            ObjectProvider<ServerCodecConfigurer> codecs) {
        this.routes = routes;
        this.limiter = limiter;
        this.policies = policies;
        this.caller = caller;
        this.answers = answers;
        this.offload = offload;
        this.mapping = mapping;
        this.codecs = codecs;
    }

    @Override
    public int getOrder() {
        return 0;
    }

    /** The route calls deferred to this exchange's handler, taken; null when none. */
    @SuppressWarnings("unchecked")
    public static List<PolicyCall> takeDeferred(ServerWebExchange exchange) {
        return exchange == null ? null : (List<PolicyCall>) exchange.getAttributes().remove(DEFERRED);
    }

    @Override
    public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
        List<RateLimitRoutes.Route> matched = routes.matching(exchange.getRequest().getPath().pathWithinApplication(),
                exchange.getRequest().getMethod().name());
        if (matched.isEmpty()) {
            return chain.filter(exchange);
        }
        // ratelimit.exempt: decided by nobody, the handler's @RateLimited included (the attribute tells it)
        ExemptCallers exempt = policies.exempt();
        if (exempt.ip(caller.clientIp(exchange))) {
            exchange.getAttributes().put(ExemptCallers.ATTRIBUTE, Boolean.TRUE);
            return chain.filter(exchange);
        }
        return caller.user(exchange).map(Optional::of).defaultIfEmpty(Optional.empty())
                .map(user -> routes.calls(matched, new ExchangeView(exchange, caller, user.orElse(null)), RateLimitRouteWebFilter::context))
                .flatMap(calls -> exempt.anyKey(calls) ? Mono.defer(() -> {
                    exchange.getAttributes().put(ExemptCallers.ATTRIBUTE, Boolean.TRUE);
                    return chain.filter(exchange);
                }) : annotatedHandler(exchange).flatMap(annotated -> {
                    if (annotated) {
                        exchange.getAttributes().put(DEFERRED, calls);
                        return chain.filter(exchange);
                    }
                    Mono<Permit> permit = Mono.fromCompletionStage(() -> limiter.acquireAsync(calls));
                    if (offload != null && offload.blocking()) {
                        permit = permit.subscribeOn(Schedulers.boundedElastic());
                    }
                    // Admitted or not, back on the connection's event loop (ConnectionLoop says why); the permit
                    // closed once the exchange ends, without the exchange waiting for that round trip.
                    return permit.publishOn(ConnectionLoop.of(exchange)).flatMap(p -> {
                        if (p.decision() != null) {
                            HttpHeaders target = exchange.getResponse().getHeaders();
                            answers.headers(p.decision()).forEach((name, values) -> target.put(name, values));
                        }
                        return chain.filter(exchange).doFinally(signal -> close(p));
                    });
                }))
                .onErrorResume(e -> isOurs(e) && !exchange.getResponse().isCommitted(), e -> answer(exchange, e));
    }

    private void close(Permit p) {
        Mono<Void> m = Mono.fromCompletionStage(() -> p.closeAsync(Map.of()));
        (offload != null && offload.blocking() ? m.subscribeOn(Schedulers.boundedElastic()) : m)
                .subscribe(null, e -> log.warn("rate-limit routes: permit not settled ({})", e.toString()));
    }

    // True when the handler is a controller method with its own @RateLimited (not a lockout, decided alone).
    private Mono<Boolean> annotatedHandler(ServerWebExchange exchange) {
        return reactor.core.publisher.Flux.fromIterable(mappings())
                .concatMap(m -> m.getHandler(exchange).onErrorResume(e -> Mono.empty()))
                .next()
                .map(h -> {
                    if (h instanceof HandlerMethod hm) {
                        AnnotationPolicies.Resolved own = policies.resolve(hm.getMethod(), hm.getBeanType());
                        return own != null && !own.lockout();
                    }
                    return false;
                }).defaultIfEmpty(false);
    }

    // The app's annotation handler mappings (the app's own, Actuator's), found once.
    private List<RequestMappingHandlerMapping> mappings() {
        List<RequestMappingHandlerMapping> m = mappingList;
        if (m == null) {
            mappingList = m = mapping.orderedStream().toList();
        }
        return m;
    }

    private static boolean isOurs(Throwable e) {
        return e instanceof RateLimitRefusedException || e instanceof RateLimitUnavailableException
                || e instanceof RateLimitKeyMissingException || e instanceof RateLimitConfigurationException
                || e instanceof dev.redisratelimit.client.RateLimitArgumentException;
    }

    // The answers of ReactiveRateLimitExceptionHandler, written here.
    private Mono<Void> answer(ServerWebExchange exchange, Throwable e) {
        HttpHeaders headers = new HttpHeaders();
        ProblemDetail body;
        if (e instanceof RateLimitRefusedException r) {
            headers.putAll(answers.headers(r.getDecision()));
            Long retry = answers.retryAfterSeconds(r.getDecision());
            if (retry != null) {
                headers.set("Retry-After", Long.toString(retry));
            }
            body = answers.refused(r.getDecision());
        } else if (e instanceof RateLimitUnavailableException u) {
            body = answers.unavailable(u.getPolicy());
        } else if (e instanceof RateLimitKeyMissingException k) {
            body = answers.missingKey(k);
        } else if (BadInput.isCallInput(e)) {
            body = answers.missingKey(new RateLimitKeyMissingException(e.getMessage(), false));
        } else {
            log.error("rate limit misconfigured: {}", e.getMessage());
            body = answers.misconfigured(e.getMessage());
        }
        exchange.getResponse().setStatusCode(HttpStatus.valueOf(body.getStatus()));
        exchange.getResponse().getHeaders().putAll(headers);
        // The request read to its end first: a response sent before it makes Reactor Netty close the
        // connection, and a client that already sent its next request there waits for nothing.
        return exchange.getRequest().getBody().doOnNext(org.springframework.core.io.buffer.DataBufferUtils::release)
                .then(Mono.defer(() -> write(exchange, body)));
    }

    @SuppressWarnings("unchecked")
    private Mono<Void> write(ServerWebExchange exchange, ProblemDetail body) {
        ResolvableType type = ResolvableType.forClass(ProblemDetail.class);
        ServerCodecConfigurer c = codecs.getIfAvailable();
        if (c != null) {
            for (HttpMessageWriter<?> w : c.getWriters()) {
                if (w.canWrite(type, MediaType.APPLICATION_PROBLEM_JSON)) {
                    return ((HttpMessageWriter<ProblemDetail>) w).write(Mono.just(body), type, MediaType.APPLICATION_PROBLEM_JSON,
                            exchange.getResponse(), Map.of());
                }
            }
        }
        return exchange.getResponse().setComplete(); // no JSON codec: the status and headers alone
    }

    static EvaluationContext context(RateLimitRoutes.Request r) {
        StandardEvaluationContext ctx = new StandardEvaluationContext();
        ctx.setVariable("request", r.nativeRequest());
        ctx.setVariable("headers", RateLimitRoutes.headers(r));
        ctx.setVariable("exchange", ((ExchangeView) r).exchange());
        ctx.setVariable("ip", r.clientIp());
        ctx.setVariable("user", r.user());
        ctx.setVariable("path", r.path());
        ctx.setVariable("method", r.method());
        return ctx;
    }

    /** The exchange as the key resolvers read it (the user resolved beforehand: on WebFlux the principal is a Mono). */
    record ExchangeView(ServerWebExchange exchange, ReactiveCallerResolver caller, String user) implements RateLimitRoutes.Request {
        @Override
        public String clientIp() {
            return caller.clientIp(exchange);
        }

        @Override
        public String header(String name) {
            return exchange.getRequest().getHeaders().getFirst(name);
        }

        @Override
        public String path() {
            return exchange.getRequest().getPath().pathWithinApplication().value();
        }

        @Override
        public String method() {
            return exchange.getRequest().getMethod().name();
        }

        @Override
        public Object nativeRequest() {
            return exchange.getRequest();
        }
    }
}
