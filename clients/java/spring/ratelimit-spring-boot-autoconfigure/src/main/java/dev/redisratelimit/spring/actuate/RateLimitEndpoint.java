package dev.redisratelimit.spring.actuate;

import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.Limit;
import dev.redisratelimit.client.RateLimiter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;

/**
 * {@code /actuator/ratelimit}: the policies and their limits in force (runtime
 * changes included); {@code /actuator/ratelimit/{policy}?key=...}: what that
 * policy's limits hold now for a caller's key (remaining, reset; the binding
 * limit: the one with the fewest calls left), read with one RL.ALLPEEK at
 * COST 0 — nothing is charged or written. Read-only: no write operation.
 * Expose it like any endpoint ({@code management.endpoints.web.exposure.include=ratelimit});
 * it shows callers' keys' state, so keep it behind your management security.
 */
@Endpoint(id = "ratelimit")
public class RateLimitEndpoint {

    private final RateLimiter limiter;

    public RateLimitEndpoint(RateLimiter limiter) {
        this.limiter = limiter;
    }

    @ReadOperation
    public Map<String, Object> policies() {
        Map<String, Object> out = new TreeMap<>();
        limiter.policies().forEach((name, p) -> out.put(name, describe(p)));
        return Map.of("policies", out);
    }

    /** A policy's state for one key; null (404) for an unknown policy, or a lockout policy (no read-only peek). */
    @ReadOperation
    public Map<String, Object> state(@Selector String policy, String key) {
        Policy p = limiter.policies().get(policy);
        if (p == null) {
            return null;
        }
        PolicyDecision d = limiter.peek(p, key);
        if (d == null) {
            return null;
        }
        List<Map<String, Object>> limits = new ArrayList<>();
        boolean nextAdmitted = true;
        for (LimitState s : d.limits()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", s.name());
            m.put("limit", s.q());
            if (s.w() >= 0) {
                m.put("windowSeconds", s.w());
            }
            m.put("remaining", s.r());
            m.put("resetSeconds", s.t());
            m.put("exhausted", s.r() == 0);
            limits.add(m);
            nextAdmitted &= s.r() > 0;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("policy", policy);
        out.put("key", key);
        // At COST 0 nothing is ever refused; a call of cost 1 would be iff no limit is used up.
        out.put("nextCallAdmitted", nextAdmitted);
        if (d.bindingLimit() != null) {
            out.put("binding", d.bindingLimit().name());
        }
        out.put("limits", limits);
        return out;
    }

    private Map<String, Object> describe(Policy p) {
        List<Map<String, Object>> limits = new ArrayList<>();
        for (Limit l : p.limits()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("name", l.name());
            m.put("type", l.kind().name());
            m.put("count", limiter.runtimeLimits().count(p.name(), l));
            limits.add(m);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("limits", limits);
        out.put("onRedisDown", dev.redisratelimit.spring.annotation.OnRedisDown.of(p.onRedisDown()).name());
        return out;
    }
}
