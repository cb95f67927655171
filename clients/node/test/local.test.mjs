// The local backend (redis-ratelimit/local), with no Redis: the README's
// example as written, and what the sequence cases cannot drive against the
// real module (a lockout lifting by the clock). The golden sequences
// (sequences.test.mjs) show it decides as the module does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Policy } from "redis-ratelimit";
import { LocalBackend, ManualClock } from "redis-ratelimit/local";
import { importReadmeBlock } from "./support/readme.cjs";

test("the README's endpoint test runs as written, without Redis", async () => {
  const mod = await importReadmeBlock("new LocalBackend()", "local", (block) =>
    block.replace('console.log(statuses.join(" ")); // 200 200 200 429 200', "export { statuses };"));
  assert.deepEqual(mod.statuses, [200, 200, 200, 429, 200]);
});

test("a lockout lifts when the clock passes its lock time", async () => {
  const local = new LocalBackend();
  const limiter = local.limiter();
  try {
    const p = new Policy("login").lockout("l", 2, 60_000, 30_000);
    const limited = [];
    for (let i = 0; i < 3; i++) limited.push((await limiter.decide(p, "ann")).limited);
    assert.deepEqual(limited, [false, false, true]);
    local.advance(29_999);
    const d = await limiter.decide(p, "ann");
    assert.equal(d.limited, true);
    assert.equal(d.retryAfter, 1);
    local.advance(1);
    assert.equal((await limiter.decide(p, "ann")).limited, false);
  } finally {
    limiter.close();
  }
});

test("state, reset and penalty on the local backend; a quota turns over at local midnight", async () => {
  const clock = new ManualClock(1_767_225_600_000 - 3_600_000); // 2026-01-01T00:00+01:00 in Paris
  const local = new LocalBackend({ clock });
  const limiter = local.limiter();
  try {
    const api = new Policy("api", { limits: "5/minute" });
    await limiter.decide(api, "bob");
    assert.equal((await limiter.state(api, "bob")).limits[0].remaining, 4);
    assert.equal((await limiter.penalty(api, "bob", 4)).limits[0].remaining, 0);
    assert.equal((await limiter.decide(api, "bob")).limited, true);
    await limiter.reset(api, "bob");
    assert.equal((await limiter.state(api, "bob")).limits[0].remaining, 5);
    const q = new Policy("q").quota("day", "Europe/Paris", "day", 1);
    assert.equal((await limiter.decide(q, "k")).limited, false);
    const d = await limiter.decide(q, "k");
    assert.equal(d.limited, true);
    assert.equal(d.retryAfter, 86_400_000);
    local.advance(86_400_000);
    assert.equal((await limiter.decide(q, "k")).limited, false);
  } finally {
    limiter.close();
  }
});

test("Fastify: a default limit for every route, opt-out, skip, exempt callers and a custom refusal (as express's)", async () => {
  const { default: Fastify } = await import("fastify");
  const { rateLimitPlugin, keys } = await import("redis-ratelimit/fastify");
  const local = new LocalBackend();
  const limiter = local.limiter();
  const app = Fastify();
  try {
    const perIp = new Policy("ip", { limits: "1/minute" });
    const perKey = new Policy("key", { limits: "2/minute" });
    await app.register(rateLimitPlugin, { limiter, default: { policy: perIp, key: keys.ip() }, exempt: { ips: ["10.0.0.0/8"], keys: ["internal"] } });
    app.get("/a", async () => ({ ok: true })); // the default
    app.get("/b", { config: { rateLimit: false } }, async () => ({ ok: true })); // opted out
    app.get(
      "/c",
      {
        config: {
          rateLimit: {
            policy: perKey,
            key: keys.header("X-Key"),
            skip: (request) => request.query.health === "1",
            onRefused: (_request, reply, r) => reply.code(503).header("Retry-After", r.headers.find(([k]) => k === "Retry-After")[1]).send({ busy: r.decision.binding.name }),
          },
        },
      },
      async () => ({ ok: true }),
    );
    await app.ready();
    const get = async (url, headers = {}, remoteAddress = "127.0.0.1") => {
      const r = await app.inject({ method: "GET", url, headers, remoteAddress });
      return [r.statusCode, r.headers["retry-after"] ?? null, r.body];
    };
    assert.deepEqual((await get("/a")).slice(0, 2), [200, null]);
    assert.deepEqual((await get("/a")).slice(0, 2), [429, "60"]);
    assert.equal((await get("/a", {}, "10.1.2.3"))[0], 200); // an exempt range, from the plugin's defaults
    assert.equal((await get("/a", {}, "10.1.2.3"))[0], 200);
    assert.deepEqual([(await get("/b"))[0], (await get("/b"))[0]], [200, 200]);
    const c = [];
    for (let i = 0; i < 3; i++) c.push(await get("/c", { "x-key": "k1" }));
    assert.deepEqual(c.map((x) => x[0]), [200, 200, 503]);
    assert.deepEqual([c[2][1], JSON.parse(c[2][2])], ["60", { busy: "2-per-1m" }]);
    assert.equal((await get("/c?health=1", { "x-key": "k1" }))[0], 200); // skipped
    for (let i = 0; i < 3; i++) assert.equal((await get("/c", { "x-key": "internal" }))[0], 200); // an exempt key
    assert.equal(local.keys.size, 2, "exempt and skipped calls wrote nothing"); // ip:{127.0.0.1} and key:{k1}
  } finally {
    await app.close();
    limiter.close();
  }
});
