// Several policies on one request decided in ONE RL.ALL (decideAll,
// acquireAll, rateLimit({ policies })): one call per request (INFO
// commandstats), a refusal by the second policy charges nothing on the
// first, every limit in the headers, one permit that releases every lease
// and settles every estimate; under Cluster slot by slot with refunds; and
// the README's example as written.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import express from "express";
import { Policy, RateLimitClient, RateLimitedError, RateLimiter } from "redis-ratelimit";
import { rateLimit, keys } from "redis-ratelimit/express";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const calculateSlot = require("cluster-key-slot");
const { Server, Cluster, freePort, waitUntil } = require("./support/servers.cjs");
const { importReadmeBlock } = require("./support/readme.cjs");

const sms = (prefix) => [
  new Policy("sms-ip", { prefix }).slidingWindow("ip", 20, 3_600_000),
  new Policy("sms-phone", { prefix }).slidingWindow("minute", 1, 60_000).quota("day", "UTC", "day", 5),
];
const jobs = (prefix) => [
  new Policy("jobs", { prefix }).concurrency("inflight", 1, 60_000),
  new Policy("tenant", { prefix }).quota("units", "UTC", "day", 1000, { cost: "estimate" }),
];

async function rlCalls(port) {
  const c = new Redis({ host: "127.0.0.1", port });
  try {
    const out = {};
    for (const m of (await c.info("commandstats")).matchAll(/^cmdstat_(rl\.[a-z]+):calls=(\d+)/gm)) out[m[1]] = Number(m[2]);
    return out;
  } finally {
    c.disconnect();
  }
}

async function resetStats(port) {
  const c = new Redis({ host: "127.0.0.1", port });
  await c.config("RESETSTAT");
  c.disconnect();
}

async function serve(app) {
  const port = await freePort();
  const srv = await new Promise((resolve) => {
    const s = app.listen(port, "127.0.0.1", () => resolve(s));
  });
  const post = async (path, body, headers = {}) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body ?? {}) });
    return { status: res.status, h: (n) => res.headers.get(n), body: await res.json().catch(() => null) };
  };
  return { post, close: () => new Promise((r) => srv.close(r)) };
}

