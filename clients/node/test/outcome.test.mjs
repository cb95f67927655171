// Counting one outcome (`counts: "failures" | "successes"`) against a real
// redis-server: charged up front, given back whole (RL.ALL ... REFUND) when
// the permit closes with the outcome that does not count — exact under
// concurrency; and the express login lockout that counts failed logins only.
import { test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { Policy, RateLimitedError } from "redis-ratelimit";
import { rateLimit } from "redis-ratelimit/express";
import { server, redis, limiter } from "./support/one-server.mjs";
import { importReadmeBlock } from "./support/readme.cjs";

test("50 concurrent failing logins against 5: exactly 5 admitted", async () => {
  const p = new Policy("login", { prefix: "c:", counts: "failures", limits: "5 per 15 minutes" });
  let admitted = 0;
  const login = () =>
    limiter
      .withPermit(p, "alice", {}, async () => {
        admitted++;
        await new Promise((r) => setTimeout(r, 10));
        throw new Error("bad password");
      })
      .catch((e) => assert.ok(e instanceof RateLimitedError || e.message === "bad password"));
  await Promise.all(Array.from({ length: 50 }, login));
  assert.equal(admitted, 5);
  assert.equal((await limiter.state(p, "alice")).limits[0].remaining, 0);
});

test("failures only: successes given back; successes only: failures given back", async () => {
  const f = new Policy("f", { prefix: "c:", counts: "failures", limits: "3/minute" });
  for (let i = 0; i < 10; i++) await limiter.withPermit(f, "bob", {}, () => "ok");
  assert.equal((await limiter.state(f, "bob")).limits[0].remaining, 3);
  const permit = await limiter.acquire(f, "bob");
  permit.failed();
  await permit.close();
  assert.equal((await limiter.state(f, "bob")).limits[0].remaining, 2);
  const s = new Policy("s", { prefix: "c:", counts: "successes", limits: "2/minute" });
  for (let i = 0; i < 5; i++) await assert.rejects(limiter.withPermit(s, "ip", {}, () => { throw new Error("invalid form"); }));
  await limiter.withPermit(s, "ip", {}, () => "ok");
  await limiter.withPermit(s, "ip", {}, () => "ok");
  await assert.rejects(limiter.withPermit(s, "ip", {}, () => "ok"), RateLimitedError);
});

test("counts needs a limit that refunds", () => {
  assert.throws(() => new Policy("l", { counts: "failures" }).lockout("x", 3, 1000, 1000), (e) => e.field === "counts");
  assert.throws(() => new Policy("l", { counts: "errors" }), (e) => e.field === "counts");
});

test("express: a login lockout counting failed logins only (status >= 400)", async () => {
  const app = express();
  // 3 failed logins in 15 minutes lock the user out until the oldest leaves the window.
  const login = new Policy("login", { prefix: "e:", counts: "failures", limits: "3 per 15 minutes" });
  app.post("/login", rateLimit({ limiter, policy: login, key: (req) => String(req.query.user) }), (req, res) => {
    if (req.query.password !== "right") return res.status(401).json({ error: "bad password" });
    res.json({ ok: true });
  });
  const http = app.listen(0);
  await new Promise((r) => http.once("listening", r));
  const url = (q) => `http://127.0.0.1:${http.address().port}/login?${q}`;
  const post = async (q) => {
    const r = await fetch(url(q), { method: "POST" });
    await r.text();
    await new Promise((res) => setTimeout(res, 20)); // the permit closes after the response
    return r.status;
  };
  try {
    for (let i = 0; i < 5; i++) assert.equal(await post("user=ann&password=right"), 200);
    const failures = [];
    for (let i = 0; i < 4; i++) failures.push(await post("user=ann&password=wrong"));
    assert.deepEqual(failures, [401, 401, 401, 429]);
    assert.equal(await post("user=ann&password=right"), 429);
    assert.equal(await post("user=ben&password=right"), 200);
  } finally {
    http.close();
  }
});

test("the README's text limits, failures-only login and unlock run as written", async () => {
  const mod = await importReadmeBlock('counts: "failures"', "peers", (block) =>
    block.replace('"redis://localhost:6379"', `"redis://127.0.0.1:${server.port}"`).replace('console.log(log.join(" "));', "export { log };"));
  assert.equal(mod.log.join(" "), "welcome welcome welcome wrong wrong wrong locked 0 welcome 0 2");
});

test("express: skip, exempt callers (CIDR, keys) and a custom refusal", async () => {
  const app = express();
  app.set("trust proxy", true); // req.ip from X-Forwarded-For, as behind a proxy
  const p = new Policy("ex", { prefix: "x:", limits: "1/minute" });
  const onRefused = (_req, res, r) => res.status(503).set("Retry-After", r.headers.find(([k]) => k === "Retry-After")[1]).json({ busy: r.decision.binding.name });
  app.get(
    "/x",
    rateLimit({ limiter, policy: p, key: (req) => String(req.headers["x-key"] ?? req.ip), skip: (req) => req.query.health === "1", exempt: { ips: ["10.0.0.0/8", "2001:db8::/32"], keys: ["internal"] }, onRefused }),
    (_req, res) => res.json({ ok: true }),
  );
  const http = app.listen(0);
  await new Promise((r) => http.once("listening", r));
  const get = async (q, headers) => {
    const r = await fetch(`http://127.0.0.1:${http.address().port}/x?${q}`, { headers });
    return { status: r.status, body: await r.text(), retry: r.headers.get("retry-after") };
  };
  try {
    const from = (ip, extra = {}) => ({ "X-Forwarded-For": ip, ...extra });
    assert.equal((await get("", from("192.0.2.1"))).status, 200);
    const refused = await get("", from("192.0.2.1"));
    assert.deepEqual([refused.status, refused.body], [503, '{"busy":"1-per-1m"}']);
    assert.ok(Number(refused.retry) > 0);
    for (let i = 0; i < 3; i++) {
      assert.equal((await get("health=1", from("192.0.2.1"))).status, 200);
      assert.equal((await get("", from("10.1.2.3"))).status, 200);
      assert.equal((await get("", from("2001:db8::7"))).status, 200);
      assert.equal((await get("", from("192.0.2.9", { "X-Key": "internal" }))).status, 200);
    }
    assert.deepEqual(await redis.keys("x:ex:{10.1.2.3}*"), []); // an exempt caller writes nothing
  } finally {
    http.close();
  }
  assert.throws(() => rateLimit({ limiter, policy: p, key: () => "k", exempt: { ips: ["10.0.0.0/99"] } }), RangeError);
});
