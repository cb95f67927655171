// Compiled by types.test.mjs as a user's ES-module TypeScript would be: the
// Fastify plugin's route options and request.rateLimit are typed, and so are
// the decision hooks and the metric hooks.
import Fastify from "fastify";
import { Policy, RateLimiter, type DecisionEvent, type DecisionHooks } from "redis-ratelimit";
import { rateLimitPlugin, keys, type RateLimitInfo, type RouteRateLimit } from "redis-ratelimit/fastify";
import { OpenTelemetryHooks } from "redis-ratelimit/opentelemetry";
import { PrometheusHooks } from "redis-ratelimit/prometheus";
import { Registry } from "prom-client";

export async function build(limiter: RateLimiter) {
  const app = Fastify();
  await app.register(rateLimitPlugin, { limiter, legacyHeaders: false });
  const policy = new Policy("fy").slidingWindow("w", 1, 1000);
  const route: RouteRateLimit = { policy, key: keys.ip() };
  app.get("/", { config: { rateLimit: route } }, async (request) => {
    const info: RateLimitInfo | null = request.rateLimit;
    return { remaining: info?.decision?.binding.remaining ?? null };
  });
  app.get("/two", { config: { rateLimit: { policies: [{ policy, key: keys.header("X-User") }], legacyHeaders: true } } }, async () => ({}));
  // @ts-expect-error a route's rateLimit needs a key resolver
  app.get("/bad", { config: { rateLimit: { policy } } }, async () => ({}));
  return app;
}

export function hooks(): DecisionHooks[] {
  const mine: DecisionHooks = {
    decided(e: DecisionEvent) {
      void [e.policy, e.outcome, e.limit, e.mode, e.seconds];
    },
  };
  return [mine, new OpenTelemetryHooks(), new PrometheusHooks(new Registry())];
}
