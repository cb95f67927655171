package dev.redisratelimit.client;


/**
 * Told of each decision the {@link RateLimiter} makes, on the calling thread
 * (so keep it cheap): the Micrometer meters implement it. Only the policy's
 * name is passed, never the caller's key, so an observer cannot grow a series
 * per caller.
 */
public interface DecisionObserver {

    /** What the call saw. */
    enum Outcome {
        /** The call proceeds (by Redis's decision, or by a fail-open or local fallback). */
        ADMITTED,
        /** A limit refused it (429). */
        REFUSED,
        /** Redis could not decide and the policy fails closed (503). */
        UNAVAILABLE,
        /** Anything else: a configuration error or an error reply. */
        ERROR
    }

    /** Why a decision could not use Redis, or failed. */
    enum ErrorKind {
        /** No answer within the decision budget. */
        TIMEOUT,
        /** The connection failed. */
        CONNECTION,
        /** Redis was already known down: the call did not try (the background probe will). */
        CIRCUIT_OPEN,
        /** Bad configuration met at run time (a SpEL key that is null, Redis refusing the arguments). */
        CONFIGURATION,
        /** Any other failure. */
        OTHER
    }

    DecisionObserver NONE = new DecisionObserver() {
    };

    /** One decision, its outcome, the refusal's kind when refused (else null), and how long it took. */
    default void decided(String policy, Outcome outcome, PolicyDecision.Kind refusal, long nanos) {
    }

    /** A decision that could not use Redis, or failed, and why. */
    default void error(String policy, ErrorKind kind) {
    }

    /** A decision answered by the policy's Redis-down behaviour instead of Redis. */
    default void fallback(String policy, FailMode mode) {
    }
}
