// CLIENTS.md §3-§4 against real servers broken on purpose, with ioredis and
// node-redis: every way Redis is unavailable decided by the Redis-down mode
// (never an error), a late admission given back whole, a circuit per node
// that one overrun or the app's own stall does not open, `used(n)`'s rules,
// lease renewal, and permits that a disconnect does not close.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import express from "express";
import { Policy, PermitClosedError, RateLimitClient, RateLimiter, RateLimitUnavailableError } from "redis-ratelimit";
import { rateLimit } from "redis-ratelimit/express";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const { createClient } = require("@redis/client");
const calculateSlot = require("cluster-key-slot");
const { Server, Cluster, freePort, sleep, waitUntil } = require("./support/servers.cjs");
const { makers } = require("./support/clients.cjs");

/** An error reply as ioredis raises it (isServerReplyError knows it by its class name). */
class ReplyError extends Error {}

/** A transport whose RL commands answer `error`; PING and COMMAND INFO answer as a server with the module. */
function replying(error) {
  return {
    kind: "fake",
    send: () => Promise.reject(error),
    batch: (calls) => Promise.resolve(calls.map(() => error)),
    sendAny: (args) => Promise.resolve(args[0] === "PING" ? "PONG" : [["rl.all"]]),
  };
}

const window = () => new Policy("w", { prefix: "faults:" }).slidingWindow("w", 5, 60_000);

for (const text of [
  "CLUSTERDOWN The cluster is down",
  "TRYAGAIN Multiple keys request during rehashing of slot",
  "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
  "LOADING Redis is loading the dataset in memory",
]) {
  test(`'${text.split(" ")[0]}' is unavailable (the Redis-down mode decides), not an error reply`, async () => {
    const l = new RateLimiter(replying(new ReplyError(text)), { timeout: 200 });
    await assert.rejects(l.decide(window(), "k"), RateLimitUnavailableError);
    assert.equal(l.circuitOpen, true);
    l.close();
  });
}

test("the module gone at run time: unavailable, health() DOWN naming it; an express route answers 503, not 500", async () => {
  const l = new RateLimiter(replying(new ReplyError("ERR unknown command 'RL.CHECK', with args beginning with: ")), { timeout: 200 });
  const logged = [];
  const error = console.error;
  console.error = (m) => logged.push(String(m));
  try {
    await assert.rejects(l.decide(window(), "k"), RateLimitUnavailableError);
    const h = await l.health();
    assert.equal(h.status, "DOWN");
    assert.match(h.detail, /redis-ratelimit module/);
    assert.ok(logged.some((m) => /module/.test(m)));
    const app = express();
    app.get("/x", rateLimit({ limiter: l, policy: window(), key: () => "k" }), (_q, res) => res.json({}));
    const port = await freePort();
    const srv = await new Promise((r) => {
      const s = app.listen(port, "127.0.0.1", () => r(s));
    });
    try {
      assert.equal((await fetch(`http://127.0.0.1:${port}/x`)).status, 503);
    } finally {
      await new Promise((r) => srv.close(r));
    }
  } finally {
    console.error = error;
    l.close();
  }
});

test("a command timeout that drops late replies is refused at start (ioredis and node-redis)", () => {
  const io = new Redis({ lazyConnect: true, commandTimeout: 2000 });
  assert.throws(() => new RateLimiter(io), /commandTimeout/);
  assert.doesNotThrow(() => new RateLimiter(new Redis({ lazyConnect: true, commandTimeout: 10_500 })).close());
  assert.doesNotThrow(() => new RateLimiter(new Redis({ lazyConnect: true })).close());
  const cluster = new Redis.Cluster([{ host: "127.0.0.1", port: 1 }], { lazyConnect: true, redisOptions: { commandTimeout: 1000 } });
  assert.throws(() => new RateLimiter(cluster), /commandTimeout/);
  const nr = createClient({ socket: { socketTimeout: 2000 } });
  assert.throws(() => new RateLimiter(nr), /socketTimeout/);
});

test("a node-redis client with the default reconnect back-off (up to 2.4 s) is warned about at start", () => {
  const warned = [];
  const warn = console.warn;
  console.warn = (m) => warned.push(String(m));
  try {
    new RateLimiter(createClient({ url: "redis://127.0.0.1:1" })).close();
    assert.equal(warned.length, 1);
    assert.match(warned[0], /reconnectStrategy/);
    new RateLimiter(createClient({ url: "redis://127.0.0.1:1", socket: { reconnectStrategy: (n) => Math.min(50 * 2 ** n, 500) } })).close();
    assert.equal(warned.length, 1);
  } finally {
    console.warn = warn;
  }
});

