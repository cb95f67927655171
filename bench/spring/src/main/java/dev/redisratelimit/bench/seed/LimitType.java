package dev.redisratelimit.bench.seed;

/** Seed 000's key kinds. */
public enum LimitType {
    IP, USER_ID, GLOBAL
}
