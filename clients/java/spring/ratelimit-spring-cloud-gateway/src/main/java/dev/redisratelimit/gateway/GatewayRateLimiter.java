package dev.redisratelimit.gateway;

import dev.redisratelimit.client.Permit;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimitUnavailableException;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.cloud.gateway.event.FilterArgsEvent;
import org.springframework.cloud.gateway.filter.ratelimit.AbstractRateLimiter;
import org.springframework.cloud.gateway.route.RouteDefinitionRouteLocator;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.http.HttpHeaders;
import reactor.core.publisher.Mono;

/**
 * redis-ratelimit as the {@code RateLimiter} of Spring Cloud Gateway's own
 * {@code RequestRateLimiter} filter: the starter's named policies
 * ({@code ratelimit.policies}), several of them decided in one RL.ALL, and
 * the {@code RateLimit-Policy}/{@code RateLimit} (and on refusal
 * {@code Retry-After}) headers in the filter's response headers.
 *
 * <p>Which policies a route is decided by: its filter args
 * ({@code redis-ratelimit.policies: sms,daily}), else
 * {@code ratelimit.gateway.route-policies.<route id>}, else the
 * {@code default-filters}' args. That filter can only allow, or refuse with
 * one status (429 by default): a fail-closed policy while Redis is down is
 * refused with that status too, and a concurrency limit's lease is given
 * back as soon as the decision is made (the filter has no end-of-response
 * hook). For problem bodies, 503 while Redis is down and leases held until
 * the routed response ends, use the {@code RateLimit} filter
 * ({@link RateLimitGatewayFilterFactory}).
 */
public class GatewayRateLimiter extends AbstractRateLimiter<GatewayRateLimiter.Config> {

    /** The args prefix of a route's {@code RequestRateLimiter} filter ({@code redis-ratelimit.policies}). */
    public static final String CONFIGURATION_PROPERTY_NAME = "redis-ratelimit";

    private static final Logger log = LoggerFactory.getLogger(GatewayRateLimiter.class);

    private final RateLimiter limiter;
    private final RateLimitAnswers answers;
    private final Map<String, List<String>> routePolicies;

    public GatewayRateLimiter(RateLimiter limiter, RateLimitAnswers answers, Map<String, List<String>> routePolicies,
            ConfigurationService configurationService) {
        super(Config.class, CONFIGURATION_PROPERTY_NAME, configurationService);
        this.limiter = limiter;
        this.answers = answers;
        this.routePolicies = Map.copyOf(routePolicies);
        this.routePolicies.forEach(this::check);
    }

    /**
     * Binds a route's args as SCG does, then checks its policy names: a name no policy has (a typo)
     * fails the route's loading, and so the start, naming it (as the RateLimit filter's args do),
     * instead of a gateway that answers 500 on every request of that route.
     */
    @Override
    public void onApplicationEvent(FilterArgsEvent event) {
        super.onApplicationEvent(event);
        Config c = getConfig().get(event.getRouteId());
        if (c != null) {
            check(event.getRouteId(), c.getPolicies());
        }
    }

    private void check(String routeId, List<String> names) {
        for (String name : names) {
            try {
                limiter.policy(name);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("route '" + routeId + "': " + e.getMessage(), e);
            }
        }
    }

    @Override
    public Mono<Response> isAllowed(String routeId, String id) {
        List<PolicyCall> calls;
        try {
            calls = calls(routeId, id);
        } catch (IllegalArgumentException e) {
            return Mono.error(e); // a route without policies, or an unknown name: a configuration error, never an answer
        }
        return Decisions.permit(() -> limiter.acquireAsync(calls))
                // The filter has no hook at the response's end: what the permit holds is given back now.
                .flatMap(p -> Mono.fromCompletionStage(p.closeAsync(Map.of())).thenReturn(new Response(true, headers(p))))
                .onErrorResume(RateLimitRefusedException.class, r -> {
                    Map<String, String> h = single(answers.headers(r.getDecision()));
                    Long retry = answers.retryAfterSeconds(r.getDecision());
                    if (retry != null) {
                        h.put(HttpHeaders.RETRY_AFTER, Long.toString(retry));
                    }
                    return Mono.just(new Response(false, h));
                })
                .onErrorResume(RateLimitUnavailableException.class, u -> {
                    log.warn("rate limit '{}' fails closed while Redis cannot decide: refused", u.getPolicy());
                    return Mono.just(new Response(false, Map.of()));
                });
    }

    /** The calls of one request on {@code routeId}: each of the route's policies for the key {@code id}. */
    List<PolicyCall> calls(String routeId, String id) {
        List<String> names = policies(routeId);
        List<PolicyCall> calls = new ArrayList<>(names.size());
        for (String name : names) {
            calls.add(PolicyCall.of(limiter.policy(name), id));
        }
        return calls;
    }

    /** The policy names of {@code routeId}: its filter args, else the properties, else the default filters' args. */
    List<String> policies(String routeId) {
        Config c = getConfig().get(routeId);
        if (c != null && !c.getPolicies().isEmpty()) {
            return c.getPolicies();
        }
        List<String> p = routePolicies.get(routeId);
        if (p != null && !p.isEmpty()) {
            return p;
        }
        c = getConfig().get(RouteDefinitionRouteLocator.DEFAULT_FILTERS);
        if (c != null && !c.getPolicies().isEmpty()) {
            return c.getPolicies();
        }
        throw new IllegalArgumentException("route '" + routeId + "' has no rate-limit policy: set the filter arg "
                + CONFIGURATION_PROPERTY_NAME + ".policies or ratelimit.gateway.route-policies." + routeId);
    }

    private Map<String, String> headers(Permit p) {
        return p.decision() == null ? Map.of() : single(answers.headers(p.decision()));
    }

    private static Map<String, String> single(HttpHeaders h) {
        Map<String, String> m = new LinkedHashMap<>();
        h.forEach((name, values) -> m.put(name, String.join(", ", values)));
        return m;
    }

    /** A route's args: {@code redis-ratelimit.policies} (one name or several, decided together). */
    public static class Config {

        private List<String> policies = new ArrayList<>();

        public List<String> getPolicies() {
            return policies;
        }

        public Config setPolicies(List<String> policies) {
            this.policies = policies == null ? new ArrayList<>() : new ArrayList<>(policies);
            return this;
        }

        @Override
        public String toString() {
            return "Config{policies=" + policies + "}";
        }
    }
}