/** Every limit kind that RL.ALL ... REFUND gives back: window, bucket, quota (estimate), lease. */
const full = () =>
  new Policy("full", { prefix: "faults:" })
    .slidingWindow("short", 2, 10_000)
    .tokenBucket("rate", 60, 60_000, 10)
    .quota("tokens", "UTC", "day", 1000, { cost: "estimate" })
    .concurrency("inflight", 2, 60_000);

async function untouched(admin, key) {
  const base = `faults:full:{${key}}:`;
  const r = await Promise.all([
    admin.call("RL.PEEK", base + "short", "*", "2", "10000", "COST", "0"),
    admin.call("RL.THROTTLEPEEK", base + "rate", "*", "10", "60", "60000", "COST", "0"),
    admin.call("RL.QUOTAPEEK", base + "tokens", "*", "UTC", "DAY", "1000", "COST", "0"),
    admin.call("RL.LEASEPEEK", base + "inflight", "*", "2", "COST", "0"),
  ]);
  return r.map((x) => x[3]).join() === "2,10,1000,2";
}

for (const [driver, make] of Object.entries(makers)) {
  describe(`${driver}, one server`, () => {
    let server;
    let admin;
    let redis;
    let l;
    before(async () => {
      server = await new Server().start();
      admin = server.client();
      redis = await make.standalone(server.port);
      l = new RateLimiter(redis, { timeout: 300, probeInterval: 50 });
    });
    after(async () => {
      l?.close();
      admin?.disconnect();
      await make.close(redis).catch(() => {});
      await server?.stop();
    });

    test("a late admission is given back whole (windows, buckets, quotas, the estimate and the lease)", async () => {
      const key = `late-${driver}`;
      server.pause();
      try {
        await assert.rejects(l.acquire(full(), key, { estimate: 100 }), RateLimitUnavailableError);
        await sleep(200);
      } finally {
        server.resume();
      }
      await waitUntil("every counter as before the request", () => untouched(admin, key), 5000);
      await sleep(200);
      assert.ok(await untouched(admin, key));
    });

    test("one overrun does not open the circuit; the app's own stall is not an outage", async () => {
      server.pause();
      try {
        await assert.rejects(l.decide(window(), `once-${driver}`), RateLimitUnavailableError);
      } finally {
        server.resume();
      }
      assert.equal(l.circuitOpen, false);
      await waitUntil("decided by Redis", async () => (await l.decide(window(), `after-${driver}`)).limited === false, 3000);
      // 20 decisions in flight, then the event loop busy for 700 ms (Redis answers meanwhile).
      const wide = new Policy("stall", { prefix: "faults:" }).slidingWindow("w", 1000, 60_000);
      const pending = Array.from({ length: 20 }, (_, i) => l.decide(wide, `stall-${driver}-${i}`));
      await new Promise((r) => setImmediate(r));
      const until = performance.now() + 700;
      while (performance.now() < until);
      const got = await Promise.allSettled(pending);
      assert.deepEqual(got.map((g) => g.status), Array(20).fill("fulfilled"), String(got.find((g) => g.status === "rejected")?.reason));
      assert.equal(l.circuitOpen, false);
    });

    test("used(n): an integer 0..2^53-1, above the limit counts as it; else RangeError and the estimate stands; after close PermitClosedError", async () => {
      const p = new Policy("used", { prefix: `faults-${driver}:` }).quota("tokens", "UTC", "day", 1000, { cost: "estimate" });
      const left = async (key) => (await admin.call("RL.QUOTAPEEK", `faults-${driver}:used:{${key}}:tokens`, "*", "UTC", "DAY", "1000", "COST", "0"))[3];
      for (const bad of [1e20, 2 ** 53, -1, 1.5, NaN, "10"]) {
        const permit = await l.acquire(p, `bad-${bad}`, { estimate: 100 });
        assert.throws(() => permit.used(bad), RangeError);
        await permit.close();
        assert.equal(await left(`bad-${bad}`), 900);
      }
      const big = await l.acquire(p, "big", { estimate: 100 });
      big.used(5000);
      await big.close();
      assert.equal(await left("big"), 0);
      assert.throws(() => big.used(1), PermitClosedError);
      const max = await l.acquire(p, "max", { estimate: 100 });
      max.used(2 ** 53 - 1);
      await max.close();
      assert.equal(await left("max"), 0);
    });

    test("a lease held past a third of its TTL is renewed (renew: false opts out)", async () => {
      const p = new Policy("renew", { prefix: `faults-${driver}:` }).concurrency("slot", 1, 1200);
      const held = async (key) => 1 - (await admin.call("RL.LEASEPEEK", `faults-${driver}:renew:{${key}}:slot`, "*", "1", "COST", "0"))[3];
      const kept = await l.acquire(p, "kept");
      const lapsed = await l.acquire(p, "lapsed", { renew: false });
      await sleep(2500); // two TTLs: renewed every 400 ms, or gone
      assert.deepEqual([await held("kept"), await held("lapsed")], [1, 0]);
      await kept.close();
      await lapsed.close();
      assert.equal(await held("kept"), 0);
    });
  });
}