describe("standalone", () => {
  let server;
  let redis;
  let rl;
  let limiter;
  before(async () => {
    server = await new Server().start();
    redis = new Redis({ host: "127.0.0.1", port: server.port });
    rl = new RateLimitClient(redis);
    limiter = new RateLimiter(redis, { timeout: 3000 });
  });
  after(async () => {
    limiter?.close();
    redis?.disconnect();
    await server?.stop();
  });

  const usedIp = async (prefix, ip) => 20 - (await rl.peek(`${prefix}sms-ip:{${ip}}:ip`, { count: 20, window: 3_600_000 }, { cost: 0 })).remaining;
  const leases = async (prefix, user) => 1 - (await rl.leasePeek(`${prefix}jobs:{${user}}:inflight`, { limit: 1, cost: 0 })).remaining;
  const units = async (prefix, tenant) => 1000 - (await rl.quotaPeek(`${prefix}tenant:{${tenant}}:units`, "UTC", { day: 1000 }, { cost: 0 })).remaining;

  test("decideAll: one RL.ALL, every limit's state, a refusal by either policy charges nothing on the other", async () => {
    const [perIp, perPhone] = sms("m1:");
    await resetStats(server.port);
    const first = await limiter.decideAll([perIp.bind("192.0.2.1"), perPhone.bind("+15550001")]);
    assert.deepEqual(await rlCalls(server.port), { "rl.all": 1 });
    assert.equal(first.limited, false);
    assert.equal(first.binding.name, "minute"); // 0 left of this shape: the tightest
    assert.deepEqual(first.policies, ["sms-ip", "sms-phone"]);
    assert.deepEqual(first.limits.map((s) => [s.name, s.limited, s.remaining]), [["ip", false, 19], ["minute", false, 0], ["day", false, 4]]);
    const second = await limiter.decideAll([perIp.bind("192.0.2.1"), perPhone.bind("+15550001")]);
    assert.deepEqual(await rlCalls(server.port), { "rl.all": 2 });
    assert.equal(second.limited, true);
    assert.equal(second.binding.name, "minute");
    assert.equal(second.policy, "sms-phone");
    assert.ok(second.retryAfter > 59_000 && second.retryAfter <= 60_000);
    assert.equal(await usedIp("m1:", "192.0.2.1"), 1); // the refused call charged nothing on the IP
    // refused by the first: the second's counters stay as they were
    const tightIp = new Policy("sms-ip", { prefix: "m1x:" }).slidingWindow("ip", 1, 3_600_000);
    await limiter.decideAll([tightIp.bind("192.0.2.2"), perPhone.bind("+15550002")]);
    const refused = await limiter.decideAll([tightIp.bind("192.0.2.2"), perPhone.bind("+15550003")]);
    assert.equal(refused.binding.name, "ip");
    assert.equal((await limiter.decide(perPhone, "+15550003")).limited, false); // its minute untouched
  });

  test("decideAll: names made unique, duplicates counted once, bad bindings refused before Redis", async () => {
    const [perIp] = sms("m2:");
    const both = await limiter.decideAll([perIp.bind("192.0.2.10"), perIp.bind("192.0.2.11")]);
    assert.deepEqual(both.limits.map((s) => s.name), ["ip", "sms-ip.ip"]);
    const twice = await limiter.decideAll([perIp.bind("192.0.2.12"), perIp.bind("192.0.2.12")]);
    assert.equal(twice.limits[0].remaining, 19);
    const lock = new Policy("login").lockout("fails", 3, 60_000, 300_000);
    await assert.rejects(limiter.decideAll([perIp.bind("a"), lock.bind("a")]), /lockout/);
    const [perUser] = jobs("m2:");
    await assert.rejects(limiter.decideAll([perIp.bind("a"), perUser.bind("u")]), /acquireAll/);
    await assert.rejects(limiter.decideAll([perIp.bind("a"), perIp.bind("")]), RangeError);
  });

  test("acquireAll: one permit releases every lease and settles every estimate (return and throw)", async () => {
    const [perUser, perTenant] = jobs("m3:");
    const calls = (estimate) => [perUser.bind("u1"), perTenant.bind("t1", { estimate })];
    await limiter.withPermitAll(calls(300), {}, async (permit) => {
      assert.equal(await leases("m3:", "u1"), 1);
      assert.equal(await units("m3:", "t1"), 300); // the lease and the estimate, up front
      const second = await limiter.acquireAll(calls(300));
      assert.equal(second.decision.limited, true);
      assert.equal(second.decision.binding.name, "inflight");
      assert.equal(second.decision.retryAfter, 1000);
      assert.equal(await units("m3:", "t1"), 300); // refused: no units taken
      permit.used(120);
    });
    assert.equal(await leases("m3:", "u1"), 0);
    assert.equal(await units("m3:", "t1"), 120);
    await assert.rejects(
      limiter.withPermitAll(calls(500), {}, async () => {
        throw new Error("the job failed");
      }),
      /the job failed/,
    );
    assert.equal(await leases("m3:", "u1"), 0);
    assert.equal(await units("m3:", "t1"), 120); // all 500 refunded
    await limiter.withPermitAll(calls(10), {}, async () => {
      await assert.rejects(limiter.withPermitAll(calls(10), {}, () => assert.fail("admitted")), RateLimitedError);
    });
  });

  test("express: rateLimit({ policies }) decides once, sends every limit, gives everything back", async () => {
    const [perIp, perPhone] = sms("m4:");
    const [perUser, perTenant] = jobs("m4:");
    const app = express();
    app.post(
      "/sms/send",
      express.json(),
      rateLimit({ limiter, policies: [{ policy: perIp, key: keys.ip() }, { policy: perPhone, key: keys.header("X-Phone", 400) }] }),
      (_req, res) => res.json({ sent: true }),
    );
    app.post(
      "/jobs",
      express.json(),
      rateLimit({ limiter, policies: [{ policy: perUser, key: keys.header("X-User") }, { policy: perTenant, key: () => "t2", estimate: () => 200 }] }),
      (req, res) => {
        if (req.query.fail) throw new Error("the job failed");
        req.rateLimit.used(50);
        res.json({ done: true });
      },
    );
    app.use((err, _req, res, _next) => res.status(500).json({ error: err.message }));
    const s = await serve(app);
    try {
      await resetStats(server.port);
      const ok = await s.post("/sms/send", {}, { "X-Phone": "+15550100" });
      assert.equal(ok.status, 200);
      assert.deepEqual(await rlCalls(server.port), { "rl.all": 1 });
      assert.equal(ok.h("ratelimit-policy"), '"ip";q=20;w=3600, "minute";q=1;w=60, "day";q=5;w=86400');
      assert.match(ok.h("ratelimit"), /^"ip";r=19;t=3600, "minute";r=0;t=60, "day";r=4;t=\d+$/);
      const no = await s.post("/sms/send", {}, { "X-Phone": "+15550100" });
      assert.equal(no.status, 429);
      assert.deepEqual(await rlCalls(server.port), { "rl.all": 2 });
      assert.equal(no.h("retry-after"), "60");
      assert.match(no.body.detail, /^limit 'minute' of 'sms-phone' exceeded/);
      // a refusal's items are each limit's peek at the call's cost (SPEC DETAILS)
      assert.match(no.h("ratelimit"), /^"ip";r=18;t=3600, "minute";r=0;t=60, "day";r=3;t=\d+$/);
      assert.equal(await usedIp("m4:", "127.0.0.1"), 1); // the refused call charged nothing on the IP
      assert.equal((await s.post("/sms/send", {})).status, 400); // no phone: nothing decided
      assert.equal(await usedIp("m4:", "127.0.0.1"), 1);

      const done = await s.post("/jobs", {}, { "X-User": "u2" });
      assert.equal(done.status, 200);
      // the permit closes when the response finishes: the lease back, 150 of the 200 refunded
      await waitUntil("the permit's close", async () => (await leases("m4:", "u2")) === 0 && (await units("m4:", "t2")) === 50, 5000);
      assert.equal((await s.post("/jobs?fail=1", {}, { "X-User": "u2" })).status, 500);
      // released after the handler threw, its 200 refunded (50 from the first call stay)
      await waitUntil("the permit's close after a throw", async () => (await leases("m4:", "u2")) === 0 && (await units("m4:", "t2")) === 50, 5000);
      assert.equal(await units("m4:", "t2"), 50);
    } finally {
      await s.close();
    }
  });

  test("express: several policies fail closed if any does when Redis cannot answer", async () => {
    const dead = new Redis({ host: "127.0.0.1", port: await freePort(), lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    dead.on("error", () => {});
    const down = new RateLimiter(dead, { timeout: 200 });
    const open = new Policy("open", { failure: "open" }).slidingWindow("w", 5, 60_000);
    const [perIp] = sms("m5:");
    const app = express();
    app.post("/x", rateLimit({ limiter: down, policies: [{ policy: open, key: keys.ip() }, { policy: perIp, key: keys.ip() }] }), (_req, res) => res.json({ ran: true }));
    const s = await serve(app);
    try {
      const r = await s.post("/x");
      assert.equal(r.status, 503);
      assert.match(r.body.detail, /'open\+sms-ip'/);
    } finally {
      await s.close();
      down.close();
      dead.disconnect();
    }
  });

  test("the README's two-policy route runs as written", async () => {
    const mod = await importReadmeBlock("policies: [", "two-policies", (block) =>
      block.replace('"redis://localhost:6379"', `"redis://127.0.0.1:${server.port}"`).replace("app.listen(8080);", "export { app, redis };"));
    const s = await serve(mod.app);
    try {
      const first = await s.post("/sms/send", { phone: "5550142" });
      assert.equal(first.status, 200);
      assert.equal(first.h("ratelimit-policy"), '"ip";q=20;w=3600, "minute";q=1;w=60, "day";q=5;w=86400');
      const second = await s.post("/sms/send", { phone: "5550142" });
      assert.equal(second.status, 429);
      assert.equal(second.h("retry-after"), "60");
      assert.equal(20 - (await rl.peek("readme:sms-ip:{127.0.0.1}:ip", { count: 20, window: 3_600_000 }, { cost: 0 })).remaining, 1);
    } finally {
      await s.close();
      mod.redis.disconnect();
    }
  });
});

describe("Cluster (three primaries)", () => {
  let cluster;
  let redis;
  let rl;
  let limiter;
  before(async () => {
    cluster = await new Cluster(3).start();
    redis = new Redis.Cluster(cluster.seeds);
    await new Promise((resolve, reject) => {
      redis.once("ready", resolve);
      redis.once("error", reject);
    });
    rl = new RateLimitClient(redis);
    limiter = new RateLimiter(redis, { timeout: 3000 });
  });
  after(async () => {
    limiter?.close();
    await redis?.quit();
    await cluster?.stop();
  });

  const allCalls = async () => {
    let n = 0;
    for (const node of cluster.nodes) n += (await rlCalls(node.port))["rl.all"] ?? 0;
    return n;
  };

  test("keys of two slots: one RL.ALL per slot, the admitted slot refunded on a refusal; one slot: one call", async () => {
    const [perIp, perPhone] = sms("cx:");
    const ip = "198.51.100.7";
    const phone = "+15550900";
    const ipKey = `cx:sms-ip:{${ip}}:ip`;
    assert.notEqual(calculateSlot(ipKey), calculateSlot(`cx:sms-phone:{${phone}}:minute`));
    await cluster.resetStats();
    const ok = await limiter.decideAll([perIp.bind(ip), perPhone.bind(phone)]);
    assert.equal(ok.limited, false);
    assert.equal(await allCalls(), 2); // one per slot, and no CROSSSLOT
    assert.equal(await cluster.infoField("errorstats", "errorstat_CROSSSLOT"), 0);
    assert.deepEqual(ok.limits.map((s) => s.remaining), [19, 0, 4]);
    const no = await limiter.decideAll([perIp.bind(ip), perPhone.bind(phone)]);
    assert.equal(no.limited, true);
    assert.equal(no.binding.name, "minute");
    assert.equal(await allCalls(), 5); // two more, and the refund of the IP's slot
    assert.equal(20 - (await rl.peek(ipKey, { count: 20, window: 3_600_000 }, { cost: 0 })).remaining, 1);
    assert.equal(no.limits[0].remaining, 18); // as one server reports the refusal: what the IP rule would leave
    await cluster.resetStats();
    const same = await limiter.decideAll([perIp.bind("{u9}"), perPhone.bind("{u9}")]);
    assert.equal(same.limited, false);
    assert.equal(await allCalls(), 1);
    assert.equal(await cluster.infoField("errorstats", "errorstat_MOVED"), 0);
  });

  test("acquireAll across slots: a refusal refunds the other slot's estimate; close settles on both nodes", async () => {
    const [perUser, perTenant] = jobs("acx:");
    const leaseKey = "acx:jobs:{u5}:inflight";
    const unitsKey = "acx:tenant:{t5}:units";
    assert.notEqual(calculateSlot(leaseKey), calculateSlot(unitsKey));
    const held = async () => 1 - (await rl.leasePeek(leaseKey, { limit: 1, cost: 0 })).remaining;
    const taken = async () => 1000 - (await rl.quotaPeek(unitsKey, "UTC", { day: 1000 }, { cost: 0 })).remaining;
    const calls = [perUser.bind("u5"), perTenant.bind("t5", { estimate: 300 })];
    await limiter.withPermitAll(calls, {}, async (permit) => {
      assert.equal(await held(), 1);
      assert.equal(await taken(), 300);
      const second = await limiter.acquireAll(calls);
      assert.equal(second.decision.limited, true);
      assert.equal(await taken(), 300); // the tenant's slot admitted, then was refunded
      permit.used(70);
    });
    assert.equal(await held(), 0);
    assert.equal(await taken(), 70);
  });
});
