// Redis stopped and restarted mid-run, and paused (connections accepted,
// never answered): every limited endpoint answers within 1,000 ms — the
// default API fails open (200, no rate-limit headers), the others closed
// (503 problem JSON) — and decisions use Redis again within 2 s of it
// answering. And the module check at start.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { App, BACKEND, Server, waitUntil } from "./harness.js";

let redis;
let app;
before(async () => {
  redis = await new Server().start();
  app = await new App({ REDIS_URL: `redis://127.0.0.1:${redis.port}`, RL_PREFIX: "outage:" }).start();
});
after(async () => {
  await app?.stop();
  await redis?.stop();
});

const calls = () => [
  ["default", () => app.req("GET", "/seed002/api/default"), "open"],
  ["custom", () => app.req("GET", "/seed002/api/custom"), "closed"],
  ["user", () => app.req("GET", "/seed002/api/user/u1"), "closed"],
  ["sms", () => app.req("POST", "/seed000/sms", { json: { phone: "555", n: Math.random() } }), "closed"],
  ["ocr", () => app.req("POST", "/seed001/ocr", { headers: { "X-User": "u" } }), "closed"],
  ["login", () => app.req("POST", "/seed004/login"), "closed"],
  ["llm", () => app.req("POST", "/llm/complete", { json: { max_tokens: 10 }, headers: { "X-Api-Key": "k", "X-Zone": "UTC", "X-Sleep-Ms": "0" } }), "closed"],
];

async function assertDown(phase) {
  for (const [name, call, mode] of calls()) {
    const slack = await app.overhead(); // 1,000 ms plus what the machine adds to any answer now
    const t0 = Date.now();
    const r = await call();
    const ms = Date.now() - t0;
    assert.ok(ms < 1000 + slack, `${phase} ${name}: answered after ${ms} ms (a /health took ${slack} ms)`);
    if (mode === "open") {
      assert.equal(r.status, 200, `${phase} ${name}`);
      assert.equal(r.h("ratelimit"), null);
      assert.equal(r.h("ratelimit-policy"), null);
    } else {
      assert.equal(r.status, 503, `${phase} ${name}: ${JSON.stringify(r.body)}`);
      assert.match(r.h("content-type"), /^application\/problem\+json/);
      assert.equal(r.body.type, "https://redis-ratelimit.dev/problems/unavailable");
      assert.equal(r.body.title, "Service Unavailable");
    }
  }
  assert.equal((await app.req("GET", "/health")).status, 200);
}

async function assertBackWithin(ms, phase) {
  const t0 = Date.now();
  await waitUntil(`${phase}: decisions back`, async () => (await app.req("GET", "/seed002/api/custom", { ip: `192.0.2.${Math.floor(Math.random() * 250)}` })).status === 200, 5000, 50);
  const took = Date.now() - t0;
  assert.ok(took < ms, `${phase}: back after ${took} ms`);
  const r = await app.req("GET", "/seed002/api/default", { ip: "198.51.100.200" });
  assert.equal(r.status, 200);
  assert.notEqual(r.h("ratelimit"), null, "the fail-open endpoint is limited again");
}

test("Redis stopped, then restarted on its port", async () => {
  assert.notEqual((await app.req("GET", "/seed002/api/default")).h("ratelimit"), null);
  await redis.stop();
  await assertDown("stopped");
  await assertDown("still stopped"); // no reconnect storm makes the second round slower
  await redis.start();
  await assertBackWithin(2000, "restarted");
});

test("Redis paused (accepts, never answers), then resumed", async () => {
  redis.pause();
  try {
    await assertDown("paused");
  } finally {
    redis.resume();
  }
  await assertBackWithin(2000, "resumed");
});

test("a Redis without the module: the app exits non-zero with one line saying so", async () => {
  const bare = await new Server({ module: false }).start();
  try {
    const a = new App({ REDIS_URL: `redis://127.0.0.1:${bare.port}`, RL_BACKEND: "module" });
    await assert.rejects(a.start(), /exited 1: example-[a-z]+: the redis-ratelimit module is not loaded/);
    assert.equal(a.output.trim().split("\n").length, 1, a.output);
  } finally {
    await bare.stop();
  }
});

test("RL_BACKEND=bogus: the app exits non-zero with one line naming the setting", async () => {
  const a = new App({ REDIS_URL: "redis://127.0.0.1:1", RL_BACKEND: "bogus" });
  await assert.rejects(a.start(), /exited 1: example-[a-z]+: RL_BACKEND: invalid backend 'bogus': 'module', 'functions' or 'auto'/);
  assert.equal(a.output.trim().split("\n").length, 1, a.output);
});

for (const cluster of ["127.0.0.1", "127.0.0.1:abc", "127.0.0.1:7000,:"]) {
  test(`REDIS_CLUSTER=${cluster}: the app exits non-zero with one line naming the setting (not "Redis did not answer")`, async () => {
    const a = new App({ REDIS_CLUSTER: cluster });
    assert.equal(await a.refused(), 1, a.output);
    assert.match(a.output, /^example-[a-z]+: REDIS_CLUSTER: expected host:port,host:port,\.\.\. but one seed is /);
    assert.equal(a.output.trim().split("\n").length, 1, a.output);
  });
}

test("RL_BACKEND=auto: the module gone at run time, decisions go on with the Functions library", { skip: BACKEND === "functions" && "needs a server with the module to lose it" }, async () => {
  const s = await new Server({ args: ["--enable-module-command", "yes"] }).start();
  const a = new App({ REDIS_URL: `redis://127.0.0.1:${s.port}`, RL_PREFIX: `auto${Date.now()}:`, RL_BACKEND: "auto" });
  try {
    await a.start();
    const ip = "198.51.100.9";
    assert.equal((await a.req("GET", "/seed002/api/custom", { ip })).status, 200);
    const c = s.client();
    await c.call("MODULE", "UNLOAD", "ratelimit"); // as a failover to a server without it
    c.disconnect();
    const got = [];
    for (let i = 0; i < 5; i++) got.push((await a.req("GET", "/seed002/api/custom", { ip })).status);
    assert.deepEqual(got, [200, 200, 200, 200, 429]); // 5 in 30 s, counted on
  } finally {
    await a.stop();
    await s.stop();
  }
});
