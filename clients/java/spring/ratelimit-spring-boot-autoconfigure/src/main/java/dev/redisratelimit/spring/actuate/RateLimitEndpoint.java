package dev.redisratelimit.spring.actuate;

import dev.redisratelimit.client.Limit;
import dev.redisratelimit.client.LimitState;
import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyDecision;
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
 * COST 0 — nothing is charged or written (a lockout: PTTL/GET of its keys).
 * Expose it like any endpoint ({@code management.endpoints.web.exposure.include=ratelimit});
 * it shows callers' keys' state, so keep it behind your management security.
 *
 * <p>Writes, for the operator who must unlock a customer — {@code DELETE
 * /actuator/ratelimit/{policy}?key=...} (reset: that key's counters and leases
 * deleted) and {@code POST /actuator/ratelimit/{policy}} with
 * {@code {"key": ..., "action": "penalty"|"reward", "units": n}} — exist only
 * where Actuator's own access control allows them: the endpoint's default
 * access is read-only; {@code management.endpoint.ratelimit.access=unrestricted}
 * opens the writes (behind your management security).
 */
@Endpoint(id = "ratelimit", defaultAccess = org.springframework.boot.actuate.endpoint.Access.READ_ONLY)
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
        PolicyDecision d = limiter.state(p, key);
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

    /** Reset: {@code key}'s own counters and leases under {@code policy} deleted (an unlock); null (404) for an unknown policy. */
    @org.springframework.boot.actuate.endpoint.annotation.DeleteOperation
    public Map<String, Object> reset(@Selector String policy, String key) {
        Policy p = limiter.policies().get(policy);
        if (p == null) {
            return null;
        }
        long deleted = limiter.reset(p, key);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("policy", policy);
        out.put("key", key);
        out.put("deletedKeys", deleted);
        return out;
    }

    /** {@code action} "penalty" (DEBIT) or "reward" (REFUND) of {@code units} on the key's windows, buckets and quotas; the state after. */
    @org.springframework.boot.actuate.endpoint.annotation.WriteOperation
    public Map<String, Object> adjust(@Selector String policy, String key, String action, long units) {
        Policy p = limiter.policies().get(policy);
        if (p == null) {
            return null;
        }
        switch (action) {
            case "penalty" -> limiter.penalty(p, key, units);
            case "reward" -> limiter.reward(p, key, units);
            default -> throw new IllegalArgumentException("action: 'penalty' or 'reward', not '" + action + "'");
        }
        return state(policy, key);
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
