// The express middleware in-process (the example app's HTTP tests cover the
// SERVICES.md contract): key resolvers and `trust proxy`, default headers,
// failure modes, and a custom in-flight Retry-After.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import express from "express";
import { Policy, RateLimitClient, RateLimiter } from "redis-ratelimit";
import { rateLimit, keys, ProblemError } from "redis-ratelimit/express";
import { redis, limiter } from "./support/one-server.mjs";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const { Server, freePort } = require("./support/servers.cjs");

async function serve(configure) {
  const app = express();
  configure(app);
  const port = await freePort();
  const srv = await new Promise((resolve) => {
    const s = app.listen(port, "127.0.0.1", () => resolve(s));
  });
  const get = async (path, headers = {}) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers });
    return { status: res.status, h: (n) => res.headers.get(n), body: await res.json().catch(() => null) };
  };
  return { get, port, close: () => new Promise((r) => srv.close(r)) };
}

test("keys.ip follows express's trust proxy; no X-RateLimit-* unless asked", async () => {
  const policy = new Policy("ip", { prefix: "ex1:" }).slidingWindow("w", 1, 60_000);
  const seen = [];
  for (const trust of [false, "loopback"]) {
    const s = await serve((app) => {
      app.set("trust proxy", trust);
      app.get("/", (req, _res, next) => (seen.push(req.ip), next()), rateLimit({ limiter, policy, key: keys.ip() }), (_req, res) => res.json({}));
    });
    try {
      const r = await s.get("/", { "X-Forwarded-For": `192.0.2.${trust ? 2 : 1}` });
      assert.equal(r.status, 200);
      assert.equal(r.h("x-ratelimit-limit"), null);
      assert.equal(r.h("ratelimit"), '"w";r=0;t=60');
    } finally {
      await s.close();
    }
  }
  assert.deepEqual(seen, ["127.0.0.1", "192.0.2.2"]);
});

test("keys.user: req.user.id, 401 problem when absent; a key resolver's ProblemError is answered", async () => {
  const policy = new Policy("user", { prefix: "ex2:" }).slidingWindow("w", 5, 60_000);
  const s = await serve((app) => {
    app.use((req, _res, next) => {
      if (req.get("X-Id")) req.user = { id: req.get("X-Id") };
      next();
    });
    app.get("/u", rateLimit({ limiter, policy, key: keys.user() }), (req, res) => res.json({ remaining: req.rateLimit.decision.binding.remaining }));
    app.get("/teapot", rateLimit({ limiter, policy, key: () => { throw new ProblemError(400, "bad-request", "no tea"); } }), (_req, res) => res.json({}));
  });
  try {
    assert.deepEqual((await s.get("/u", { "X-Id": "7" })).body, { remaining: 4 });
    const anon = await s.get("/u");
    assert.equal(anon.status, 401);
    assert.equal(anon.body.type, "https://redis-ratelimit.dev/problems/unauthorized");
    const tea = await s.get("/teapot");
    assert.deepEqual(tea.body, { type: "https://redis-ratelimit.dev/problems/bad-request", title: "Bad Request", status: 400, detail: "no tea" });
  } finally {
    await s.close();
  }
});

test("in-flight refusal: the policy's inFlightRetryAfter; the lease is back when the response ends", async () => {
  const policy = new Policy("slots", { prefix: "ex3:", inFlightRetryAfter: 3 }).concurrency("slot", 1, 30_000);
  let release;
  const s = await serve((app) => {
    app.get("/slow", rateLimit({ limiter, policy, key: () => "one" }), async (_req, res) => {
      await new Promise((r) => (release = r));
      res.json({});
    });
  });
  try {
    const first = s.get("/slow");
    while (!release) await new Promise((r) => setTimeout(r, 10));
    const second = await s.get("/slow");
    assert.equal(second.status, 429);
    assert.equal(second.h("retry-after"), "3");
    assert.equal(second.h("ratelimit-policy"), '"slot";q=1');
    release();
    assert.equal((await first).status, 200);
    const free = await limiter.client.leasePeek("ex3:slots:{one}:slot", { limit: 1, cost: 0 });
    assert.equal(free.remaining, 1);
  } finally {
    await s.close();
  }
});

