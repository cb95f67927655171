package dev.redisratelimit.client;

/** A calendar period of RL.QUOTA, in the quota's zone. */
public enum QuotaPeriod {
    MINUTE, HOUR, DAY, WEEK, MONTH, YEAR
}
