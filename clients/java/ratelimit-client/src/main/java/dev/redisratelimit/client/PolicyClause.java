package dev.redisratelimit.client;

import java.time.ZoneId;
import java.util.List;

/**
 * Limits of a {@link Policy} that share one key and one RL.ALL clause:
 * sliding windows of one key (one CHECK clause), quota periods of one zone
 * (one QUOTA clause), token buckets of one key (one THROTTLE clause); each
 * in-flight limit is a LEASE clause of its own. {@code items} are the indexes
 * of its limits in the policy's item order; {@code cost} and {@code settle}
 * the labels its limits share ({@link Limit}); {@code duplicate} marks the
 * duplicate-prevention CHECK; {@code keyName} ends its key.
 */
public record PolicyClause(
        Limit.Kind kind,
        List<Integer> items,
        boolean shared,
        ZoneId zone,
        String cost,
        String settle,
        boolean duplicate,
        String keyName) {
}
