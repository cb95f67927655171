package dev.redisratelimit.spring.core;

import dev.redisratelimit.spring.annotation.LimitType;
import java.util.List;

/**
 * Limits that share one key and one RL.ALL clause: sliding windows of one key
 * (one CHECK clause), quota periods of one zone (one QUOTA clause), token
 * buckets of one key (one THROTTLE clause); each in-flight limit is a LEASE
 * clause of its own. {@code items} are the indexes of its limits in the
 * policy's item order; {@code duplicate} marks the duplicate-prevention CHECK.
 */
public record Clause(
        LimitType type,
        List<Integer> items,
        boolean global,
        String zone,
        String cost,
        String settle,
        boolean duplicate,
        String keyName) {
}
