package dev.redisratelimit.client;

/**
 * The golden cases this client does not match yet (see {@link WireConformanceTest}):
 * 136 of them when the runner was added, 29 after the clause keys and RL.ALL
 * followed CLIENTS.md §2 (issue 34). Remove an id once it passes: the runner
 * fails a listed id that matches, so no skip outlives its difference.
 */
final class Divergent {
    static final String[] IDS = {
        "d-cluster-refuse-refund",
        "d-concurrency-refuse",
        "d-llm-inflight",
        "d-subkey-only",
        "r-zone-missing",
        "s-estimate-bucket",
        "s-used-above-q",
        "s-used-above-store-q",
        "same-binding-twice",
        "tag-shared-concurrency",
        "window-subkey-only",
    };

    private Divergent() {
    }
}
