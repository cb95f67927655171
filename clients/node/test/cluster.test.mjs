// Three primaries: every RL command through the package, single and
// batched, reaches its key's node the first time — no MOVED on any node
// (errorstat_MOVED after CONFIG RESETSTAT), one call counted per call sent
// (no COMMAND GETKEYS, no retry) — on ioredis and node-redis.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { RateLimitClient, RateLimitError, RateLimiter, Policy } from "redis-ratelimit";

const require = createRequire(import.meta.url);
const calculateSlot = require("cluster-key-slot");
const { Cluster } = require("./support/servers.cjs");
const { cases } = require("./support/cases.cjs");
const { makers } = require("./support/clients.cjs");

let cluster;
before(async () => {
  cluster = await new Cluster(3).start();
});
after(async () => cluster?.stop());

const rlCalls = async () => {
  let total = 0;
  for (const node of cluster.nodes) {
    const c = node.client();
    const stats = await c.info("commandstats");
    c.disconnect();
    for (const m of stats.matchAll(/^cmdstat_rl\.[a-z]+:calls=(\d+)/gm)) total += Number(m[1]);
  }
  return total;
};

for (const [clientName, make] of Object.entries(makers)) {
  describe(`${clientName} Cluster`, () => {
    let redis;
    let rl;
    before(async () => {
      redis = await make.cluster(cluster.seeds);
      rl = new RateLimitClient(redis);
      await rl.assertModuleLoaded();
    });
    after(async () => make.close(redis));

    test("every command, on keys spread over the three nodes: zero MOVED, one call each", async () => {
      await cluster.resetStats();
      let sent = 0;
      const slots = new Set();
      for (let i = 0; i < 6; i++) {
        for (const c of cases((n) => `{${clientName}:${i}:${n}}`)) {
          if (c.setup) continue; // release/renew: below, after a lease of their own
          slots.add(calculateSlot(c.keyA));
          for (let r = 0; r < c.repeat; r++, sent++) await c.pkg(rl, c.keyA);
        }
        const key = `{${clientName}:lease:${i}}`;
        const lease = await rl.lease(key, { limit: 2, ttl: 60000 });
        assert.equal(lease.limited, false);
        assert.deepEqual(await rl.renew(key, 30000, lease.token), [1]);
        assert.deepEqual(await rl.release(key, [lease.token]), [1]);
        sent += 3;
      }
      assert.ok(slots.size > 50, "keys spread over many slots");
      assert.equal(await cluster.infoField("errorstats", "errorstat_MOVED"), 0);
      assert.equal(await rlCalls(), sent);
    });

    test("a batch across slots: each part on its node, replies in order, zero MOVED", async () => {
      await cluster.resetStats();
      const calls = Array.from({ length: 30 }, (_, i) => ({
        key: `${clientName}:batch:${i}`,
        readOnly: false,
        args: ["RL.CHECK", `${clientName}:batch:${i}`, "*", String(i + 1), "60000"],
      }));
      calls.push({ key: `${clientName}:batch:str`, readOnly: false, args: ["RL.CHECK", `${clientName}:batch:str`, "*", "0", "60000"] });
      const replies = await rl.batch(calls);
      assert.equal(replies.length, 31);
      replies.slice(0, 30).forEach((r, i) => assert.deepEqual(r.slice(0, 4).map(Number), [0, 1, i + 1, i]));
      assert.ok(replies[30] instanceof RateLimitError);
      assert.match(replies[30].message, /^ERR invalid count '0'/);
      assert.equal(await cluster.infoField("errorstats", "errorstat_MOVED"), 0);
    });

    test("policies and permits (decide, lease, settle + release pipelined): zero MOVED", async () => {
      await cluster.resetStats();
      const limiter = new RateLimiter(rl, { timeout: 3000 });
      const p = new Policy("llm", { prefix: `${clientName}:`, details: false })
        .tokenBucket("rate", 60, 60_000, 10)
        .concurrency("inflight", 2, 60_000)
        .quota("tokens", "UTC", "day", 100_000, { cost: "estimate" });
      for (let i = 0; i < 12; i++) {
        await limiter.withPermit(p, `key${i}`, { estimate: 100 }, async (permit) => permit.used(40));
        const left = await rl.quotaPeek(`${clientName}:llm:{key${i}}:tokens`, "UTC", { day: 100_000 }, { cost: 0 });
        assert.equal(left.remaining, 99_960);
      }
      const sms = new Policy("sms", { prefix: `${clientName}:` }).slidingWindow("short", 2, 10_000);
      for (let i = 0; i < 12; i++) assert.equal((await limiter.decide(sms, `phone${i}`)).limited, false);
      assert.equal(await cluster.infoField("errorstats", "errorstat_MOVED"), 0);
      limiter.close();
    });

    test("50 concurrent callers on one key admit exactly the limit", async () => {
      const results = await Promise.all(Array.from({ length: 50 }, () => rl.throttle(`${clientName}:hot`, { burst: 12, count: 1, window: 60000 })));
      assert.equal(results.filter((d) => !d.limited).length, 12);
    });
  });
}

describe("the module check under Cluster", () => {
  let partial;
  before(async () => {
    partial = new Cluster(3);
    partial.nodes[2].module = false; // a rolling deploy that missed one primary
    await partial.start();
  });
  after(async () => partial?.stop());

  for (const [clientName, make] of Object.entries(makers)) {
    test(`${clientName}: every primary is asked (one without the module fails the check)`, async () => {
      const redis = await make.cluster(partial.seeds);
      try {
        for (let i = 0; i < 5; i++) {
          // Whichever node a keyless command would reach, the check finds the one without.
          await assert.rejects(new RateLimitClient(redis).assertModuleLoaded(), /not loaded/);
        }
      } finally {
        await make.close(redis);
      }
    });
  }
});

