package dev.redisratelimit.client;

/** A call refused by its limits; carries the decision for the HTTP answer (429). */
public class RateLimitRefusedException extends RuntimeException {
    private final transient PolicyDecision decision;

    public RateLimitRefusedException(PolicyDecision decision) {
        super("rate limit '" + decision.policy() + "' refused the call"
                + (decision.bindingLimit() != null ? " (limit '" + decision.bindingLimit().name() + "')" : ""), null, false, false);
        this.decision = decision;
    }

    public PolicyDecision getDecision() {
        return decision;
    }
}
