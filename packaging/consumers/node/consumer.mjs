// The tarball from dist/, installed into a fresh npm project: one limit of one
// call a minute, decided twice against REDIS_URL (admitted, then refused).
import { createRequire } from "node:module";
import Redis from "ioredis";
import { Policy, RateLimitClient, RateLimiter } from "redis-ratelimit";

const redis = new Redis(process.env.REDIS_URL);
await new RateLimitClient(redis).assertModuleLoaded();
const limiter = new RateLimiter(redis);
const policy = new Policy("consumer", { prefix: "consumer:" }).slidingWindow("once", 1, 60_000);
const limited = [];
for (let i = 0; i < 2; i++) limited.push((await limiter.decide(policy, "npm")).limited);
const require = createRequire(import.meta.url);
console.log(JSON.stringify({
  version: require("redis-ratelimit/package.json").version,
  file: require.resolve("redis-ratelimit"),
  limited,
}));
redis.disconnect();
