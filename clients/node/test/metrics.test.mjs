// Decision hooks and the metrics made from them (redis-ratelimit/opentelemetry,
// redis-ratelimit/prometheus), against real servers: admitted, refused with
// the binding limit, the Redis-down answer, a late give-back, latency;
// labels are names, never keys.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { MeterProvider, MetricReader, AggregationTemporality } from "@opentelemetry/sdk-metrics";
import { Registry } from "prom-client";
import { Policy, RateLimiter, RateLimitUnavailableError } from "redis-ratelimit";
import { OpenTelemetryHooks } from "redis-ratelimit/opentelemetry";
import { PrometheusHooks } from "redis-ratelimit/prometheus";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const { Server, waitUntil } = require("./support/servers.cjs");
const { importReadmeBlock } = require("./support/readme.cjs");

class Reader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  onShutdown() {}
  onForceFlush() {}
  async points() {
    const { resourceMetrics } = await this.collect();
    const out = {};
    for (const sm of resourceMetrics.scopeMetrics) for (const m of sm.metrics) out[m.descriptor.name] = m.dataPoints;
    return out;
  }
}

const otel = () => {
  const reader = new Reader();
  const provider = new MeterProvider({ readers: [reader] });
  return { hooks: new OpenTelemetryHooks(provider.getMeter("test")), reader };
};

class Recorder {
  events = [];
  decided(e) {
    this.events.push({ kind: "decided", ...e });
  }
  gaveBackLate(e) {
    this.events.push({ kind: "late", ...e });
  }
}

let server;
let redis;
before(async () => {
  server = await new Server().start();
  redis = new Redis({ host: "127.0.0.1", port: server.port });
});
after(async () => {
  redis?.disconnect();
  await server?.stop();
});

test("admitted and refused (with the binding limit), in the hooks and both backends; a hook that throws fails nothing", async () => {
  const rec = new Recorder();
  const { hooks: ot, reader } = otel();
  const registry = new Registry();
  const errors = [];
  const broken = { decided: () => { throw new Error("a metrics backend failing"); } };
  const limiter = new RateLimiter(redis, { timeout: 3000, hooks: [broken, rec, ot, new PrometheusHooks(registry)], onError: (e) => errors.push(e.message) });
  const p = new Policy("sms", { prefix: "m1:" }).slidingWindow("short", 2, 10_000).slidingWindow("long", 5, 3_600_000);
  const got = [];
  for (let i = 0; i < 3; i++) got.push((await limiter.decide(p, "phone-secret-key")).limited);
  assert.deepEqual(got, [false, false, true]);
  assert.deepEqual(errors, ["a metrics backend failing", "a metrics backend failing", "a metrics backend failing"]);
  assert.deepEqual(rec.events.map((e) => [e.policy, e.outcome, e.limit, e.mode]), [
    ["sms", "admitted", null, null],
    ["sms", "admitted", null, null],
    ["sms", "refused", "short", null],
  ]);
  assert.ok(rec.events.every((e) => e.seconds > 0 && e.seconds < 3));
  const hist = (await registry.getSingleMetric("ratelimit_decisions_seconds").get()).values;
  const count = (outcome, limit) => hist.find((v) => v.metricName === "ratelimit_decisions_seconds_count" && v.labels.outcome === outcome && v.labels.limit === limit)?.value;
  assert.equal(count("admitted", "none"), 2);
  assert.equal(count("refused", "short"), 1);
  const points = (await reader.points())["ratelimit.decisions"];
  assert.deepEqual(points.map((pt) => [pt.attributes.outcome, pt.attributes.limit, pt.value.count]).sort(), [["admitted", "none", 2], ["refused", "short", 1]]);
  // Names only: no label holds the caller's key.
  assert.ok(!(await registry.metrics()).includes("secret"));
  limiter.close();
});

test("unavailable: the policy's Redis-down mode, counted as a fallback", async () => {
  const rec = new Recorder();
  const registry = new Registry();
  const dead = new Redis({ host: "127.0.0.1", port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  dead.on("error", () => {});
  const limiter = new RateLimiter(dead, { timeout: 300, probeInterval: 60_000, hooks: [rec, new PrometheusHooks(registry)] });
  const closed = new Policy("api-custom").slidingWindow("custom", 5, 30_000);
  const opened = new Policy("api-default", { failure: "open" }).slidingWindow("default", 10, 60_000);
  await assert.rejects(limiter.decide(closed, "ip"), RateLimitUnavailableError);
  await assert.rejects(limiter.decide(opened, "ip"), RateLimitUnavailableError); // the circuit is open now
  assert.deepEqual(rec.events.map((e) => [e.policy, e.outcome, e.mode]), [
    ["api-custom", "unavailable", "fail_closed"],
    ["api-default", "unavailable", "fail_open"],
  ]);
  const fallbacks = (await registry.getSingleMetric("ratelimit_fallbacks_total").get()).values.map((v) => [v.labels.policy, v.labels.mode, v.value]);
  assert.deepEqual(fallbacks.sort(), [["api-custom", "fail_closed", 1], ["api-default", "fail_open", 1]]);
  limiter.close();
  dead.disconnect();
});

test("a reply that lands after the budget: unavailable, then one late give-back", async () => {
  const own = await new Server().start();
  const client = new Redis({ host: "127.0.0.1", port: own.port });
  client.on("error", () => {});
  const rec = new Recorder();
  const { hooks: ot, reader } = otel();
  const registry = new Registry();
  const l = new RateLimiter(client, { timeout: 200, probeInterval: 50, hooks: [rec, ot, new PrometheusHooks(registry)] });
  const p = new Policy("llm").concurrency("inflight", 2, 60_000).quota("tokens", "UTC", "day", 1000, { cost: "estimate" });
  try {
    await client.ping();
    own.pause();
    try {
      await assert.rejects(l.acquire(p, "k", { estimate: 100 }), RateLimitUnavailableError);
    } finally {
      own.resume();
    }
    await waitUntil("the late give-back", async () => rec.events.some((e) => e.kind === "late"), 5000, 20);
    assert.deepEqual(rec.events.map((e) => [e.kind, e.policy, e.outcome ?? null, e.mode ?? null]), [
      ["decided", "llm", "unavailable", "fail_closed"],
      ["late", "llm", null, null],
    ]);
    assert.ok(rec.events[0].seconds >= 0.19 && rec.events[0].seconds < 1, String(rec.events[0].seconds));
    assert.equal((await registry.getSingleMetric("ratelimit_late_give_backs_total").get()).values[0].value, 1);
    assert.deepEqual((await reader.points())["ratelimit.late_give_backs"].map((pt) => pt.value), [1]);
  } finally {
    l.close();
    client.disconnect();
    await own.stop();
  }
});

test("hooks are checked when the limiter is made", () => {
  assert.throws(() => new RateLimiter(redis, { hooks: [{}] }), TypeError);
  assert.throws(() => new RateLimiter(redis, { hooks: {} }), TypeError);
});

test("the README's metrics block runs as written", async () => {
  const printed = [];
  const log = console.log;
  console.log = (...args) => printed.push(args.join(" "));
  let mod;
  try {
    mod = await importReadmeBlock("new PrometheusHooks(", "metrics", (block) =>
      block.replace('"redis://localhost:6379"', `"redis://127.0.0.1:${server.port}"`) + "export { redis, limiter };\n");
  } finally {
    console.log = log;
  }
  mod.limiter.close();
  mod.redis.disconnect();
  assert.deepEqual(printed, ["1"]);
});
