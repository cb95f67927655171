package dev.redisratelimit.spring.reactive;

import static dev.redisratelimit.spring.annotation.PolicyExpressions.cost;
import static dev.redisratelimit.spring.annotation.PolicyExpressions.string;
import static dev.redisratelimit.spring.annotation.PolicyExpressions.usage;

import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitConfigurationException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.http.ExemptCallers;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitKeyMissingException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.reactivestreams.Publisher;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.ReactiveAdapter;
import org.springframework.core.ReactiveAdapterRegistry;
import org.springframework.web.filter.reactive.ServerWebExchangeContextFilter;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Around a {@code @RateLimited} method of a WebFlux app. For a method
 * returning a Mono or a Flux (any Reactive Streams type Spring adapts) it
 * returns a publisher that, when subscribed, decides without blocking
 * ({@link RateLimiter#acquireAsync}, the exchange from the Reactor Context),
 * writes the rate-limit headers, then subscribes the method's own publisher;
 * when that completes, errs or is cancelled (the client went away) the
 * permit is closed exactly once: leases released, estimates settled from
 * {@code #result} on completion (a Flux's last element), refunded on error,
 * and on cancel settled from the last element emitted before it (0 when
 * none was). A method returning a plain value is decided
 * synchronously — but never on an event-loop thread, where it is a
 * configuration error (return a Mono).
 */
public final class ReactiveRateLimitInterceptor implements MethodInterceptor {

    private final Found<AnnotationPolicies> policies;
    private final Found<RateLimiter> limiter;
    private final Found<ReactiveCallerResolver> callers;
    private final Found<RateLimitAnswers> answers;
    private final Found<ReactiveOffload> offload;
    private final ParameterNameDiscoverer names = new DefaultParameterNameDiscoverer();
    private final ReactiveAdapterRegistry adapters = ReactiveAdapterRegistry.getSharedInstance();

    public ReactiveRateLimitInterceptor(ObjectProvider<AnnotationPolicies> policies, ObjectProvider<RateLimiter> limiter,
            ObjectProvider<ReactiveCallerResolver> callers, ObjectProvider<RateLimitAnswers> answers, ObjectProvider<ReactiveOffload> offload) {
        this.policies = new Found<>(policies);
        this.limiter = new Found<>(limiter);
        this.callers = new Found<>(callers);
        this.answers = new Found<>(answers);
        this.offload = new Found<>(offload);
    }

    /**
     * A bean found on first use, then kept: an ObjectProvider looks its bean up on every call (costly per
     * request, bench/spring), and the interceptor is made before the beans exist (the post-processor is
     * infrastructure). An absent bean is looked up again next time.
     */
    private static final class Found<T> {
        private final ObjectProvider<T> provider;
        private volatile T bean;

        Found(ObjectProvider<T> provider) {
            this.provider = provider;
        }

        T get() {
            T b = bean;
            if (b == null) {
                bean = b = provider.getIfAvailable();
            }
            return b;
        }
    }

    @Override
    public Object invoke(MethodInvocation inv) throws Throwable {
        Method method = inv.getMethod();
        Class<?> target = inv.getThis() != null ? AopUtils.getTargetClass(inv.getThis()) : method.getDeclaringClass();
        AnnotationPolicies.Resolved r = policies.get().resolve(method, target);
        if (r == null) {
            return inv.proceed();
        }
        ReactiveAdapter adapter = adapters.getAdapter(method.getReturnType());
        if (adapter == null) {
            return plain(inv, r);
        }
        Mono<Call> decided = Mono.deferContextual(cv -> decide(inv, r, ServerWebExchangeContextFilter.getExchange(cv).orElse(null)));
        // The permit closes once the method's publisher ends (completed, failed or cancelled); the answer does
        // not wait for that round trip to Redis (CLIENTS.md §3: closing never delays the response).
        if (r.fallback() != null) {
            // A refusal answered by the fallback (only the decision's: a refusal the method's own publisher
            // raises is its own); nothing was charged.
            Mono<Object> either = decided.<Object>map(c -> c)
                    .onErrorResume(dev.redisratelimit.client.RateLimitRefusedException.class, e -> Mono.just(e));
            if (adapter.isMultiValue()) {
                return adapter.fromPublisher(either.flatMapMany(x -> x instanceof Call call ? many(call, adapter)
                        : fallback(inv, r, (dev.redisratelimit.client.RateLimitRefusedException) x)));
            }
            return adapter.fromPublisher(either.flatMap(x -> x instanceof Call call ? one(call, adapter)
                    : Mono.from(fallback(inv, r, (dev.redisratelimit.client.RateLimitRefusedException) x))));
        }
        if (adapter.isMultiValue()) {
            return adapter.fromPublisher(decided.flatMapMany(call -> many(call, adapter)));
        }
        return adapter.fromPublisher(decided.flatMap(call -> one(call, adapter)));
    }

    // The method's publisher, closing the permit once it ends.
    private static Flux<Object> many(Call call, ReactiveAdapter adapter) {
        return Flux.from(call.run(adapter)).doOnComplete(call::completed).doOnError(e -> call.failed()).doOnCancel(call::cancelled);
    }

    // The same for a single value: the hooks after Mono.from, whose cancel of its source after the value is no cancel of the call.
    private static Mono<Object> one(Call call, ReactiveAdapter adapter) {
        return Mono.from(call.run(adapter)).doOnSuccess(v -> call.completed()).doOnError(e -> call.failed()).doOnCancel(call::cancelled);
    }

    // The fallback's answer: its publisher (any reactive type), or its plain value (null: empty).
    @SuppressWarnings("unchecked")
    private Publisher<Object> fallback(MethodInvocation inv, AnnotationPolicies.Resolved r,
            dev.redisratelimit.client.RateLimitRefusedException refusal) {
        Object answer;
        try {
            answer = r.fallback(inv.getThis(), inv.getArguments(), refusal);
        } catch (Throwable t) {
            return Mono.error(t);
        }
        if (answer == null) {
            return Mono.empty();
        }
        ReactiveAdapter a = adapters.getAdapter(answer.getClass());
        return a != null ? (Publisher<Object>) a.toPublisher(answer) : Mono.just(answer);
    }

    // A plain return value: decided and closed on the calling thread, which must not be an event loop.
    private Object plain(MethodInvocation inv, AnnotationPolicies.Resolved r) throws Throwable {
        if (Schedulers.isInNonBlockingThread()) {
            throw new RateLimitConfigurationException("@RateLimited " + inv.getMethod().getDeclaringClass().getSimpleName() + "."
                    + inv.getMethod().getName() + " returns a plain value on an event-loop thread, where the decision would block it:"
                    + " return a Mono or a Flux");
        }
        Call call;
        try {
            call = decide(inv, r, null).block();
        } catch (dev.redisratelimit.client.RateLimitRefusedException e) {
            if (r.fallback() == null) {
                throw e;
            }
            return r.fallback(inv.getThis(), inv.getArguments(), e); // @RateLimited(fallbackMethod): its answer, nothing charged
        }
        Object result;
        try {
            result = inv.proceed();
        } catch (Throwable t) {
            call.failed();
            throw t;
        }
        call.last = result;
        call.completed();
        return result;
    }

    private Mono<Call> decide(MethodInvocation inv, AnnotationPolicies.Resolved r, ServerWebExchange exchange) {
        ReactiveCallerResolver caller = exchange == null ? null : callers.get();
        // ratelimit.exempt: decided by nobody (nothing written, no headers, no permit); a route already found it exempt,
        // or its client IP is exempt.
        ExemptCallers exempt = policies.get().exempt();
        if (exchange != null && (exchange.getAttributes().containsKey(ExemptCallers.ATTRIBUTE)
                || !exempt.isEmpty() && caller != null && exempt.ip(caller.clientIp(exchange)))) {
            RateLimitRouteWebFilter.takeDeferred(exchange);
            return Mono.just(new Call(inv, r, null, List.of(), null, exchange, false));
        }
        Mono<Optional<String>> user = caller == null ? Mono.just(Optional.empty())
                : caller.user(exchange).map(Optional::of).defaultIfEmpty(Optional.empty());
        return user.flatMap(u -> {
            MethodBasedEvaluationContext ctx = new MethodBasedEvaluationContext(inv.getThis(), inv.getMethod(), inv.getArguments(), names);
            String ip = null;
            if (exchange != null) {
                ctx.setVariable("exchange", exchange);
                ctx.setVariable("request", exchange.getRequest());
                ctx.setVariable("path", exchange.getRequest().getPath().value());
                if (caller != null) {
                    ip = caller.clientIp(exchange);
                    ctx.setVariable("ip", ip);
                    ctx.setVariable("user", u.orElse(null));
                }
            }
            // One call per @RateLimited on the method (several when repeated), with its key and costs.
            List<PolicyCall> own = new ArrayList<>(r.parts().size());
            for (AnnotationPolicies.Part part : r.parts()) {
                String policyName = part.policy().name();
                String key = key(part, ctx, exchange, ip, u.orElse(null));
                String zone = part.zone() == null ? null : string(part.zone(), ctx, "zone", policyName);
                long[] costs = new long[part.costs().length];
                for (int i = 0; i < costs.length; i++) {
                    costs[i] = part.costs()[i] == null ? 1 : cost(part.costs()[i], ctx, policyName);
                }
                String digest = part.policy().duplicateWindow() == null || caller == null ? null : caller.bodyDigest(exchange);
                if (part.policy().duplicateWindow() != null && digest == null) {
                    throw new RateLimitConfigurationException("policy '" + policyName + "': preventDuplicate needs an HTTP request body");
                }
                own.add(new PolicyCall(part.policy(), key, zone, costs, digest));
            }
            boolean blocking = offloaded();
            // Routes this request matched wait for its handler's policies: all decided in one RL.ALL.
            List<PolicyCall> routes = RateLimitRouteWebFilter.takeDeferred(exchange);
            if (exempt.anyKey(own) || exempt.anyKey(routes)) {
                return Mono.just(new Call(inv, r, ctx, own, null, exchange, false)); // an exempt key: decided by nobody
            }
            Mono<Permit> permit = Mono.defer(() -> {
                CompletableFuture<Permit> decision = (routes == null ? limiter.get().acquireAsync(own)
                        : limiter.get().acquireAsync(PolicyCall.withRoutes(routes, own))).toCompletableFuture();
                // Cancelled while deciding (the client went away): the permit Redis may still grant has nobody
                // to close it, so close it when it comes (leases released, estimates refunded: nothing ran).
                // The Mono waits on a copy, so its cancel does not cancel the decision this relies on.
                // The decision, admitted or not, is handed back to the connection's event loop (ConnectionLoop
                // says why) before it is taken: a cancel after that is the Call's to settle, not this refund's.
                AtomicBoolean taken = new AtomicBoolean();
                return Mono.fromCompletionStage(decision.thenApply(p -> p)).publishOn(ConnectionLoop.of(exchange))
                        .doOnNext(p -> taken.set(true))
                        .doOnCancel(() -> {
                            if (!taken.get()) {
                                decision.thenAcceptAsync(p -> p.closeAsync(Map.of()),
                                        blocking ? r0 -> Schedulers.boundedElastic().schedule(r0) : Runnable::run);
                            }
                        });
            });
            if (blocking) {
                permit = permit.subscribeOn(Schedulers.boundedElastic());
            }
            return permit.map(p -> new Call(inv, r, ctx, own, p, exchange, blocking));
        });
    }

    private boolean offloaded() {
        ReactiveOffload o = offload.get();
        return o != null && o.blocking();
    }

    private static String key(AnnotationPolicies.Part r, MethodBasedEvaluationContext ctx, ServerWebExchange exchange, String ip,
            String user) {
        String policy = r.policy().name();
        if (r.key() != null) {
            return string(r.key(), ctx, "key", policy);
        }
        if (r.by() == KeyBy.GLOBAL) {
            return "global";
        }
        if (exchange == null || ip == null && r.by() != KeyBy.USER) {
            throw new RateLimitConfigurationException("policy '" + policy + "' is keyed by " + r.by()
                    + " but the call is not an HTTP request: give it a key expression");
        }
        String k = switch (r.by()) {
            case IP -> ip;
            case USER -> user;
            case IP_AND_PATH -> ip + ":" + exchange.getRequest().getPath().value();
            default -> null;
        };
        if ((k == null || k.isEmpty()) && r.by() == KeyBy.USER) {
            // the request names no one (no principal, no or an empty user header): a missing identity, 401 (CLIENTS.md §5)
            throw new RateLimitKeyMissingException("policy '" + policy + "' counts callers by user: the request names none", true);
        }
        if (k == null || k.isEmpty()) {
            throw new RateLimitConfigurationException("policy '" + policy + "': no " + r.by() + " to key the call by");
        }
        return k;
    }

    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(ReactiveRateLimitInterceptor.class);

    /** One admitted invocation: its permit, and what settling it needs. */
    private final class Call {
        private final MethodInvocation inv;
        private final AnnotationPolicies.Resolved r;
        private final MethodBasedEvaluationContext ctx;
        /** The method's own calls, one per @RateLimited (in the order of r.parts()). */
        private final List<PolicyCall> own;
        /** Null for an exempt caller (ratelimit.exempt): nothing decided, nothing to close. */
        private final Permit permit;
        private final ServerWebExchange exchange;
        private final boolean blocking;
        private volatile Object last;
        private final AtomicBoolean closed = new AtomicBoolean();

        Call(MethodInvocation inv, AnnotationPolicies.Resolved r, MethodBasedEvaluationContext ctx, List<PolicyCall> own, Permit permit,
                ServerWebExchange exchange, boolean blocking) {
            this.inv = inv;
            this.r = r;
            this.ctx = ctx;
            this.own = own;
            this.permit = permit;
            this.exchange = exchange;
            this.blocking = blocking;
        }

        // Headers first (the response is not committed yet), then the method's own publisher.
        @SuppressWarnings("unchecked")
        Publisher<Object> run(ReactiveAdapter adapter) {
            RateLimitAnswers http = answers.get();
            if (permit != null && permit.decision() != null && exchange != null && http != null) {
                org.springframework.http.HttpHeaders target = exchange.getResponse().getHeaders();
                http.headers(permit.decision()).forEach((name, values) -> target.set(name, values.get(0)));
            }
            Object returned;
            try {
                returned = inv.proceed();
            } catch (Throwable t) {
                return Mono.error(t);
            }
            if (returned == null) {
                return Mono.empty();
            }
            return Flux.from((Publisher<Object>) adapter.toPublisher(returned)).doOnNext(v -> last = v);
        }

        // Completed: each policy's estimates settled from #result (the value, or a Flux's last element).
        void completed() {
            if (!closing()) {
                return;
            }
            // The outcome, for a policy that counts only failures or successes: an error status is a failure.
            if (last instanceof org.springframework.http.ResponseEntity<?> re && re.getStatusCode().value() >= 400) {
                permit.failed();
            } else {
                permit.succeeded();
            }
            Map<PolicyCall, Map<Integer, Long>> used = new HashMap<>();
            try {
                if (permit.hasEstimates()) {
                    ctx.setVariable("result", last);
                    for (int i = 0; i < own.size(); i++) {
                        AnnotationPolicies.Part part = r.parts().get(i);
                        Map<Integer, Long> byClause = new HashMap<>();
                        for (int clause : permit.estimateClauses(own.get(i))) {
                            byClause.put(clause, usage(part.settles()[clause], ctx, own.get(i).costs()[clause], part.policy().name()));
                        }
                        used.put(own.get(i), byClause);
                    }
                }
            } catch (RuntimeException e) {
                // A settle expression that cannot be evaluated: the estimates stand (§4), the leases are released.
                log.warn("policy {}: settle expression failed ({}); the estimate stands", r.names(), e.getMessage());
                used = charged();
            }
            close(used);
        }

        // Failed: the method used nothing, its estimates are refunded.
        void failed() {
            if (closing()) {
                permit.failed();
                close(Map.of());
            }
        }

        // Cancelled (the client went away, which stops the method's publisher): leases released at once; estimates
        // settled to what the work got to — from #result when the publisher emitted (a stream: its last element, the
        // tokens of the lines sent), else 0 (nothing reported: the Permit's own rule, and the Python and Node
        // adapters'; SERVICES.md endpoint 5: "0 when it raised or was cancelled").
        void cancelled() {
            if (last != null) {
                completed();
            } else {
                failed();
            }
        }

        // Every estimate as charged, call by call.
        private Map<PolicyCall, Map<Integer, Long>> charged() {
            Map<PolicyCall, Map<Integer, Long>> used = new HashMap<>();
            for (PolicyCall c : own) {
                Map<Integer, Long> byClause = new HashMap<>();
                for (int clause : permit.estimateClauses(c)) {
                    byClause.put(clause, c.costs()[clause]);
                }
                used.put(c, byClause);
            }
            return used;
        }

        // Once: the first of completed, failed and cancelled closes the permit.
        private boolean closing() {
            return permit != null && closed.compareAndSet(false, true); // an exempt call has no permit to close
        }

        // Sent, not waited for: the permit logs what it could not settle (the lease then expires by its TTL).
        private void close(Map<PolicyCall, Map<Integer, Long>> used) {
            Mono<Void> m = Mono.fromCompletionStage(() -> permit.closeAsyncByCall(used));
            (blocking ? m.subscribeOn(Schedulers.boundedElastic()) : m)
                    .subscribe(null, e -> log.warn("policy {}: permit not settled ({})", r.names(), e.toString()));
        }
    }
}
