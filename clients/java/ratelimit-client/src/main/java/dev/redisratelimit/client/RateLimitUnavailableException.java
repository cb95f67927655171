package dev.redisratelimit.client;

/** Redis did not decide within the budget and the policy fails closed (503). */
public class RateLimitUnavailableException extends RuntimeException {
    private final String policy;

    public RateLimitUnavailableException(String policy, Throwable cause) {
        super("rate limit '" + policy + "' could not be decided: Redis is unavailable", cause);
        this.policy = policy;
    }

    public String getPolicy() {
        return policy;
    }
}
