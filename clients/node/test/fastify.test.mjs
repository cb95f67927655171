// The Fastify plugin in-process, over real sockets (the example app's HTTP
// tests cover the SERVICES.md contract): route options, key resolvers and
// trustProxy, headers, permits closed after the response (a stream's last
// byte) or a disconnect, several policies in one call, and failure modes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { Readable } from "node:stream";
import Fastify from "fastify";
import { Policy, RateLimiter } from "redis-ratelimit";
import { rateLimitPlugin, keys, ProblemError } from "redis-ratelimit/fastify";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const { Server, sleep, waitUntil } = require("./support/servers.cjs");
const { importReadmeBlock } = require("./support/readme.cjs");

let server;
let redis;
let raw;
let limiter;
before(async () => {
  server = await new Server().start();
  redis = new Redis({ host: "127.0.0.1", port: server.port });
  raw = server.client();
  limiter = new RateLimiter(redis, { timeout: 3000 });
});
after(async () => {
  limiter?.close();
  redis?.disconnect();
  raw?.disconnect();
  await server?.stop();
});

async function serve(configure, { limiter: l = limiter, trustProxy = "127.0.0.1", logger = false } = {}) {
  // forceCloseConnections: app.close() would otherwise wait for a kept-alive
  // fetch connection that served an aborted request (plain Fastify does too).
  const app = Fastify({ trustProxy, forceCloseConnections: true, logger });
  await app.register(rateLimitPlugin, { limiter: l });
  configure(app);
  await app.listen({ port: 0, host: "127.0.0.1" });
  const base = `http://127.0.0.1:${app.server.address().port}`;
  const call = async (method, path, headers = {}, signal) => {
    const res = await fetch(base + path, { method, headers, signal });
    const text = await res.text();
    let body = text;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: res.status, h: (n) => res.headers.get(n), body };
  };
  return { app, call, get: (p, h, signal) => call("GET", p, h, signal), close: () => app.close() };
}

const problemOf = (r, status, slug) => {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.match(r.h("content-type"), /^application\/problem\+json/);
  assert.equal(r.body.type, `https://redis-ratelimit.dev/problems/${slug}`);
  assert.equal(r.body.status, status);
};

test("route options: headers on admission, 429 problem JSON with Retry-After, keys.ip behind a trusted proxy, legacy headers", async () => {
  const policy = new Policy("ip", { prefix: "fy1:" }).slidingWindow("custom", 2, 30_000);
  const s = await serve((app) => {
    app.get("/ip", { config: { rateLimit: { policy, key: keys.ip(), legacyHeaders: true } } }, async (req) => ({ ip: req.ip }));
    app.get("/free", async (req) => ({ rateLimit: req.rateLimit }));
  });
  try {
    const xff = { "X-Forwarded-For": "203.0.113.1, 198.51.100.2" };
    const first = await s.get("/ip", xff);
    assert.equal(first.status, 200);
    assert.deepEqual(first.body, { ip: "198.51.100.2" });
    assert.equal(first.h("ratelimit-policy"), '"custom";q=2;w=30');
    assert.equal(first.h("ratelimit"), '"custom";r=1;t=30');
    assert.deepEqual([first.h("x-ratelimit-limit"), first.h("x-ratelimit-remaining"), first.h("x-ratelimit-reset")], ["2", "1", "30"]);
    await s.get("/ip", xff);
    const refused = await s.get("/ip", xff);
    problemOf(refused, 429, "rate-limited");
    assert.equal(refused.h("retry-after"), "30");
    assert.equal(refused.h("ratelimit"), '"custom";r=0;t=30');
    assert.equal((await s.get("/ip", { "X-Forwarded-For": "198.51.100.3" })).status, 200, "another client IP, another key");
    const free = await s.get("/free");
    assert.equal(free.status, 200);
    assert.deepEqual(free.body, { rateLimit: null });
    assert.equal(free.h("ratelimit"), null);
  } finally {
    await s.close();
  }
});

