// Policies decided in one call, permits that release the lease and settle
// the estimate on return, throw and abort, and the Redis-down budget and
// circuit — against a real redis-server.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { Policy, RateLimiter, RateLimitedError, RateLimitUnavailableError } from "redis-ratelimit";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const { Server, supportsDetails, sleep, waitUntil } = require("./support/servers.cjs");

let server;
let redis;
let admin;
let limiter;
let DETAILS;
before(async () => {
  server = await new Server().start();
  DETAILS = await supportsDetails(server.port);
  redis = new Redis({ host: "127.0.0.1", port: server.port });
  admin = server.client();
  limiter = new RateLimiter(redis, { timeout: 3000 }); // a loaded CI machine must not turn slow answers into failures here
});
after(async () => {
  limiter?.close();
  redis?.disconnect();
  admin?.disconnect();
  await server?.stop();
});

const calls = async (cmd) => {
  const m = new RegExp(`^cmdstat_${cmd.replace(".", "\\.")}:calls=(\\d+)`, "m").exec(await admin.info("commandstats"));
  return m ? Number(m[1]) : 0;
};

describe("one call per decision", () => {
  test("a one-rule policy sends one RL.CHECK, keyed <prefix><policy>:{<key>}:<limit>", async () => {
    const p = new Policy("api", { prefix: "t1:" }).slidingWindow("custom", 2, 30_000);
    const [check0, all0] = [await calls("rl.check"), await calls("rl.all")];
    const first = await limiter.decide(p, "10.0.0.1");
    assert.equal(await calls("rl.check"), check0 + 1);
    assert.equal(await calls("rl.all"), all0);
    assert.deepEqual(
      { limited: first.limited, name: first.binding.name, limit: first.binding.limit, window: first.binding.window, remaining: first.binding.remaining },
      { limited: false, name: "custom", limit: 2, window: 30_000, remaining: 1 },
    );
    assert.equal(Number(await admin.zcard("t1:api:{10.0.0.1}:custom")), 1);
    await limiter.decide(p, "10.0.0.1");
    const third = await limiter.decide(p, "10.0.0.1");
    assert.equal(third.limited, true);
    assert.equal(third.problem, "rate-limited");
    assert.ok(third.retryAfter > 29_000 && third.retryAfter <= 30_000, String(third.retryAfter));
    assert.ok(Object.isFrozen(third) && Object.isFrozen(third.binding) && Object.isFrozen(third.limits));
  });

  test("several limits: one RL.ALL; windows on one key share a CHECK clause; a duplicate rule names its problem", async () => {
    const p = new Policy("sms", { prefix: "t2:", details: DETAILS })
      .slidingWindow("short", 2, 10_000)
      .slidingWindow("long", 5, 3_600_000)
      .slidingWindow("duplicate", 1, 5_000, { subkey: true, problem: "duplicate" });
    const all0 = await calls("rl.all");
    const a = await limiter.decide(p, "123", { subkeys: { duplicate: "body-a" } });
    assert.equal(await calls("rl.all"), all0 + 1);
    assert.equal(a.limited, false);
    assert.equal(Number(await admin.zcard("t2:sms:{123}:short")), 1, "short and long share the key of the first window");
    assert.equal(Number(await admin.zcard("t2:sms:{123}:duplicate:body-a")), 1);
    if (DETAILS) {
      assert.deepEqual(
        a.limits.map((s) => [s.name, s.limit, s.remaining]),
        [["short", 2, 1], ["long", 5, 4], ["duplicate", 1, 0]],
      );
    }
    const dup = await limiter.decide(p, "123", { subkeys: { duplicate: "body-a" } });
    assert.equal(dup.limited, true);
    if (DETAILS) assert.equal(dup.problem, "duplicate");
    assert.equal(Number(await admin.zcard("t2:sms:{123}:short")), 1, "a refusal writes nothing");
    const b = await limiter.decide(p, "123", { subkeys: { duplicate: "body-b" } });
    assert.equal(b.limited, false);
    const c = await limiter.decide(p, "123", { subkeys: { duplicate: "body-c" } });
    assert.equal(c.limited, true);
    assert.equal(c.problem, "rate-limited");
    assert.equal(c.binding.name, "short");
  });

  test("token buckets on one key share one THROTTLE clause and key, as in the Java and Python packages", async () => {
    const p = new Policy("burst", { prefix: "t8:" }).tokenBucket("second", 10, 1000, 10).tokenBucket("minute", 100, 60_000, 100);
    const d = await limiter.decide(p, "k");
    assert.equal(d.limited, false);
    assert.deepEqual((await admin.hkeys("t8:burst:{k}:second")).sort(), ["1000", "60000"]);
    assert.equal(Number(await admin.exists("t8:burst:{k}:minute")), 0);
    // A second bucket of the same window cannot share the hash (one field per
    // window): refused at definition, as in Python and Java.
    assert.throws(() => new Policy("same", { prefix: "t8:" }).tokenBucket("a", 10, 1000, 10).tokenBucket("b", 5, 1000, 5), { name: "RangeError", field: "limits" });
  });

  test("a lockout policy: max calls per window, then locked with its own problem", async () => {
    const p = new Policy("login", { prefix: "t3:" }).lockout("login", 5, 10_000, 30_000);
    for (let i = 1; i <= 5; i++) {
      const d = await limiter.decide(p, "1.2.3.4:/login");
      assert.deepEqual([d.limited, d.binding.remaining], [false, 5 - i]);
    }
    const locking = await limiter.decide(p, "1.2.3.4:/login");
    assert.deepEqual([locking.limited, locking.problem, locking.binding.remaining], [true, "locked", 0]);
    assert.ok(locking.retryAfter > 29_000 && locking.retryAfter <= 30_000);
    const still = await limiter.decide(p, "1.2.3.4:/login");
    assert.equal(still.problem, "locked");
  });

  test("bad input is refused before any call", async () => {
    const p = new Policy("q", { prefix: "t4:" }).quota("day", null, "day", 5);
    const before0 = await calls("rl.quota");
    await assert.rejects(limiter.decide(p, "u"), /zone per call/);
    await assert.rejects(limiter.decide(p, "u", { zone: "Mars/Base" }), RangeError);
    await assert.rejects(limiter.decide(p, "", { zone: "UTC" }), /invalid key/);
    await assert.rejects(limiter.decide(p, "u", { zone: "UTC", cost: 0 }), /cost/);
    assert.equal(await calls("rl.quota"), before0);
    assert.throws(() => new Policy("g").slidingWindow("global", 1, 1000, { global: true }), /fixed tag/);
    assert.throws(() => new Policy("l").slidingWindow("a", 1, 1000).lockout("b", 1, 1, 1), /stands alone/);
    // an option name that is not one (a typo) is refused, as Python's keyword arguments
    assert.throws(() => new Policy("p", { prefixx: "a" }), { name: "TypeError", message: /unknown option 'prefixx' of policy 'p': expected prefix, .* or counts/ });
    assert.throws(() => new Policy("p").slidingWindow("a", 1, 1000, { costt: 5 }), { name: "TypeError", message: /unknown option 'costt' of limit 'a'/ });
    assert.throws(() => new Policy("p").tokenBucket("b", 1, 1000, 1, { share: true }), /unknown option 'share' of limit 'b'/);
    assert.throws(() => new Policy("p").quota("c", "UTC", "day", 1, { subKey: true }), /unknown option 'subKey'/);
    assert.throws(() => new Policy("p").concurrency("d", 1, 1000, { ttl: 5 }), /unknown option 'ttl'/);
  });

  test("a client that throws at once (no promise) is an error, not an outage: the circuit stays closed", async () => {
    const throwing = { kind: "broken", send: () => { throw new TypeError("not a command this client can send"); }, batch: async () => [], sendAny: async (args) => (args[0] === "COMMAND" ? [["rl.all"]] : "PONG") };
    const l = new RateLimiter(throwing, { timeout: 50 });
    const p = new Policy("sync", { prefix: "t9:" }).slidingWindow("w", 1, 1000);
    try {
      await assert.rejects(l.decide(p, "k"), /not a command this client can send/);
      await sleep(200); // past the budget: a decision left pending would now open the circuit
      assert.equal(l.circuitOpen, false);
    } finally {
      l.close();
    }
  });
});

