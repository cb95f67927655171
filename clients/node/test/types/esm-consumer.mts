// Compiled by types.test.mjs as a user's ES-module TypeScript would be
// (module nodenext): the shipped .d.ts files type every public name, and
// `await using` closes a permit.
import { Redis } from "ioredis";
import { Policy, RateLimiter, RateLimitClient, type Decision, type PolicyCall, type PolicyDecision, type Permit } from "redis-ratelimit";
import { rateLimit, keys, type RateLimitInfo } from "redis-ratelimit/express";
import express from "express";

export async function run(port: number): Promise<string> {
  const redis = new Redis({ host: "127.0.0.1", port });
  const rl = new RateLimitClient(redis);
  await rl.assertModuleLoaded();
  const d: Decision = await rl.check("types:k", { count: 2, window: 1000 });
  const limiter = new RateLimiter(redis);
  const policy = new Policy("types", { prefix: "types:" }).concurrency("inflight", 1, 10_000).quota("tokens", "UTC", "day", 100, { cost: "estimate" });
  let closedInside: number | null = null;
  {
    await using permit: Permit = await limiter.acquire(policy, "u", { estimate: 10 });
    const decision: PolicyDecision = permit.decision;
    closedInside = decision.limits.length;
    permit.used(3);
  }
  const left = await rl.quotaPeek("types:types:{u}:tokens", "UTC", { day: 100 }, { cost: 0 });
  const inflight = await rl.leasePeek("types:types:{u}:inflight", { limit: 1, cost: 0 });
  const app = express();
  app.get("/", rateLimit({ limiter, policy: new Policy("p").slidingWindow("w", 1, 1000), key: keys.ip() }), (req, res) => {
    const info: RateLimitInfo | undefined = req.rateLimit;
    res.json({ remaining: info?.decision?.binding.remaining });
  });
  // several policies on one route: one decision
  const perIp = new Policy("types-ip").slidingWindow("ip", 5, 1000);
  const bound: PolicyCall[] = [perIp.bind("192.0.2.1"), policy.bind("u", { estimate: 1 })];
  app.post("/two", rateLimit({ limiter, policies: [{ policy: perIp, key: keys.ip() }, { policy, key: keys.header("X-User"), estimate: () => 1 }] }), (_req, res) => res.end());
  const both: PolicyDecision = (await limiter.decideAll([perIp.bind("192.0.2.1")]));
  await limiter.withPermitAll(bound, {}, (p: Permit) => p.used(0));
  void both.policies;
  limiter.close();
  redis.disconnect();
  return JSON.stringify({ limited: d.limited, limits: closedInside, left: left.remaining, inflight: inflight.remaining });
}

// The local backend's types (redis-ratelimit/local): a test's limiter without Redis.
import { LocalBackend, ManualClock } from "redis-ratelimit/local";

export async function local(): Promise<boolean> {
  const backend: LocalBackend = new LocalBackend({ clock: new ManualClock() });
  const limiter: RateLimiter = backend.limiter({ timeout: 1000 });
  const d: PolicyDecision = await limiter.decide(new Policy("t", { limits: "1/second" }), "k");
  backend.advance(1000);
  limiter.close();
  return d.limited;
}
