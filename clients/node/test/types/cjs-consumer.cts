// The same types from CommonJS TypeScript (require).
import rr = require("redis-ratelimit");
import ex = require("redis-ratelimit/express");

export const policy: rr.Policy = new rr.Policy("cjs").tokenBucket("rate", 10, 1000, 5);
export const mw: ReturnType<typeof ex.rateLimit> = ex.rateLimit({ limiter: {} as rr.RateLimiter, policy, key: ex.keys.ip() });
export const err: rr.RateLimitError = new rr.RateLimitError("x");
