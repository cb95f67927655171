// Key administration against a real redis-server: state by peeks that write
// nothing, reset (one DEL of the key's own counters and leases), penalty and
// reward (DEBIT/REFUND) — as the Python client's tests/test_admin.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Policy } from "redis-ratelimit";
import { redis, limiter } from "./support/one-server.mjs";

const remaining = (d) => Object.fromEntries(d.limits.map((l) => [l.name, l.remaining]));
const api = (prefix) =>
  new Policy("api", { prefix, tag: "api" })
    .slidingWindow("minute", 5, 60000)
    .tokenBucket("burst", 10, 1000, 10)
    .quota("day", "UTC", "day", 100)
    .concurrency("inflight", 2, 60000)
    .slidingWindow("global", 1000, 60000, { shared: true });

test("state reads every limit without writing", async () => {
  const p = api("s:");
  assert.deepEqual(remaining(await limiter.state(p, "u1")), { minute: 5, burst: 10, day: 100, inflight: 2, global: 1000 });
  assert.deepEqual(await redis.keys("s:*"), []); // nothing written
  for (let i = 0; i < 2; i++) await (await limiter.acquire(p, "u1")).close();
  const now = remaining(await limiter.state(p, "u1"));
  assert.equal(now.minute, 3);
  assert.equal(now.day, 98);
  assert.equal(now.global, 998);
  assert.equal(remaining(await limiter.state(p, "u1")).minute, 3);
});

test("reset deletes the key's own counters, not another key's nor the shared ones", async () => {
  const p = api("r:");
  for (let i = 0; i < 5; i++) await (await limiter.acquire(p, "u1")).close();
  await (await limiter.acquire(p, "u2")).close();
  assert.equal((await limiter.state(p, "u1")).limits[0].remaining, 0);
  assert.equal(await limiter.reset(p, "u1"), 3); // window, bucket, day quota (no lease held; shared kept)
  assert.equal(remaining(await limiter.state(p, "u1")).minute, 5);
  assert.equal(remaining(await limiter.state(p, "u2")).minute, 4);
  assert.equal(remaining(await limiter.state(p, "u1")).global, 994);
});

test("reset unlocks a lockout", async () => {
  const p = new Policy("login", { prefix: "l:" }).lockout("fails", 3, 60000, 600000);
  for (let i = 0; i < 4; i++) await limiter.decide(p, "alice");
  const locked = await limiter.state(p, "alice");
  assert.equal(locked.limited, true);
  assert.ok(locked.retryAfter > 590000);
  assert.ok((await limiter.reset(p, "alice")) >= 1);
  assert.deepEqual(await redis.keys("l:*"), []);
  const open = await limiter.state(p, "alice");
  assert.equal(open.limited, false);
  assert.equal(open.limits[0].remaining, 3);
  await limiter.decide(p, "alice");
  assert.equal((await limiter.state(p, "alice")).limits[0].remaining, 2);
});

test("penalty and reward", async () => {
  const p = new Policy("api", { prefix: "p:" }).slidingWindow("minute", 5, 60000).quota("day", "UTC", "day", 100);
  assert.deepEqual(remaining(await limiter.penalty(p, "u1", 5)), { minute: 0, day: 95 });
  assert.equal((await limiter.decide(p, "u1")).limited, true);
  assert.deepEqual(remaining(await limiter.reward(p, "u1", 2)), { minute: 2, day: 97 });
  assert.equal(remaining(await limiter.reward(p, "u1", 50)).minute, 5); // never below empty
  await assert.rejects(limiter.penalty(p, "u1", 10001), (e) => e.field === "cost");
  await assert.rejects(limiter.penalty(new Policy("l", { prefix: "p:" }).lockout("x", 1, 1000, 1000), "u1"), (e) => e.field === "limits");
  const t = new Policy("t", { prefix: "p:", limits: "2/minute" });
  assert.equal(remaining(await limiter.penalty(t, "u1", 2))["2-per-1m"], 0);
  assert.equal(await limiter.reset(t, "u1"), 1);
});
