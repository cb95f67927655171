package dev.redisratelimit.client;

/**
 * The reply of RL.CHECK, RL.PEEK, RL.THROTTLE(PEEK), RL.QUOTA(PEEK) and
 * RL.LEASEPEEK: the binding rule's state.
 */
public class Decision extends RuleState {

    Decision(boolean limited, int rule, long limit, long remaining, long retryAfterMillis, long resetAfterMillis) {
        super(limited, rule, limit, remaining, retryAfterMillis, resetAfterMillis);
    }
}