describe("express: a disconnect does not close the permit while the handler runs", () => {
  let server;
  let redis;
  let l;
  before(async () => {
    server = await new Server().start();
    redis = new Redis({ host: "127.0.0.1", port: server.port });
    l = new RateLimiter(redis);
  });
  after(async () => {
    l?.close();
    redis?.disconnect();
    await server?.stop();
  });

  test("3 clients leave, 3 new ones come: never more than 3 running; the usage of the ones that left is charged", async () => {
    const policy = new Policy("job", { prefix: "faults-ex:" }).concurrency("slot", 3, 60_000).quota("tokens", "UTC", "day", 100_000, { cost: "estimate" });
    let running = 0;
    let most = 0;
    const app = express();
    app.post("/job", rateLimit({ limiter: l, policy, key: () => "one", estimate: () => 1000 }), async (req, res) => {
      running++;
      most = Math.max(most, running);
      await sleep(600); // the work goes on after its client left (it could stop on req.rateLimit.signal)
      req.rateLimit.used(300);
      running--;
      res.json({ used: 300 });
    });
    const port = await freePort();
    const srv = await new Promise((r) => {
      const s = app.listen(port, "127.0.0.1", () => r(s));
    });
    try {
      const leaving = Array.from({ length: 3 }, () => {
        const ac = new AbortController();
        const p = fetch(`http://127.0.0.1:${port}/job`, { method: "POST", signal: ac.signal }).catch(() => null);
        setTimeout(() => ac.abort(), 150);
        return p;
      });
      await Promise.all(leaving);
      await sleep(100);
      const newcomers = await Promise.all(Array.from({ length: 3 }, () => fetch(`http://127.0.0.1:${port}/job`, { method: "POST" }).then((r) => r.status)));
      assert.deepEqual(newcomers, [429, 429, 429]);
      assert.ok(most <= 3, `${most} running`);
      await waitUntil("every slot back", async () => (await l.client.leasePeek("faults-ex:job:{one}:slot", { limit: 3, cost: 0 })).remaining === 3, 3000);
      const left = (await l.client.quotaPeek("faults-ex:job:{one}:tokens", "UTC", { day: 100_000 }, { cost: 0 })).remaining;
      assert.equal(100_000 - left, 900); // 3 x 300 charged, not settled to 0 at the disconnect
    } finally {
      await new Promise((r) => srv.close(r));
    }
  });
});

for (const [driver, make] of Object.entries(makers)) {
  test(`${driver}: one primary of three down: only its keys get the Redis-down answer`, async () => {
    const cluster = await new Cluster(3).start();
    let redis;
    let l;
    try {
      for (const n of cluster.nodes) {
        const c = n.client();
        await c.config("SET", "cluster-require-full-coverage", "no");
        c.disconnect();
      }
      redis = await make.cluster(cluster.seeds);
      redis.on?.("error", () => {});
      l = new RateLimiter(redis, { probeInterval: 100 });
      const p = new Policy("part", { prefix: "faults:" }).slidingWindow("w", 1000, 60_000);
      const keys = Array.from({ length: 60 }, (_, i) => `k${i}`);
      assert.ok((await Promise.all(keys.map((k) => l.decide(p, k)))).every((d) => !d.limited));
      const dead = cluster.nodes[2];
      const deadName = `127.0.0.1:${dead.port}`;
      const onDead = new Set(keys.filter((k) => l.client.transport.nodeOf(`faults:part:{${k}}:w`) === deadName));
      assert.ok(onDead.size > 0 && onDead.size < keys.length);
      await dead.stop();
      for (let round = 0; round < 3; round++) {
        const t0 = performance.now();
        const got = await Promise.allSettled(keys.map((k) => l.decide(p, k)));
        assert.ok(performance.now() - t0 < 1000, `round ${round}: ${performance.now() - t0} ms`);
        got.forEach((g, i) => {
          const down = onDead.has(keys[i]);
          if (down) assert.ok(g.status === "rejected" && g.reason instanceof RateLimitUnavailableError, `${keys[i]}: ${g.status}`);
          else assert.equal(g.status, "fulfilled", `${keys[i]} (live node): ${g.reason}`);
        });
      }
    } finally {
      l?.close();
      // node-redis's close() waits for the dead node: destroy() drops it.
      if (typeof redis?.destroy === "function") redis.destroy();
      else await make.close(redis).catch(() => {});
      await cluster.stop();
    }
  });
}