test("Redis unreachable: fail open (no headers, decision null) or closed (503), per policy or per route", async () => {
  const dead = new Redis({ host: "127.0.0.1", port: await freePort(), lazyConnect: true, retryStrategy: () => 200, maxRetriesPerRequest: null });
  dead.on("error", () => {});
  const l = new RateLimiter(dead, { timeout: 200 });
  const open = new Policy("o", { failure: "open" }).slidingWindow("w", 1, 1000);
  const closed = new Policy("c").slidingWindow("w", 1, 1000);
  const s = await serve((app) => {
    app.get("/open", rateLimit({ limiter: l, policy: open, key: () => "k" }), (req, res) => res.json({ decision: req.rateLimit.decision }));
    app.get("/closed", rateLimit({ limiter: l, policy: closed, key: () => "k" }), (_req, res) => res.json({}));
    app.get("/overridden", rateLimit({ limiter: l, policy: closed, key: () => "k", failure: "open" }), (_req, res) => res.json({}));
  });
  try {
    const o = await s.get("/open");
    assert.deepEqual([o.status, o.body, o.h("ratelimit")], [200, { decision: null }, null]);
    const c = await s.get("/closed");
    assert.deepEqual([c.status, c.body.type, c.body.title], [503, "https://redis-ratelimit.dev/problems/unavailable", "Service Unavailable"]);
    assert.equal((await s.get("/overridden")).status, 200);
  } finally {
    await s.close();
    l.close();
    dead.disconnect();
  }
});

test("backend module on a server without it: 500 misconfigured problem naming the module, not a Redis-down 503", async () => {
  const bare = await new Server({ module: false }).start();
  const r = new Redis({ host: "127.0.0.1", port: bare.port });
  const l = new RateLimiter(r);
  const p = new Policy("p").slidingWindow("w", 5, 60_000);
  const s = await serve((app) => app.get("/x", rateLimit({ limiter: l, policy: p, key: () => "k" }), (_req, res) => res.json({})));
  try {
    const res = await s.get("/x");
    assert.deepEqual([res.status, res.body.type, res.body.title, res.body.status], [500, "https://redis-ratelimit.dev/problems/misconfigured", "Internal Server Error", 500]);
    assert.match(res.h("content-type"), /^application\/problem\+json/);
    assert.match(res.body.detail, /redis-ratelimit module is not loaded.*backend: "functions"/);
  } finally {
    await s.close();
    l.close();
    r.disconnect();
    await bare.stop();
  }
});

// Make Redis refuse the next decisions with an error reply that is not
// "unavailable": WRONGTYPE (another app's string at each of `keys`) or OOM
// (maxmemory 1, noeviction). Returns what undoes it.
async function redisRefuses(how, keys) {
  if (how === "WRONGTYPE") {
    for (const k of keys) await redis.set(k, "another app's value");
    return async () => {};
  }
  const [, policy] = await redis.config("GET", "maxmemory-policy");
  await redis.config("SET", "maxmemory-policy", "noeviction");
  await redis.config("SET", "maxmemory", "1");
  return async () => {
    await redis.config("SET", "maxmemory", "0");
    await redis.config("SET", "maxmemory-policy", policy);
  };
}

for (const how of ["WRONGTYPE", "OOM"]) {
  test(`a Redis error reply (${how}) is a 500 misconfigured problem naming it, logged once (as Spring), not express's HTML 500`, async () => {
    const window = new Policy("exr", { prefix: `exr-${how}:` }).slidingWindow("w", 5, 60_000);
    const other = new Policy("exr2", { prefix: `exr-${how}:` }).slidingWindow("w", 5, 60_000);
    const jobs = new Policy("exrjobs", { prefix: `exr-${how}:` }).concurrency("c", 1, 60_000);
    const s = await serve((app) => {
      app.get("/one", rateLimit({ limiter, policy: window, key: () => "k" }), (_req, res) => res.json({}));
      app.get("/two", rateLimit({ limiter, policies: [{ policy: window, key: () => "k" }, { policy: other, key: () => "k" }] }), (_req, res) => res.json({}));
      app.get("/job", rateLimit({ limiter, policy: jobs, key: () => "k" }), (_req, res) => res.json({}));
    });
    const logged = [];
    const error = console.error;
    try {
      assert.equal((await s.get("/one")).status, 200); // the first call's module check passed
      const undo = await redisRefuses(how, [`exr-${how}:exr:{k}:w`, `exr-${how}:exrjobs:{k}:c`]);
      console.error = (m) => logged.push(String(m));
      let answers;
      try {
        answers = [["exr", await s.get("/one")], ["exr+exr2", await s.get("/two")], ["exrjobs", await s.get("/job")]];
      } finally {
        console.error = error;
        await undo();
      }
      for (const [name, res] of answers) {
        assert.deepEqual([res.status, res.body?.type, res.body?.title, res.body?.status], [500, "https://redis-ratelimit.dev/problems/misconfigured", "Internal Server Error", 500]);
        assert.match(res.h("content-type"), /^application\/problem\+json/);
        assert.ok(res.body.detail.startsWith(`Redis refused rate limit '${name}': ${how} `), res.body.detail);
      }
      assert.deepEqual(logged, answers.map(([, res]) => `redis-ratelimit: ${res.body.detail}`));
      assert.equal((await limiter.health()).status, "UP"); // not the Redis-down mode
    } finally {
      console.error = error;
      await s.close();
    }
  });
}

