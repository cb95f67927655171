// The backend setting (src/backend.ts): the argv each RL call becomes on the
// Functions library, zones as the library takes them, and the start-up
// choice and health() of each backend against real servers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { RateLimitClient, RateLimiter, ModuleNotLoadedError, functionsZone } from "redis-ratelimit";

const require = createRequire(import.meta.url);
const { fcall } = require("../dist/backend.js");
const { Server } = require("./support/servers.cjs");
const { makers } = require("./support/clients.cjs");

const s = (...a) => a.map(String);

test("every command maps to its function, keys first", () => {
  // SPEC.md's own example, then one per key layout
  assert.deepEqual(fcall(s("RL.ALL", 2, "a", "b", "*", "CHECK", 1, 5, 60000, "LEASE", 2, 3, 60000, "TOKEN", "t")),
    s("FCALL", "rl_all", 2, "a", "b", "*", "CHECK", 1, 5, 60000, "LEASE", 2, 3, 60000, "TOKEN", "t"));
  assert.deepEqual(fcall(s("RL.CHECK", "k", "*", 5, 1000, 10, 60000, "COST", 2)), s("FCALL", "rl_check", 1, "k", "*", 5, 1000, 10, 60000, "COST", 2));
  assert.deepEqual(fcall(s("RL.DAYHOUR", "d", "h", 20, 5, 86400000, 3600000)), s("FCALL", "rl_dayhour", 2, "d", "h", 20, 5, 86400000, 3600000));
  assert.deepEqual(fcall(s("RL.LOCKCOUNT", "l", "c", 10000, 5, 30000)).slice(0, 5), s("FCALL", "rl_lockcount", 2, "l", "c"));
  assert.deepEqual(fcall(s("RL.RENEW", "k", "*", 60000, "t1")), s("FCALL", "rl_renew", 1, "k", "*", 60000, "t1"));
  assert.deepEqual(fcall(s("DEL", "k1", "k2")), s("DEL", "k1", "k2")); // not an RL command: unchanged
});

test("peeks go read-only, refunds through rl_refund", () => {
  for (const name of ["RL.PEEK", "RL.THROTTLEPEEK", "RL.LEASEPEEK"]) {
    assert.deepEqual(fcall(s(name, "k", "*", 1, 1000)).slice(0, 2), ["FCALL_RO", "rl_" + name.slice(3).toLowerCase()]);
  }
  assert.deepEqual(fcall(s("RL.ALLPEEK", 1, "k", "*", "CHECK", 1, 1, 1000, "DETAILS")).slice(0, 3), s("FCALL_RO", "rl_allpeek", 1));
  assert.deepEqual(fcall(s("RL.THROTTLE", "k", "*", 10, 60, 60000, "REFUND")), s("FCALL", "rl_refund", 1, "k", "throttle", "*", 10, 60, 60000, "REFUND"));
  assert.deepEqual(fcall(s("RL.ALL", 1, "k", "*", "CHECK", 1, 5, 60000, "REFUND", "DETAILS")).slice(0, 5), s("FCALL", "rl_refund", 1, "k", "all"));
  assert.deepEqual(fcall(s("RL.CHECK", "k", "*", 5, 60000, "DEBIT")).slice(0, 2), ["FCALL", "rl_check"]);
  // a lease token spelled REFUND is a token, not the option
  assert.deepEqual(fcall(s("RL.ALL", 1, "k", "*", "LEASE", 1, 2, 60000, "TOKEN", "REFUND", "DETAILS")).slice(0, 2), ["FCALL", "rl_all"]);
});

