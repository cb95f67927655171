package dev.redisratelimit.client;

/** One named limit of a policy and its state after a decision. */
public record LimitState(Limit limit, RuleState state) {

    public String name() {
        return limit.name();
    }
}