describe("permits: the lease released and the estimate settled, whatever happens", () => {
  const llm = () =>
    new Policy("llm", { prefix: "t5:", tag: "llm", details: DETAILS })
      .tokenBucket("rate", 60, 60_000, 10)
      .concurrency("inflight", 2, 60_000)
      .quota("tokens", null, "day", 100_000, { cost: "estimate" })
      .slidingWindow("global", 1000, 60_000, { global: true });
  const tokensLeft = async (apiKey, zone = "UTC") =>
    (await limiter.client.quotaPeek(`t5:llm:{llm}:${apiKey}:tokens`, zone, { day: 100_000 }, { cost: 0 })).remaining;
  const inFlight = async (apiKey) => (await limiter.client.leasePeek(`t5:llm:{llm}:${apiKey}:inflight`, { limit: 2, cost: 0 })).remaining;

  test("return: settled to the usage reported, lease released", async () => {
    const out = await limiter.withPermit(llm(), "k1", { estimate: 1000, zone: "UTC" }, async (permit) => {
      assert.equal(await tokensLeft("k1"), 99_000);
      assert.equal(await inFlight("k1"), 1);
      permit.used(300);
      return "answer";
    });
    assert.equal(out, "answer");
    assert.equal(await tokensLeft("k1"), 99_700);
    assert.equal(await inFlight("k1"), 2);
  });

  test("usage above the estimate is debited", async () => {
    await limiter.withPermit(llm(), "k1b", { estimate: 100, zone: "Asia/Shanghai" }, async (permit) => permit.used(250));
    assert.equal(await tokensLeft("k1b", "Asia/Shanghai"), 99_750);
  });

  test("throw: nothing used, everything given back, the error passes through", async () => {
    await assert.rejects(
      limiter.withPermit(llm(), "k2", { estimate: 5000, zone: "UTC" }, async () => {
        throw new Error("model failed");
      }),
      /model failed/,
    );
    assert.equal(await tokensLeft("k2"), 100_000);
    assert.equal(await inFlight("k2"), 2);
  });

  test("abort: the work is told (permit.signal), the permit closes when the work ends (CLIENTS.md §4)", async () => {
    const controller = new AbortController();
    let workSignal;
    const work = limiter.withPermit(llm(), "k3", { estimate: 800, zone: "UTC", signal: controller.signal }, async (permit) => {
      workSignal = permit.signal;
      await sleep(400);
      permit.used(300); // the work ran until here: what it used is charged
    });
    await sleep(50);
    assert.equal(await inFlight("k3"), 1);
    controller.abort();
    await sleep(100);
    assert.equal(workSignal.aborted, true);
    assert.equal(await inFlight("k3"), 1, "the slot is held while the work still runs");
    await work;
    assert.equal(await inFlight("k3"), 2);
    assert.equal(await tokensLeft("k3"), 100_000 - 300);
  });

  test("Symbol.asyncDispose closes the permit (await using)", async () => {
    const permit = await limiter.acquire(llm(), "k4", { estimate: 10, zone: "UTC" });
    assert.equal(permit.admitted, true);
    permit.used(4);
    await permit[Symbol.asyncDispose]();
    assert.equal(await tokensLeft("k4"), 99_996);
    assert.equal(await inFlight("k4"), 2);
  });

  test("a third call in flight is refused by the lease, Retry-After 1 s, and takes nothing", async () => {
    const p = llm();
    const a = await limiter.acquire(p, "k5", { estimate: 10, zone: "UTC" });
    const b = await limiter.acquire(p, "k5", { estimate: 10, zone: "UTC" });
    const c = await limiter.acquire(p, "k5", { estimate: 10, zone: "UTC" });
    assert.deepEqual([a.admitted, b.admitted, c.admitted], [true, true, false]);
    assert.equal(c.decision.binding.name, "inflight");
    assert.equal(c.decision.retryAfter, 1000);
    assert.equal(await tokensLeft("k5"), 99_980);
    await assert.rejects(limiter.withPermit(p, "k5", { estimate: 10, zone: "UTC" }, async () => 1), RateLimitedError);
    await Promise.all([a.close(), b.close(), c.close()]);
    assert.equal(await inFlight("k5"), 2);
    assert.equal(await tokensLeft("k5"), 100_000);
  });

  test("decide() refuses a policy that holds a lease", async () => {
    await assert.rejects(limiter.decide(llm(), "k6", { zone: "UTC" }), /acquire/);
  });
});

