package dev.redisratelimit.spring.core;

import dev.redisratelimit.spring.annotation.KeyBy;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A named set of limits decided in one call, with how the caller's key is
 * found. Checked when built: distinct names, a lockout alone, a fixed hash
 * tag when a global limit sits beside per-key ones (so one RL.ALL stays in
 * one Cluster slot).
 */
public record PolicySpec(
        String name,
        List<LimitSpec> limits,
        KeyBy by,
        String keyExpression,
        String zoneExpression,
        Duration duplicateWindow,
        String hashTag,
        OnRedisDown onRedisDown,
        boolean legacyHeaders) {

    public PolicySpec {
        LimitSpec.require(name != null && !name.isBlank(), "a policy needs a name");
        LimitSpec.require(limits != null && !limits.isEmpty(), "policy '" + name + "' has no limits");
        limits = List.copyOf(limits);
        Set<String> names = new HashSet<>();
        boolean anyGlobal = false;
        boolean anyKeyed = false;
        for (LimitSpec l : limits) {
            LimitSpec.require(names.add(l.name()), "policy '" + name + "': two limits named '" + l.name() + "'");
            LimitSpec.require(!"duplicate".equals(l.name()) || duplicateWindow == null,
                    "policy '" + name + "': 'duplicate' names its duplicate-prevention item");
            if (l.type() == LimitType.LOCKOUT) {
                LimitSpec.require(limits.size() == 1 && duplicateWindow == null,
                        "policy '" + name + "': a LOCKOUT limit is alone in its policy (RL.LOCKCOUNT is not an RL.ALL clause)");
            }
            anyGlobal |= l.global();
            anyKeyed |= !l.global();
        }
        LimitSpec.require(duplicateWindow == null || duplicateWindow.toMillis() >= 1,
                "policy '" + name + "': preventDuplicate must be at least 1 ms");
        if (hashTag != null && hashTag.isBlank()) {
            hashTag = null;
        }
        if (anyGlobal && anyKeyed && hashTag == null) {
            // Under Cluster every key of one RL.ALL shares a slot: the policy name is the tag.
            hashTag = name;
        }
        LimitSpec.require(hashTag == null || !(hashTag.contains("{") || hashTag.contains("}")),
                "policy '" + name + "': a hash tag without braces");
        if (by == null) {
            by = KeyBy.IP;
        }
        if (onRedisDown == null) {
            onRedisDown = OnRedisDown.DEFAULT;
        }
        keyExpression = keyExpression == null || keyExpression.isBlank() ? null : keyExpression;
        zoneExpression = zoneExpression == null || zoneExpression.isBlank() ? null : zoneExpression;
    }

    public LimitSpec limit(String limitName) {
        for (LimitSpec l : limits) {
            if (l.name().equals(limitName)) {
                return l;
            }
        }
        return null;
    }
}