test("zones: fixed offsets pass, daylight saving is refused", () => {
  assert.equal(fcall(s("RL.QUOTA", "k", "*", "Asia/Shanghai", "DAY", 20))[5], "+08:00");
  assert.equal(fcall(s("RL.QUOTAPEEK", "k", "*", "UTC", "DAY", 20))[5], "UTC");
  assert.equal(functionsZone("Asia/Kathmandu"), "+05:45");
  assert.equal(functionsZone("Etc/GMT+3"), "-03:00");
  assert.equal(functionsZone("-03:30"), "-03:30");
  const argv = fcall(s("RL.ALL", 2, "a", "b", "*", "LEASE", 1, 2, 60000, "TOKEN", "QUOTA", "QUOTA", 2, "Asia/Tokyo", "DAY", 100, "COST", 5));
  assert.deepEqual(argv.slice(11, 15), s("QUOTA", "QUOTA", 2, "+09:00"));
  assert.throws(() => fcall(s("RL.QUOTA", "k", "*", "Europe/Paris", "DAY", 20)), /daylight saving.*Functions library/);
  assert.throws(() => fcall(s("RL.ALL", 1, "k", "*", "QUOTA", 1, "America/New_York", "DAY", 20)), /daylight saving/);
});

test("the backend setting is checked", () => {
  const transport = { kind: "spy", send: async () => null, batch: async () => [], sendAny: async () => null };
  assert.equal(new RateLimitClient(transport, { backend: "Functions" }).backend, "functions");
  assert.throws(() => new RateLimitClient(transport, { backend: "lua" }), /backend/);
  assert.throws(() => new RateLimiter(transport, { backend: "modules" }), /backend/);
});

for (const [name, make] of Object.entries(makers)) {
  test(`${name}: auto picks the module where it is loaded; module without it refuses, health DOWN`, async () => {
    const server = await new Server().start();
    const bare = await new Server({ module: false }).start();
    const c = await make.standalone(server.port);
    const b = await make.standalone(bare.port);
    try {
      const auto = new RateLimitClient(c, { backend: "auto" });
      await auto.ensureBackend();
      assert.equal(auto.backend, "module");
      assert.deepEqual(await auto.health(), { status: "UP", backend: "module" });
      await assert.rejects(new RateLimitClient(b).ensureBackend(), ModuleNotLoadedError);
      // a batch keeps each call's own reply when another's is an error reply
      // (node-redis's execAsPipeline rejected the whole batch: a settlement
      // with one bad call looked like Redis down)
      const replies = await auto.batch([
        { key: "bk", readOnly: false, args: ["RL.CHECK", "bk", "*", "5", "60000"] },
        { key: "bk", readOnly: false, args: ["RL.CHECK", "bk", "*", "0", "60000"] },
      ]);
      assert.equal(replies[0][3], 4);
      assert.match(replies[1].message, /invalid count/);
      const h = await new RateLimiter(b).health();
      assert.equal(h.status, "DOWN");
      assert.equal(h.backend, "module");
      assert.match(h.detail, /module is not loaded/);
    } finally {
      await make.close(c);
      await make.close(b);
      await server.stop();
      await bare.stop();
    }
  });
}

for (const [name, make] of Object.entries(makers)) {
  test(`${name}: health() of a fresh limiter runs the first call's check: functions loads the library (UP), auto picks it`, async () => {
    const bare = await new Server({ module: false }).start();
    const c = await make.standalone(bare.port);
    try {
      // no decision yet: a readiness probe waiting for UP must get it
      assert.deepEqual(await new RateLimiter(c, { backend: "functions" }).health(), { status: "UP", backend: "functions" });
      const admin = bare.client();
      await admin.call("FUNCTION", "FLUSH");
      admin.disconnect();
      assert.deepEqual(await new RateLimiter(c, { backend: "auto" }).health(), { status: "UP", backend: "functions" });
      const h = await new RateLimiter(c).health(); // module: DOWN, naming it
      assert.deepEqual([h.status, h.backend], ["DOWN", "module"]);
      assert.match(h.detail, /redis-ratelimit module is not loaded/);
    } finally {
      await make.close(c);
      await bare.stop();
    }
  });
}

test("health() with Redis down: the detail says Redis cannot be reached", async () => {
  const Redis = require("ioredis");
  const port = await require("./support/servers.cjs").freePort();
  const dead = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
  dead.on("error", () => {});
  try {
    const h = await new RateLimiter(dead, { backend: "functions" }).health();
    assert.deepEqual([h.status, h.backend], ["DOWN", "functions"]);
    assert.match(h.detail, /^Redis cannot be reached \(/);
  } finally {
    dead.disconnect();
  }
});
