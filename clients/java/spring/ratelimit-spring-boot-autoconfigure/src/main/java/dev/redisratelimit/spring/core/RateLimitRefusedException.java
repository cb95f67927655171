package dev.redisratelimit.spring.core;

/** A call refused by its limits; carries the decision for the HTTP answer (429). */
public class RateLimitRefusedException extends RuntimeException {
    private final transient Decision decision;

    public RateLimitRefusedException(Decision decision) {
        super("rate limit '" + decision.policy() + "' refused the call"
                + (decision.bindingItem() != null ? " (limit '" + decision.bindingItem().name() + "')" : ""), null, false, false);
        this.decision = decision;
    }

    public Decision getDecision() {
        return decision;
    }
}
