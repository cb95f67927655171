package dev.redisratelimit.client;

import java.util.List;

/**
 * The outcome of one decision: admitted or not, every named limit's state in
 * the policies' order, and the binding one (the limit the reply names).
 * {@code retryAfterMs} is the binding limit's ms to wait, -1 when waiting
 * cannot help (or admitted); {@code bindingKind} lets an HTTP adapter answer
 * a concurrency refusal with a small Retry-After; {@code legacyHeaders}: a
 * policy asks for X-RateLimit-* headers.
 */
public record PolicyDecision(
        String policy,
        boolean admitted,
        List<LimitState> limits,
        int binding,
        long retryAfterMs,
        Limit.Kind bindingKind,
        Kind kind,
        boolean legacyHeaders) {

    /** Why a refusal refused (its problem type). */
    public enum Kind {
        ADMITTED, RATE_LIMITED, DUPLICATE, LOCKED
    }

    /** The binding limit's state, or null when there is none (a local refusal while Redis is down). */
    public LimitState bindingLimit() {
        return binding >= 0 && binding < limits.size() ? limits.get(binding) : null;
    }

    public boolean waitingCannotHelp() {
        return !admitted && retryAfterMs < 0;
    }
}
