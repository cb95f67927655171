package dev.redisratelimit.spring.core;

/**
 * One policy with what one request brings to it. A request matched by routes
 * and guarded by {@code @RateLimited} is several of these, decided together
 * by {@link RateLimiter#acquire(java.util.List)} in one RL.ALL.
 */
public record PolicyCall(CompiledPolicy policy, CallInput input) {

    /** The routes' calls then the handler's own (last); a route naming the same policy and key counts once. */
    public static java.util.List<PolicyCall> withRoutes(java.util.List<PolicyCall> routes, PolicyCall own) {
        java.util.List<PolicyCall> all = new java.util.ArrayList<>(routes.size() + 1);
        for (PolicyCall c : routes) {
            if (!(c.policy().name().equals(own.policy().name()) && c.input().key().equals(own.input().key()))) {
                all.add(c);
            }
        }
        all.add(own);
        return all;
    }
}
