package dev.redisratelimit.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A policy's decision: admitted or not, every named limit's state in the
 * policy's order (from RL.ALL's {@code DETAILS}, or the one command's reply),
 * and the binding one. Immutable.
 */
public final class PolicyDecision {

    private final Policy policy;
    private final boolean limited;
    private final List<LimitState> limits;
    private final int binding;
    private final Object reply;

    private PolicyDecision(Policy policy, boolean limited, List<LimitState> limits, int binding, Object reply) {
        this.policy = policy;
        this.limited = limited;
        this.limits = List.copyOf(limits);
        this.binding = binding;
        this.reply = reply;
    }

    static PolicyDecision ofSingle(Policy policy, Limit limit, Decision d) {
        return new PolicyDecision(policy, d.limited(), List.of(new LimitState(limit, d)), 0, d);
    }

    /** RL.LOCKCOUNT's reply as a rule state: q = max, r = what is left before the lock, reset/retry = the ttl. */
    static PolicyDecision ofLockout(Policy policy, Limit limit, LockoutDecision d) {
        long remaining = d.limited() ? 0 : Math.max(0, limit.quota() - d.count());
        long ttl = Math.max(0, d.ttlMillis());
        RuleState s = new RuleState(d.limited(), 1, limit.quota(), remaining, d.limited() ? d.ttlMillis() : -1, ttl);
        return new PolicyDecision(policy, d.limited(), List.of(new LimitState(limit, s)), 0, d);
    }

    static PolicyDecision of(Policy policy, AllDecision d) {
        if (!d.hasDetails()) {
            throw new RateLimitException("RL.ALL answered without DETAILS: the module predates it");
        }
        List<Policy.Group> groups = policy.groups();
        List<LimitState> states = new ArrayList<>();
        int binding = -1;
        for (Limit l : policy.limits()) {
            for (int c = 0; c < groups.size(); c++) {
                int r = groups.get(c).limits().indexOf(l);
                if (r >= 0) {
                    if (c + 1 == d.clause() && r + 1 == d.rule()) {
                        binding = states.size();
                    }
                    states.add(new LimitState(l, d.details().get(c).get(r)));
                }
            }
        }
        return new PolicyDecision(policy, d.limited(), states, binding < 0 ? 0 : binding, d);
    }

    public Policy policy() {
        return policy;
    }

    public boolean limited() {
        return limited;
    }

    public boolean admitted() {
        return !limited;
    }

    /** Every named limit's state, in the policy's order. */
    public List<LimitState> limits() {
        return limits;
    }

    /** The limit that decided: refused, the one to wait for; admitted, the one with the fewest left. */
    public LimitState binding() {
        return limits.get(binding);
    }

    public Optional<Duration> retryAfter() {
        return binding().state().retryAfter();
    }

    public boolean waitingCannotHelp() {
        return binding().state().waitingCannotHelp();
    }

    /** The command's own decision ({@link AllDecision}, {@link Decision}, {@link LeaseDecision} or {@link LockoutDecision}). */
    public Object reply() {
        return reply;
    }

    @Override
    public String toString() {
        return "PolicyDecision[" + policy.name() + ", limited=" + limited + ", binding=" + binding().name() + ", limits=" + limits + "]";
    }
}
