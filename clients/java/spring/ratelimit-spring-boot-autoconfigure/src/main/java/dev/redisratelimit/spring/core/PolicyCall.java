package dev.redisratelimit.spring.core;

/**
 * One policy with what one request brings to it. A request matched by routes
 * and guarded by {@code @RateLimited} is several of these, decided together
 * by {@link RateLimiter#acquire(java.util.List)} in one RL.ALL.
 */
public record PolicyCall(CompiledPolicy policy, CallInput input) {
}