for (const [driver, make] of Object.entries(makers)) {
  // CLIENTS.md §3: decisions use Redis again within 2 s of the node answering,
  // also when the traffic during the outage made ioredis drop the node from
  // its pool (its connection ended), so nothing routed to it reconnects.
  test(`${driver}: a killed primary restarted after traffic to its keys: they use Redis again within 2 s of it rejoining`, async () => {
    const cluster = await new Cluster(3).start();
    let redis;
    let l;
    try {
      for (const n of cluster.nodes) {
        const c = n.client();
        await c.config("SET", "cluster-require-full-coverage", "no");
        await c.config("SET", "cluster-node-timeout", "1000"); // the outage marks it FAIL in seconds
        c.disconnect();
      }
      redis = await make.cluster(cluster.seeds);
      redis.on?.("error", () => {});
      l = new RateLimiter(redis, { probeInterval: 100 });
      const p = new Policy("back", { prefix: "faults:" }).slidingWindow("w", 1000, 60_000);
      // Not the node of the prefix's override hash: its refresh every 250 ms
      // goes past the circuit, and its retries would reconnect the node.
      const overridesOn = l.client.transport.nodeOf("faults:ratelimit:limits");
      const dead = cluster.nodes.find((n) => `127.0.0.1:${n.port}` !== overridesOn);
      const deadName = `127.0.0.1:${dead.port}`;
      const key = Array.from({ length: 200 }, (_, i) => `k${i}`).find((k) => l.client.transport.nodeOf(`faults:back:{${k}}:w`) === deadName);
      assert.ok(key, "a key on the node to kill");
      assert.equal((await l.decide(p, key)).limited, false);
      await dead.kill();
      // Traffic to its key through the outage (every decision the Redis-down
      // answer) until the other primaries mark it FAIL, and a while after.
      const live = cluster.nodes.find((n) => n !== dead).client();
      const failed = async () => (await live.cluster("NODES")).split("\n").some((line) => line.includes(`:${dead.port}@`) && / fail /.test(line.replace(/,/g, " ")));
      let failedAt = null;
      let rejoinMs;
      try {
        while (failedAt === null || performance.now() - failedAt < 1000) {
          await assert.rejects(l.decide(p, key), RateLimitUnavailableError);
          if (failedAt === null && (await failed())) failedAt = performance.now();
          await sleep(50);
        }
        const restarted = performance.now();
        dead.extra = ["--cluster-node-timeout", "1000"];
        await dead.start(); // same port, same nodes.conf: the same node, owning its slots again
        const admin = dead.client();
        try {
          // Rejoined: it says the cluster is ok and a live primary no longer marks it FAIL.
          await waitUntil("the restarted node rejoined", async () => /cluster_state:ok/.test(await admin.cluster("INFO")) && !(await failed()), 20_000);
        } finally {
          admin.disconnect();
        }
        rejoinMs = performance.now() - restarted;
      } finally {
        live.disconnect();
      }
      const rejoined = performance.now();
      let ok = null;
      while (ok === null && performance.now() - rejoined < 10_000) {
        try {
          await l.decide(p, key);
          ok = performance.now();
        } catch (e) {
          assert.ok(e instanceof RateLimitUnavailableError, String(e));
          await sleep(50);
        }
      }
      assert.ok(ok !== null && ok - rejoined <= 2000, `Redis again ${ok === null ? "never (10 s)" : `${Math.round(ok - rejoined)} ms`} after the node rejoined (${Math.round(rejoinMs)} ms after its restart)`);
    } finally {
      l?.close();
      if (typeof redis?.destroy === "function") redis.destroy();
      else await make.close(redis).catch(() => {});
      await cluster.stop();
    }
  });
}
