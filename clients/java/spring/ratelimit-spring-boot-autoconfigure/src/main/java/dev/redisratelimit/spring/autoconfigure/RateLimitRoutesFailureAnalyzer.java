package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.spring.http.RateLimitRoutesException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** Names the ratelimit.routes entry that stopped the start, and what a route needs. */
class RateLimitRoutesFailureAnalyzer extends AbstractFailureAnalyzer<RateLimitRoutesException> {
    @Override
    protected FailureAnalysis analyze(Throwable root, RateLimitRoutesException cause) {
        return new FailureAnalysis("A rate-limit route cannot work: " + cause.getMessage(),
                "Fix " + cause.getProperty() + " in your configuration. A route needs paths (PathPattern syntax: /api/**, "
                        + "/items/{id}), optional methods (GET, POST, ...), a policy defined under ratelimit.policies, and a "
                        + "key-resolver: ip, user, header:<Name> or spel:<expression>.", cause);
    }
}
