package dev.redisratelimit.spring.core;

import dev.redisratelimit.spring.annotation.LimitType;
import java.util.List;

/**
 * The outcome of one call's decision: admitted or not, every named limit's
 * state in the policy's order, and the binding one (the limit the reply
 * names). {@code retryAfterMs} is the binding limit's ms to wait, -1 when
 * waiting cannot help (or admitted); {@code bindingType} lets the HTTP layer
 * answer a concurrency refusal with a small Retry-After; {@code legacyHeaders}:
 * the policy asks for X-RateLimit-* headers.
 */
public record Decision(
        String policy,
        boolean admitted,
        List<ItemState> items,
        int binding,
        long retryAfterMs,
        LimitType bindingType,
        Kind kind,
        boolean legacyHeaders) {

    /** Why a refusal refused (its problem type). */
    public enum Kind {
        ADMITTED, RATE_LIMITED, DUPLICATE, LOCKED
    }

    public ItemState bindingItem() {
        return binding >= 0 && binding < items.size() ? items.get(binding) : null;
    }

    public boolean waitingCannotHelp() {
        return !admitted && retryAfterMs < 0;
    }
}