test("a permit is closed after the response, a stream's last byte, an error, or a disconnect", async () => {
  const policy = new Policy("jobs", { prefix: "fy2:" }).concurrency("inflight", 2, 60_000).quota("units", "UTC", "day", 100, { cost: "estimate" });
  const peek = async (k) => {
    const units = await raw.call("RL.QUOTAPEEK", `fy2:jobs:{${k}}:units`, "*", "UTC", "DAY", "100", "COST", "0");
    const lease = await raw.call("RL.LEASEPEEK", `fy2:jobs:{${k}}:inflight`, "*", "2", "COST", "0");
    return [100 - units[3], 2 - lease[3]];
  };
  let streamed = null;
  let aborted = null;
  const s = await serve((app) => {
    const rateLimit = (k) => ({ policy, key: () => k, estimate: () => 10 });
    app.post("/job", { config: { rateLimit: rateLimit("j") } }, async (req) => {
      req.rateLimit.used(3);
      if (req.headers["x-fail"]) throw new Error("job failed");
      return { done: true };
    });
    app.get("/stream", { config: { rateLimit: rateLimit("s") } }, async (req, reply) => {
      streamed = new Readable({ read() {} });
      req.rateLimit.used(2);
      return reply.type("application/x-ndjson").send(streamed);
    });
    app.get("/slow", { config: { rateLimit: rateLimit("d") } }, async (req) => {
      await new Promise((resolve) => req.rateLimit.signal.addEventListener("abort", resolve, { once: true }));
      aborted = true;
      return {};
    });
  });
  try {
    assert.equal((await s.call("POST", "/job")).status, 200);
    assert.equal((await s.call("POST", "/job", { "X-Fail": "1" })).status, 500);
    await waitUntil("settled", async () => (await peek("j"))[1] === 0);
    assert.deepEqual(await peek("j"), [6, 0]);

    const responding = fetch(`http://127.0.0.1:${s.app.server.address().port}/stream`);
    await waitUntil("the stream started", async () => streamed !== null, 2000, 10);
    streamed.push('{"tokens":1}\n'); // the headers go with the first bytes
    const res = await responding;
    assert.equal(res.status, 200);
    await sleep(100);
    assert.deepEqual(await peek("s"), [10, 1], "held while the stream runs");
    streamed.push(null);
    assert.equal(await res.text(), '{"tokens":1}\n');
    await waitUntil("settled after the last byte", async () => (await peek("s"))[1] === 0);
    assert.deepEqual(await peek("s"), [2, 0]);

    const gone = new AbortController();
    const pending = s.get("/slow", {}, gone.signal).catch((e) => e.name);
    await waitUntil("lease taken", async () => (await peek("d"))[1] === 1);
    gone.abort();
    assert.equal(await pending, "AbortError");
    await waitUntil("lease back after the disconnect", async () => (await peek("d"))[1] === 0, 2000, 20);
    await waitUntil("the handler told", async () => aborted === true, 2000, 20);
    assert.deepEqual(await peek("d"), [0, 0]);
  } finally {
    await s.close();
  }
});

test("several policies in one call; resolver errors are 400/401 problem JSON", async () => {
  const perIp = new Policy("ip", { prefix: "fy3:" }).slidingWindow("custom", 2, 30_000);
  const perUser = new Policy("user", { prefix: "fy3:" }).slidingWindow("user", 1, 30_000);
  const s = await serve((app) => {
    app.get("/both", { config: { rateLimit: { policies: [{ policy: perIp, key: keys.ip() }, { policy: perUser, key: keys.header("X-User") }] } } }, async () => ({ ok: true }));
    app.get("/user/:id", { config: { rateLimit: { policy: perUser, key: keys.param("id") } } }, async () => ({ ok: true }));
    app.get("/bad", { config: { rateLimit: { policy: perUser, key: () => { throw new ProblemError(400, "bad-request", "no"); } } } }, async () => ({}));
  });
  try {
    const ok = await s.get("/both", { "X-User": "u1", "X-Forwarded-For": "192.0.2.77" });
    assert.equal(ok.status, 200);
    assert.equal(ok.h("ratelimit-policy"), '"custom";q=2;w=30, "user";q=1;w=30');
    const refused = await s.get("/both", { "X-User": "u1", "X-Forwarded-For": "192.0.2.77" });
    problemOf(refused, 429, "rate-limited");
    assert.match(refused.h("ratelimit"), /^"custom";r=0;t=\d+, "user";r=0;t=\d+$/);
    problemOf(await s.get("/both", { "X-Forwarded-For": "192.0.2.78" }), 401, "unauthorized");
    problemOf(await s.get("/bad"), 400, "bad-request");
    assert.deepEqual([(await s.get("/user/a")).status, (await s.get("/user/a")).status], [200, 429]);
  } finally {
    await s.close();
  }
});