// How late this process's timers ran while `fn` ran (a 10 ms ticker): the
// budget's own timer fires that much late on a loaded 2-core machine, so a
// bound of budget + overhead is widened by it, and by nothing else.
async function timed(fn) {
  let lag = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    lag = Math.max(lag, now - last - 10);
    last = now;
  }, 10);
  const t0 = performance.now();
  try {
    await fn();
  } finally {
    clearInterval(ticker);
  }
  return { ms: performance.now() - t0, lag };
}

describe("Redis down: within the budget, no storm, back soon after", () => {
  test("stopped, then restarted: unavailable within 500 ms, fail fast while down, decisions again within 2 s", async () => {
    const own = await new Server().start();
    const client = new Redis({ host: "127.0.0.1", port: own.port, retryStrategy: (n) => Math.min(n * 50, 500) });
    client.on("error", () => {});
    const l = new RateLimiter(client);
    const p = new Policy("down", { prefix: "t6:" }).slidingWindow("w", 100, 60_000);
    try {
      assert.equal((await l.decide(p, "x")).limited, false);
      await own.stop();
      const first = await timed(() => assert.rejects(l.decide(p, "x"), RateLimitUnavailableError));
      assert.ok(first.ms < 700 + first.lag, `first failure took ${first.ms} ms, timers ${first.lag} ms late`);
      assert.equal(l.circuitOpen, true);
      let t0 = Date.now();
      await assert.rejects(l.decide(p, "x"), /circuit open/);
      // At once: not after the 500 ms budget (the error's text already says
      // the circuit refused it). Was < 50 ms, which a loaded machine's event
      // loop alone can miss.
      assert.ok(Date.now() - t0 < 500, `an open circuit fails at once, not after the budget: ${Date.now() - t0} ms`);
      await own.start();
      const up = Date.now();
      await waitUntil("decisions back", async () => !(await l.decide(p, "x").catch(() => ({ limited: true }))).limited, 5000, 50);
      assert.ok(Date.now() - up < 2000, `back after ${Date.now() - up} ms`);
      // Paused (connections accepted, never answered): the budget holds too.
      own.pause();
      const paused = await timed(() => assert.rejects(l.decide(p, "x"), RateLimitUnavailableError));
      assert.ok(paused.ms < 700 + paused.lag, `paused: ${paused.ms} ms, timers ${paused.lag} ms late`);
      own.resume();
      const resumed = Date.now();
      await waitUntil("decisions back after the pause", async () => !(await l.decide(p, "x").catch(() => ({ limited: true }))).limited, 5000, 50);
      assert.ok(Date.now() - resumed < 2000);
    } finally {
      l.close();
      client.disconnect();
      await own.stop();
    }
  });
});

