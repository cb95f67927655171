// The golden sequence cases of clients/conformance/sequences/ (its README
// is the schema): a series of calls over a controlled clock, each with the
// decision expected — against the local backend (redis-ratelimit/local) and
// against the real module (its `now` sent as the case's clock), so both
// decide alike. The Python and Java clients run the same files.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Policy, RateLimiter, transportFor } from "redis-ratelimit";
import { LocalBackend, ManualClock } from "redis-ratelimit/local";
import { rateLimitHeaders, refusal } from "redis-ratelimit/express";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const { Server } = require("./support/servers.cjs");

const DIR = fileURLToPath(new URL("../../conformance/sequences/", import.meta.url));
const CASES = readdirSync(DIR)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .flatMap((f) => JSON.parse(readFileSync(DIR + f, "utf8")).cases);
const START_MS = 1_767_225_600_000; // 2026-01-01T00:00:00Z

function policyOf(d, prefix) {
  const p = new Policy(d.name, { prefix: prefix + (d.prefix ?? ""), ...(d.tag ? { tag: d.tag } : {}), ...(d.counts ? { counts: d.counts } : {}) });
  for (const l of d.limits) {
    const o = l.cost !== undefined ? { cost: l.cost } : {};
    if (l.kind === "window") p.slidingWindow(l.name, l.count, l.window, o);
    else if (l.kind === "bucket") p.tokenBucket(l.name, l.rate, l.per, l.burst, o);
    else if (l.kind === "quota") p.quota(l.name, l.zone, l.period, l.limit, o);
    else if (l.kind === "concurrency") p.concurrency(l.name, l.limit, l.ttl, o);
    else p.lockout(l.name, l.max, l.window, l.lock_time);
  }
  return p;
}

/** The real server's transport, every `now` (`*`) sent as the case's clock. */
function clocked(transport, clock) {
  const at = (args) => args.map((a) => (a === "*" ? String(clock.now()) : a));
  return {
    kind: transport.kind,
    send: (call) => transport.send({ ...call, args: at(call.args) }),
    batch: (calls) => transport.batch(calls.map((c) => ({ ...c, args: at(c.args) }))),
    sendAny: (args) => transport.sendAny(at(args)),
  };
}

/** Every difference between the case's expectations and the decisions ([] when none). */
async function run(c, transport, clock, prefix = "") {
  const policies = Object.fromEntries(c.policies.map((d) => [d.name, policyOf(d, prefix)]));
  const limiter = new RateLimiter(transport, { timeout: 5000, runtimeLimits: false });
  const held = {};
  const wrong = [];
  try {
    for (const [n, step] of c.steps.entries()) {
      if (step.advance !== undefined) {
        clock.advance(step.advance);
        continue;
      }
      if (step.close !== undefined) {
        const permit = held[step.close];
        delete held[step.close];
        if (step.used !== undefined) permit.used(step.used);
        await permit.close();
        continue;
      }
      const x = step.call;
      const policy = policies[x.policy];
      const options = Object.fromEntries(["cost", "estimate"].filter((k) => x[k] !== undefined).map((k) => [k, x[k]]));
      // renew: false — the clock is the case's, no renewal timer
      const permit = policy.needsPermit ? await limiter.acquire(policy, x.key, { ...options, renew: false }) : null;
      const d = permit ? permit.decision : await limiter.decide(policy, x.key, options);
      const headers = Object.fromEntries(rateLimitHeaders(d));
      if (d.limited) for (const [k, v] of refusal(d).headers) headers[k] = v;
      const got = { limited: d.limited, binding: d.binding.name, retry_after_ms: d.retryAfter, headers };
      for (const [k, v] of Object.entries(step.expect)) {
        const g = k === "headers" ? Object.fromEntries(Object.keys(v).map((h) => [h, headers[h]])) : got[k];
        if (JSON.stringify(g) !== JSON.stringify(v)) wrong.push(`step ${n + 1}: ${k} ${JSON.stringify(g)}, expected ${JSON.stringify(v)}`);
      }
      if (!permit || d.limited) continue;
      if (step.outcome === "success") permit.succeeded();
      else if (step.outcome === "failure") permit.failed();
      if (step.hold !== undefined) held[step.hold] = permit;
      else {
        if (step.used !== undefined) permit.used(step.used);
        await permit.close();
      }
    }
    for (const p of Object.values(held)) await p.close();
  } finally {
    limiter.close();
  }
  return wrong;
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

test("there are sequences of every kind", () => {
  const kinds = new Set(CASES.flatMap((c) => c.policies.flatMap((p) => p.limits.map((l) => l.kind))));
  assert.deepEqual([...kinds].sort(), ["bucket", "concurrency", "lockout", "quota", "window"]);
  assert.ok(CASES.length >= 9);
});

let runs = 0;
for (const c of CASES) {
  test(`local backend: ${c.id}: ${c.about}`, async () => {
    const clock = new ManualClock(START_MS);
    assert.deepEqual(await run(c, new LocalBackend({ clock }), clock), []);
  });
  test(`module: ${c.id}`, async () => {
    const clock = new ManualClock(START_MS);
    assert.deepEqual(await run(c, clocked(transportFor(redis), clock), clock, `seq${runs++}:`), []);
  });
}