test("Redis unreachable: fails closed (503) or open (no headers) within the budget", async () => {
  const dead = new Redis({ host: "127.0.0.1", port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  dead.on("error", () => {});
  const l = new RateLimiter(dead, { timeout: 300, probeInterval: 60_000 });
  const closed = new Policy("c").slidingWindow("custom", 5, 30_000);
  const opened = new Policy("o", { failure: "open" }).slidingWindow("default", 10, 60_000);
  const s = await serve((app) => {
    app.get("/closed", { config: { rateLimit: { policy: closed, key: () => "k" } } }, async () => ({}));
    app.get("/open", { config: { rateLimit: { policy: opened, key: () => "k" } } }, async (req) => ({ decision: req.rateLimit.decision }));
  }, { limiter: l });
  try {
    const t0 = Date.now();
    problemOf(await s.get("/closed"), 503, "unavailable");
    const open = await s.get("/open");
    assert.equal(open.status, 200);
    assert.deepEqual(open.body, { decision: null });
    assert.equal(open.h("ratelimit"), null);
    assert.ok(Date.now() - t0 < 1000);
  } finally {
    await s.close();
    l.close();
    dead.disconnect();
  }
});

test("backend module on a server without it: 500 misconfigured naming the module (as Python), the next request too", async () => {
  const bare = await new Server({ module: false }).start();
  const r = new Redis({ host: "127.0.0.1", port: bare.port });
  const l = new RateLimiter(r, { backend: "module" });
  const p = new Policy("p", { failure: "open" }).slidingWindow("w", 5, 60_000);
  const s = await serve((app) => app.get("/x", { config: { rateLimit: { policy: p, key: () => "k" } } }, async () => ({ ok: true })), { limiter: l });
  try {
    for (let i = 0; i < 2; i++) {
      const res = await s.get("/x");
      problemOf(res, 500, "misconfigured");
      assert.equal(res.body.title, "Internal Server Error");
      assert.match(res.body.detail, /redis-ratelimit module is not loaded.*--loadmodule.*backend: "functions"/);
    }
    assert.equal((await l.health()).status, "DOWN");
  } finally {
    await s.close();
    l.close();
    r.disconnect();
    await bare.stop();
  }
});

for (const how of ["WRONGTYPE", "OOM"]) {
  test(`a Redis error reply (${how}) is a 500 misconfigured problem naming it, logged once at error (as Spring), not the Redis-down mode`, async () => {
    const prefix = `fr-${how}:`;
    const window = new Policy("fr", { prefix, failure: "open" }).slidingWindow("w", 5, 60_000);
    const other = new Policy("fr2", { prefix }).slidingWindow("w", 5, 60_000);
    const jobs = new Policy("frjobs", { prefix }).concurrency("c", 1, 60_000);
    const logged = [];
    const logger = { level: "warn", stream: { write: (line) => logged.push(JSON.parse(line)) } };
    const s = await serve((app) => {
      app.get("/one", { config: { rateLimit: { policy: window, key: () => "k" } } }, async () => ({ ok: true }));
      app.get("/two", { config: { rateLimit: { policies: [{ policy: window, key: () => "k" }, { policy: other, key: () => "k" }] } } }, async () => ({ ok: true }));
      app.get("/job", { config: { rateLimit: { policy: jobs, key: () => "k" } } }, async () => ({ ok: true }));
    }, { logger });
    try {
      assert.equal((await s.get("/one")).status, 200); // the first call's module check passed
      let undo = async () => {};
      if (how === "WRONGTYPE") {
        for (const k of [`${prefix}fr:{k}:w`, `${prefix}frjobs:{k}:c`]) await raw.set(k, "another app's value");
      } else {
        const [, policy] = await raw.config("GET", "maxmemory-policy");
        await raw.config("SET", "maxmemory-policy", "noeviction");
        await raw.config("SET", "maxmemory", "1");
        undo = async () => {
          await raw.config("SET", "maxmemory", "0");
          await raw.config("SET", "maxmemory-policy", policy);
        };
      }
      let answers;
      try {
        answers = [["fr", await s.get("/one")], ["fr+fr2", await s.get("/two")], ["frjobs", await s.get("/job")]];
      } finally {
        await undo();
      }
      for (const [name, res] of answers) {
        problemOf(res, 500, "misconfigured");
        assert.equal(res.body.title, "Internal Server Error");
        assert.ok(res.body.detail.startsWith(`Redis refused rate limit '${name}': ${how} `), res.body.detail);
      }
      const errors = logged.filter((l) => l.level >= 50).map((l) => l.msg);
      assert.deepEqual(errors, answers.map(([, res]) => `redis-ratelimit: ${res.body.detail}`));
      assert.equal((await limiter.health()).status, "UP"); // not the Redis-down mode
    } finally {
      await s.close();
    }
  });
}

test("a bad route config fails at start; the plugin needs a limiter", async () => {
  const app = Fastify();
  await app.register(rateLimitPlugin, { limiter });
  assert.throws(() => app.get("/x", { config: { rateLimit: { policy: {}, key: () => "k" } } }, async () => ({})), TypeError);
  await app.close();
  await assert.rejects(async () => {
    const bare = Fastify();
    await bare.register(rateLimitPlugin, {});
  }, /limiter/);
});

test("the README's Fastify recipe runs as written", async () => {
  const mod = await importReadmeBlock("rateLimitPlugin", "fastify", (block) =>
    block.replace('"redis://localhost:6379"', `"redis://127.0.0.1:${server.port}"`).replace("await app.listen({ port: 8080 });", 'await app.listen({ port: 0, host: "127.0.0.1" });\nexport { app, redis, limiter };'));
  const base = `http://127.0.0.1:${mod.app.server.address().port}`;
  try {
    const got = [];
    for (let i = 0; i < 6; i++) got.push(await fetch(`${base}/search`));
    assert.deepEqual(got.map((r) => r.status), [200, 200, 200, 200, 200, 429]);
    assert.equal(got[0].headers.get("ratelimit"), '"search";r=4;t=30');
    assert.equal(got[5].headers.get("retry-after"), "30");
    const job = await fetch(`${base}/jobs`, { method: "POST", headers: { "X-Api-Key": "readme" } });
    assert.deepEqual(await job.json(), { used: 420 });
    const tokens = async () => 100_000 - (await raw.call("RL.QUOTAPEEK", "fastify:jobs:{readme}:tokens", "*", "UTC", "DAY", "100000", "COST", "0"))[3];
    await waitUntil("settled to 420", async () => (await tokens()) === 420, 2000, 20);
    assert.equal((await fetch(`${base}/jobs`, { method: "POST" })).status, 401);
  } finally {
    await mod.app.close();
    mod.limiter.close();
    mod.redis.disconnect();
  }
});

test("a cost or estimate resolver that gives nothing is a 400 naming the field, before any Redis call (not a charge of 1)", async () => {
  const metered = new Policy("fy-m", { prefix: "fy-none:" }).quota("tokens", "UTC", "day", 1000, { cost: "estimate" });
  const windowed = new Policy("fy-w", { prefix: "fy-none:" }).slidingWindow("w", 5, 60_000);
  const n = (req) => (req.headers["x-n"] ? Number(req.headers["x-n"]) : undefined);
  const s = await serve((app) => {
    app.get("/estimate", { config: { rateLimit: { policy: metered, key: () => "k", estimate: n } } }, async () => ({}));
    app.get("/cost", { config: { rateLimit: { policy: windowed, key: () => "k", cost: n } } }, async () => ({}));
  });
  try {
    for (const [path, field] of [["/estimate", "estimate"], ["/cost", "cost"]]) {
      const r = await s.get(path);
      problemOf(r, 400, "bad-request");
      assert.match(r.body.detail, new RegExp(field));
    }
    assert.equal((await s.get("/estimate", { "X-N": "10" })).status, 200);
  } finally {
    await s.close();
  }
});

test("a 429's RateLimit items: the refused rule's remaining as it stands (a refusal writes nothing), another rule's what it would leave", async () => {
  // The golden cases d-window-refuse-cost-left / d-windows-refuse-cost-left over HTTP (CLIENTS.md §5).
  const one = new Policy("one", { prefix: "fy-left:" }).slidingWindow("w", 5, 30_000);
  const two = new Policy("two", { prefix: "fy-left:" }).slidingWindow("short", 5, 30_000).slidingWindow("long", 100, 3_600_000);
  const s = await serve((app) => {
    for (const policy of [one, two]) app.get(`/${policy.name}`, { config: { rateLimit: { policy, key: () => "k", cost: (req) => Number(req.query.cost) } } }, async () => ({}));
  });
  try {
    const run = async (name) => { const out = []; for (const n of [2, 2, 2]) { const r = await s.get(`/${name}?cost=${n}`); out.push([r.status, r.h("ratelimit").replace(/;t=\d+/g, "")]); } return out; }; // r only: t moves with the clock
    assert.deepEqual(await run("one"), [[200, '"w";r=3'], [200, '"w";r=1'], [429, '"w";r=1']]);
    assert.deepEqual(await run("two"), [[200, '"short";r=3, "long";r=98'], [200, '"short";r=1, "long";r=96'], [429, '"short";r=1, "long";r=94']]);
  } finally {
    await s.close();
  }
});