describe("a decision that lands after its budget", () => {
  test("Redis stalls with the RL.ALL read: unavailable within the budget, then its lease and estimate are given back", async () => {
    const own = await new Server().start();
    const client = new Redis({ host: "127.0.0.1", port: own.port });
    client.on("error", () => {});
    const raw = own.client();
    const l = new RateLimiter(client, { timeout: 200, probeInterval: 50 });
    const p = new Policy("stall", { prefix: "t7:" })
      .concurrency("inflight", 2, 60_000)
      .quota("tokens", "UTC", "day", 1000, { cost: "estimate" });
    const held = async () => 2 - (await raw.call("RL.LEASEPEEK", "t7:stall:{k}:inflight", "*", "2", "COST", "0"))[3];
    const left = async () => (await raw.call("RL.QUOTAPEEK", "t7:stall:{k}:tokens", "*", "UTC", "DAY", "1000", "COST", "0"))[3];
    try {
      await client.ping();
      await l.client.ensureBackend(); // the first call's module check, done before Redis stalls
      own.pause();
      const t0 = Date.now();
      try {
        await assert.rejects(l.acquire(p, "k", { estimate: 100 }), RateLimitUnavailableError);
        assert.ok(Date.now() - t0 < 700, `answered after ${Date.now() - t0} ms`);
      } finally {
        own.resume();
      }
      // Redis runs the stalled RL.ALL now: whatever it took comes back.
      await waitUntil("the late lease and estimate given back", async () => (await held()) === 0 && (await left()) === 1000, 5000, 50);
      await sleep(300);
      assert.deepEqual([await held(), await left()], [0, 1000]);
    } finally {
      l.close();
      client.disconnect();
      raw.disconnect();
      await own.stop();
    }
  });

  for (const commandTimeout of [100, 400]) {
    test(`ioredis commandTimeout ${commandTimeout} ms drops the reply of a stalled RL.ALL that Redis still runs: its lease is released by token`, async () => {
      // 100: the client's timeout fires within the 200 ms budget; 400: after it, while the limiter awaits it late.
      const own = await new Server().start();
      const client = new Redis({ host: "127.0.0.1", port: own.port, commandTimeout });
      client.on("error", () => {});
      const raw = own.client();
      // A timeout this short is refused by default (it drops replies Redis
      // still runs); allowed here to drive the path of a lost reply.
      const l = new RateLimiter(client, { timeout: 200, probeInterval: 50, checkTimeouts: false });
      const p = new Policy("lost", { prefix: "t8:" })
        .concurrency("inflight", 2, 60_000)
        .quota("tokens", "UTC", "day", 1000, { cost: "estimate" });
      const held = async () => 2 - (await raw.call("RL.LEASEPEEK", "t8:lost:{k}:inflight", "*", "2", "COST", "0"))[3];
      const ran = async () => Number(/cmdstat_rl\.all:calls=(\d+)/.exec(await raw.info("commandstats"))?.[1] ?? 0);
      try {
        await client.ping();
        await l.client.ensureBackend(); // the first call's module check, done before Redis stalls
        own.pause();
        try {
          await assert.rejects(l.acquire(p, "k", { estimate: 100 }), RateLimitUnavailableError);
          await sleep(commandTimeout + 200); // the reply is lost for good
        } finally {
          own.resume();
        }
        await waitUntil("the RL.ALL ran", async () => (await ran()) === 1, 5000, 50);
        await waitUntil("the lease released by its token", async () => (await held()) === 0, 5000, 50);
      } finally {
        l.close();
        client.disconnect();
        raw.disconnect();
        await own.stop();
      }
    });
  }
});
