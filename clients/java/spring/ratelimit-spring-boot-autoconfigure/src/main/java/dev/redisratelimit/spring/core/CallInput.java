package dev.redisratelimit.spring.core;

/**
 * What one invocation brings to its policy: the caller's key, the zone of its
 * quotas (null: each limit's own), each clause's cost (by clause index), and a
 * digest of the request body for duplicate prevention (null: none).
 */
public record CallInput(String key, String zone, long[] costs, String bodyDigest) {
}