test("a client that leaves while its decision is in flight: the handler does not run, the lease is back", async () => {
  // The decision is held until the client has gone (a slow Redis), then lands admitted.
  const real = new RateLimitClient(redis).transport;
  let land;
  const landed = new Promise((r) => (land = r));
  const slow = { kind: "slow", send: (c) => landed.then(() => real.send(c)), batch: (calls) => real.batch(calls), sendAny: (args) => real.sendAny(args) };
  const l = new RateLimiter(slow, { timeout: 3000 });
  const policy = new Policy("gone", { prefix: "ex5:" }).concurrency("slot", 1, 60_000);
  let ran = 0;
  const s = await serve((app) => {
    app.get("/job", rateLimit({ limiter: l, policy, key: () => "one" }), (_req, res) => {
      ran++; // the work: must not start for a client that left, nor without its lease
      res.json({});
    });
  });
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  try {
    const ac = new AbortController();
    const request = fetch(`http://127.0.0.1:${s.port}/job`, { signal: ac.signal }).catch(() => null);
    await sleep(150);
    ac.abort();
    await request;
    await sleep(150);
    land();
    await sleep(300);
    assert.equal(ran, 0, "the handler ran for a client that had left (its lease already given back)");
    assert.equal((await limiter.client.leasePeek("ex5:gone:{one}:slot", { limit: 1, cost: 0 })).remaining, 1);
  } finally {
    await s.close();
    l.close();
  }
});

test("keys.ip keys an IPv4-mapped IPv6 address as its IPv4 form (as Java and Python do)", () => {
  const ip = keys.ip();
  const req = (addr) => ({ ip: addr, socket: { remoteAddress: addr } });
  assert.equal(ip(req("::ffff:203.0.113.7")), "203.0.113.7");
  assert.equal(ip(req("::FFFF:127.0.0.1")), "127.0.0.1");
  assert.equal(ip(req("203.0.113.7")), "203.0.113.7");
  assert.equal(ip(req("2001:db8::1")), "2001:db8::1");
  assert.equal(ip(req("::ffff:999.1.1.1")), "::ffff:999.1.1.1"); // not an IPv4 address: kept as it is
  assert.throws(() => ip({ socket: {} }), ProblemError);
});

test("a cost or estimate resolver that gives nothing is a 400 naming the field, before any Redis call (not a charge of 1)", async () => {
  const metered = new Policy("nx-m", { prefix: "ex-none:" }).quota("tokens", "UTC", "day", 1000, { cost: "estimate" });
  const windowed = new Policy("nx-w", { prefix: "ex-none:" }).slidingWindow("w", 5, 60_000);
  const n = (req) => (req.get("X-N") ? Number(req.get("X-N")) : undefined);
  const s = await serve((app) => {
    app.get("/estimate", rateLimit({ limiter, policy: metered, key: () => "k", estimate: n }), (_req, res) => res.json({}));
    app.get("/cost", rateLimit({ limiter, policy: windowed, key: () => "k", cost: n }), (_req, res) => res.json({}));
  });
  try {
    for (const [path, field] of [["/estimate", "estimate"], ["/cost", "cost"]]) {
      const r = await s.get(path);
      assert.equal(r.status, 400, path);
      assert.equal(r.body.type, "https://redis-ratelimit.dev/problems/bad-request");
      assert.match(r.body.detail, new RegExp(field));
    }
    assert.deepEqual(await redis.keys("ex-none:*"), []);
    assert.equal((await s.get("/estimate", { "X-N": "10" })).status, 200);
  } finally {
    await s.close();
  }
});

test("a 429's RateLimit items: the refused rule's remaining as it stands (a refusal writes nothing), another rule's what it would leave", async () => {
  // The golden cases d-window-refuse-cost-left / d-windows-refuse-cost-left over HTTP (CLIENTS.md §5).
  const one = new Policy("one", { prefix: "ex-left:" }).slidingWindow("w", 5, 30_000);
  const two = new Policy("two", { prefix: "ex-left:" }).slidingWindow("short", 5, 30_000).slidingWindow("long", 100, 3_600_000);
  const s = await serve((app) => {
    for (const policy of [one, two]) app.get(`/${policy.name}`, rateLimit({ limiter, policy, key: () => "k", cost: (req) => Number(req.query.cost) }), (_req, res) => res.json({}));
  });
  try {
    const run = async (name) => { const out = []; for (const n of [2, 2, 2]) { const r = await s.get(`/${name}?cost=${n}`); out.push([r.status, r.h("ratelimit").replace(/;t=\d+/g, "")]); } return out; }; // r only: t moves with the clock
    assert.deepEqual(await run("one"), [[200, '"w";r=3'], [200, '"w";r=1'], [429, '"w";r=1']]);
    assert.deepEqual(await run("two"), [[200, '"short";r=3, "long";r=98'], [200, '"short";r=1, "long";r=96'], [429, '"short";r=1, "long";r=94']]);
  } finally {
    await s.close();
  }
});
