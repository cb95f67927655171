// The `local` Redis-down mode (a policy's `failure: "local"`): while Redis
// cannot decide, the limiter decides such a policy on its local backend —
// exact within one instance (costs and estimates charged and settled, leases
// held until released, Retry-After from the local state), memory bounded by
// refusing rather than forgetting a spent key — and Redis decides again once
// it answers. "Redis" here is a local backend of its own behind a switch
// (down: every command fails to connect), on the same hand-moved clock: no
// redis-server, no sleeping but for the probe.
import { test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { Policy, RateLimiter, RateLimitUnavailableError } from "redis-ratelimit";
import { rateLimit } from "redis-ratelimit/express";
import { LocalBackend, ManualClock } from "redis-ratelimit/local";

const START = Date.parse("2026-12-07T10:20:00Z"); // a minute and an hour under way

class SwitchRedis {
  kind = "switch";
  down = true;
  constructor(clock) {
    this.server = new LocalBackend({ clock });
  }
  check() {
    if (this.down) throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6379"), { code: "ECONNREFUSED" });
  }
  async send(c) {
    this.check();
    return this.server.send(c);
  }
  async sendAny(a) {
    this.check();
    return this.server.sendAny(a);
  }
  async batch(cs) {
    this.check();
    return this.server.batch(cs);
  }
}

function setup(bounds = {}, options = {}) {
  const clock = new ManualClock(START);
  const redis = new SwitchRedis(clock);
  const backend = new LocalBackend({ clock, ...bounds });
  const limiter = new RateLimiter(redis, { localBackend: backend, probeInterval: 20, runtimeLimits: false, ...options });
  return { clock, redis, backend, limiter };
}

test("estimates are charged and settled on the local backend while Redis is down", async () => {
  const { clock, redis, limiter } = setup();
  try {
    const llm = new Policy("llm", { failure: "local" }).slidingWindow("tokens", 10_000, 60_000, { cost: "estimate" });
    // 10 calls estimating 5,000 of a 10,000-token minute, none closed yet: 2 pass, the others wait for the first
    const admitted = [];
    for (let i = 0; i < 10; i++) {
      const p = await limiter.acquire(llm, "customer:7", { estimate: 5_000 });
      if (p.decision.limited) assert.equal(p.decision.retryAfter, 60_000 - i * 1000);
      else admitted.push(p);
      clock.advance(1000);
    }
    assert.equal(admitted.length, 2);
    assert.equal(admitted[0].decision.limits[0].remaining, 5_000); // the local state, for the headers
    admitted[0].used(1_000); // 4,000 come back
    await admitted[0].close();
    assert.equal((await limiter.acquire(llm, "customer:7", { estimate: 4_000 })).decision.limited, false);
    const d = (await limiter.acquire(llm, "customer:7", { estimate: 1 })).decision;
    assert.equal(d.limited, true);
    assert.equal(d.retryAfter, 50_000); // the first call's units leave 60 s after it came
    assert.equal(redis.server.size, 0); // Redis saw none of it
  } finally {
    limiter.close();
  }
});

test("a lease is held until its permit closes; a lockout locks", async () => {
  const { clock, limiter } = setup();
  try {
    const jobs = new Policy("jobs", { failure: "local" }).concurrency("running", 1, 60_000);
    const first = await limiter.acquire(jobs, "k");
    assert.equal(first.decision.limited, false);
    assert.equal((await limiter.acquire(jobs, "k")).decision.limited, true);
    await first.close();
    assert.equal((await limiter.acquire(jobs, "k")).decision.limited, false);
    const login = new Policy("login", { failure: "local" }).lockout("attempts", 2, 60_000, 900_000);
    const limited = [];
    for (let i = 0; i < 3; i++) limited.push((await limiter.decide(login, "ann")).limited);
    assert.deepEqual(limited, [false, false, true]);
    clock.advance(300_000);
    assert.equal((await limiter.decide(login, "ann")).retryAfter, 600_000);
  } finally {
    limiter.close();
  }
});

test("past the bound new keys are refused and a spent key is never forgotten before its window ends", async () => {
  const { clock, backend, limiter } = setup({ maxKeys: 100, maxEntries: 10_000 });
  try {
    const hourly = new Policy("h", { failure: "local" }).slidingWindow("per-hour", 1, 3_600_000);
    assert.equal((await limiter.decide(hourly, "victim")).limited, false);
    let admitted = 0;
    const refused = [];
    for (let i = 0; i < 1000; i++) {
      const d = await limiter.decide(hourly, `flood${i}`);
      if (d.limited) refused.push(d);
      else admitted += 1;
    }
    assert.equal(admitted, 99);
    assert.equal(refused.length, 901);
    // until the earliest key ends; the policy's first limit named, nothing left
    assert.deepEqual(new Set(refused.map((d) => `${d.retryAfter} ${d.binding.name} ${d.binding.remaining}`)), new Set(["3600000 per-hour 0"]));
    assert.equal(backend.size, 100);
    assert.equal((await limiter.decide(hourly, "victim")).retryAfter, 3_600_000);
    clock.advance(3_600_000); // every key ended: swept, room again
    assert.equal((await limiter.decide(hourly, "victim")).limited, false);
    assert.equal((await limiter.decide(hourly, "new")).limited, false);
    assert.equal(backend.size, 2);
  } finally {
    limiter.close();
  }
});

test("the entries are bounded too", async () => {
  const { clock, backend, limiter } = setup({ maxKeys: 1000, maxEntries: 50 });
  try {
    const p = new Policy("p", { failure: "local" }).slidingWindow("w", 1000, 60_000);
    for (let i = 0; i < 50; i++) assert.equal((await limiter.decide(p, "k")).limited, false);
    const d = await limiter.decide(p, "k");
    assert.equal(d.limited, true);
    assert.equal(d.retryAfter, 60_000);
    assert.equal(backend.entries, 50); // the refused call was undone
    clock.advance(60_000);
    assert.equal((await limiter.decide(p, "k")).limited, false);
    assert.equal(backend.entries, 1);
  } finally {
    limiter.close();
  }
});

test("closed wins, open policies pass uncounted, and the hooks hear the mode", async () => {
  const events = [];
  const { limiter } = setup({}, { hooks: [{ decided: (e) => events.push(`${e.policy} ${e.outcome} ${e.mode}`) }] });
  try {
    const local = new Policy("local", { failure: "local", limits: "1/minute" });
    const open = new Policy("open", { failure: "open", limits: "1/minute" });
    const closed = new Policy("closed", { failure: "closed", limits: "1/minute" });
    await assert.rejects(limiter.decideAll([open.bind("a"), closed.bind("a")]), RateLimitUnavailableError); // 503
    await assert.rejects(limiter.decide(open, "a"), RateLimitUnavailableError); // through, no decision
    const d = await limiter.decideAll([open.bind("a"), local.bind("a")]);
    assert.equal(d.limited, false);
    assert.equal(d.policy, "local");
    assert.equal((await limiter.decideAll([open.bind("a"), local.bind("a")])).limited, true); // the local window of 1
    assert.deepEqual(events, ["open+closed unavailable fail_closed", "open unavailable fail_open", "open+local unavailable local", "open+local unavailable local"]);
  } finally {
    limiter.close();
  }
});

test("Redis back decides again, with its own counters", async () => {
  const { redis, limiter } = setup();
  try {
    const p = new Policy("p", { failure: "local", limits: "2/minute" });
    const limited = [];
    for (let i = 0; i < 3; i++) limited.push((await limiter.decide(p, "k")).limited);
    assert.deepEqual(limited, [false, false, true]);
    assert.equal(limiter.circuitOpen, true);
    redis.down = false;
    const deadline = Date.now() + 5000;
    while ((await limiter.decide(p, "k")).limited) {
      // the probe (every 20 ms) closes the circuit: then Redis decides
      assert.ok(Date.now() < deadline, "Redis decides again");
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await limiter.decide(p, "k")).limited, false); // Redis's own counter: 2 of 2
    assert.equal((await limiter.decide(p, "k")).limited, true);
    assert.equal(redis.server.size, 1);
  } finally {
    limiter.close();
  }
});

test("an express endpoint answers 429 with the local Retry-After", async () => {
  const { limiter } = setup();
  const app = express();
  app.get("/", rateLimit({ limiter, policy: new Policy("api", { failure: "local", limits: "3/minute" }), key: () => "k" }), (req, res) => res.send("ok"));
  const server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  try {
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await fetch(`http://127.0.0.1:${server.address().port}/`));
    assert.deepEqual(answers.map((r) => r.status), [200, 200, 200, 429]);
    assert.equal(answers[2].headers.get("ratelimit"), '"3-per-1m";r=0;t=60'); // the local state
    assert.equal(answers[3].headers.get("retry-after"), "60");
  } finally {
    server.close();
    limiter.close();
  }
});
