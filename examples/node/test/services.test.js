// SERVICES.md line by line, over HTTP, against one redis-server with the
// module: the answers, headers and problem bodies of every endpoint, and
// two instances on one Redis (one started later) acting as one service.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { App, BACKEND, Server, items, names, sleep, waitUntil } from "./harness.js";

const PROBLEM = "https://redis-ratelimit.dev/problems/";
let redis;
let app;
let env;
before(async () => {
  redis = await new Server().start();
  env = { REDIS_URL: `redis://127.0.0.1:${redis.port}`, RL_PREFIX: `t${Date.now()}:`, RL_TIMEOUT_MS: "3000" };
  app = await new App(env).start();
});
after(async () => {
  await app?.stop();
  await redis?.stop();
});

const assertProblem = (r, status, slug) => {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.match(r.h("content-type"), /^application\/problem\+json/);
  assert.equal(r.body.type, PROBLEM + slug);
  assert.equal(r.body.status, status);
  assert.equal(typeof r.body.title, "string");
  assert.equal(typeof r.body.detail, "string");
};

test("GET /health", async () => {
  const r = await app.req("GET", "/health");
  assert.equal(r.status, 200);
});

describe("1. POST /seed000/sms", () => {
  test("2 per 10 s and 5 per hour per phone, duplicates refused as /duplicate, headers per item", async () => {
    const t0 = Date.now();
    const a = await app.req("POST", "/seed000/sms", { json: { phone: "1001", n: 1 } });
    assert.equal(a.status, 200);
    assert.deepEqual(a.body, { sent: true });
    assert.equal(a.h("ratelimit-policy"), '"short";q=2;w=10, "long";q=5;w=3600, "duplicate";q=1;w=5');
    assert.deepEqual(items(a.h("ratelimit")), { short: { r: 1, t: 10 }, long: { r: 4, t: 3600 }, duplicate: { r: 0, t: 5 } });
    const dup = await app.req("POST", "/seed000/sms", { json: { phone: "1001", n: 1 } });
    assertProblem(dup, 429, "duplicate");
    assert.ok(Number(dup.h("retry-after")) >= 1 && Number(dup.h("retry-after")) <= 5);
    // On a refusal each item is that rule's own peek: short would leave 0.
    // Its t counts down from the first request (a loaded machine may take
    // more than a second between the two): w rounded up, minus the seconds gone.
    const gone = Math.ceil((Date.now() - t0) / 1000);
    const got = items(dup.h("ratelimit"));
    assert.deepEqual([got.short.r, got.long.r, got.duplicate.r], [0, 3, 0]);
    for (const [name, w] of [["short", 10], ["long", 3600], ["duplicate", 5]]) {
      assert.ok(got[name].t <= w && got[name].t >= w - gone, `${name}: t=${got[name].t}, w=${w}, ${gone} s gone`);
    }
    const second = await app.req("POST", "/seed000/sms", { json: { phone: "1001", n: 2 } });
    assert.equal(second.status, 200, "the refusal changed no counter");
    assert.equal(items(second.h("ratelimit")).short.r, 0);
    const third = await app.req("POST", "/seed000/sms", { json: { phone: "1001", n: 3 } });
    assertProblem(third, 429, "rate-limited");
    const waited = Math.ceil((Date.now() - t0) / 1000); // until the first request leaves "short"
    assert.ok(Number(third.h("retry-after")) <= 10 && Number(third.h("retry-after")) >= 10 - waited, third.h("retry-after"));
    assert.deepEqual(names(third.h("ratelimit")), ["short", "long", "duplicate"]);
    assert.equal(items(third.h("ratelimit")).short.r, 0);
    assert.equal(items(third.h("ratelimit")).long.r, 2, "long would leave 2");
  });

  test("a duplicate is /duplicate whatever else refuses too", async () => {
    await app.req("POST", "/seed000/sms", { json: { phone: "1002", n: 1 } });
    await app.req("POST", "/seed000/sms", { json: { phone: "1002", n: 2 } });
    const both = await app.req("POST", "/seed000/sms", { json: { phone: "1002", n: 2 } });
    assertProblem(both, 429, "duplicate");
  });

  test("20 concurrent clients on one phone: exactly 2 admitted", async () => {
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => app.req("POST", "/seed000/sms", { json: { phone: "1003", n: i } })));
    assert.deepEqual([rs.filter((r) => r.status === 200).length, rs.filter((r) => r.status === 429).length], [2, 18], rs.map((r) => r.status).join());
  });

  test("bad input: 400 before any Redis call", async () => {
    assertProblem(await app.req("POST", "/seed000/sms", { body: "{not json", headers: { "Content-Type": "application/json" } }), 400, "bad-request");
    assertProblem(await app.req("POST", "/seed000/sms", { json: { phone: "12a" } }), 400, "bad-request");
    assertProblem(await app.req("POST", "/seed000/sms", { json: { phone: "1".repeat(21) } }), 400, "bad-request");
    assertProblem(await app.req("POST", "/seed000/sms", { json: { phone: 123 } }), 400, "bad-request");
    assertProblem(await app.req("POST", "/seed000/sms", { json: { phone: "" } }), 400, "bad-request");
    // the body is JSON whatever its Content-Type (none, text/plain): not JSON is 400, JSON is decided
    assertProblem(await app.req("POST", "/seed000/sms", { body: "phone=1", headers: { "Content-Type": "text/plain" } }), 400, "bad-request");
    const sent = await app.req("POST", "/seed000/sms", { body: JSON.stringify({ phone: "1004" }), headers: { "Content-Type": "text/plain" } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
  });

  test("a body over the framework's limit (express 100 kB, Fastify 1 MiB): 413 problem, not 500", async () => {
    const big = JSON.stringify({ phone: "1", pad: "x".repeat(2 * 1024 * 1024) });
    assertProblem(await app.req("POST", "/seed000/sms", { body: big, headers: { "Content-Type": "application/json" } }), 413, "too-large");
  });
});

describe("2. POST /seed001/ocr and /admin/limits/ocr", () => {
  test("missing X-User: 401", async () => {
    assertProblem(await app.req("POST", "/seed001/ocr"), 401, "unauthorized");
  });

  test("5 per hour, 20 per day in Asia/Shanghai; limits changed at run time, seen by another instance and one started later", async () => {
    const ocr = (user, a = app) => a.req("POST", "/seed001/ocr", { headers: { "X-User": user } });
    for (let i = 1; i <= 5; i++) {
      const r = await ocr("alice");
      assert.equal(r.status, 200);
      assert.equal(r.h("ratelimit-policy"), '"day";q=20;w=86400, "hour";q=5;w=3600');
      assert.deepEqual([items(r.h("ratelimit")).day.r, items(r.h("ratelimit")).hour.r], [20 - i, 5 - i]);
    }
    const sixth = await ocr("alice");
    assertProblem(sixth, 429, "rate-limited");
    assert.ok(Number(sixth.h("retry-after")) >= 1 && Number(sixth.h("retry-after")) <= 3600);
    // The day's own peek: 5 counted, this one would leave 14 (the refusal did not count it).
    assert.equal(items(sixth.h("ratelimit")).day.r, 14);
    assert.equal(items(sixth.h("ratelimit")).hour.r, 0);

    const other = await new App(env).start();
    try {
      assert.deepEqual((await other.req("GET", "/admin/limits/ocr")).body, { day: 20, hour: 5 });
      const put = await other.req("PUT", "/admin/limits/ocr", { json: { day: 2, hour: 5 } });
      assert.equal(put.status, 204);
      assert.deepEqual((await app.req("GET", "/admin/limits/ocr")).body, { day: 2, hour: 5 });
      await sleep(1000); // every instance applies a change within 1 s
      assert.equal((await ocr("bob")).status, 200);
      assert.equal((await ocr("bob", other)).status, 200);
      const third = await ocr("bob");
      assertProblem(third, 429, "rate-limited");
      assert.equal(items(third.h("ratelimit")).day.r, 0);
      assert.equal((await ocr("alice")).status, 429, "lowered below the count: refused at once");

      assertProblem(await other.req("PUT", "/admin/limits/ocr", { json: { day: -1, hour: 5 } }), 400, "bad-request");
      assertProblem(await other.req("PUT", "/admin/limits/ocr", { json: { day: 1 } }), 400, "bad-request");
      assertProblem(await other.req("PUT", "/admin/limits/ocr", { json: { day: 1.5, hour: 2 } }), 400, "bad-request");
      for (const body of ['{"day": 5.0, "hour": 2}', '{"day": 5, "hour": 1e1}']) {
        assertProblem(await other.req("PUT", "/admin/limits/ocr", { body, headers: { "Content-Type": "application/json" } }), 400, "bad-request");
      }

      assert.equal((await other.req("PUT", "/admin/limits/ocr", { json: { day: 0, hour: 5 } })).status, 204);
      const late = await new App(env).start();
      try {
        assert.deepEqual((await late.req("GET", "/admin/limits/ocr")).body, { day: 0, hour: 5 });
        const off = await ocr("carol", late);
        assertProblem(off, 429, "rate-limited");
        assert.equal(off.h("retry-after"), null, "a limit of 0: waiting cannot help");
      } finally {
        await late.stop();
      }
      await sleep(1000);
      assert.equal((await ocr("dave")).h("retry-after"), null);
    } finally {
      await other.req("PUT", "/admin/limits/ocr", { json: { day: 20, hour: 5 } });
      await other.stop();
    }
  });
});

describe("3. /seed002/api", () => {
  const legacy = (r, name) => {
    const p = items(r.h("ratelimit-policy"))[name];
    const s = items(r.h("ratelimit"))[name];
    assert.deepEqual(
      [Number(r.h("x-ratelimit-limit")), Number(r.h("x-ratelimit-remaining")), Number(r.h("x-ratelimit-reset"))],
      [p.q, s.r, s.t],
    );
  };

  test("default: 10 per 60 s per client IP, X-RateLimit-* equal to the RateLimit items", async () => {
    for (let i = 1; i <= 10; i++) {
      const r = await app.req("GET", "/seed002/api/default", { ip: "198.51.100.7" });
      assert.equal(r.status, 200);
      assert.equal(r.h("ratelimit-policy"), '"default";q=10;w=60');
      assert.equal(items(r.h("ratelimit")).default.r, 10 - i);
      legacy(r, "default");
    }
    const r = await app.req("GET", "/seed002/api/default", { ip: "198.51.100.7" });
    assertProblem(r, 429, "rate-limited");
    legacy(r, "default");
    assert.ok(Number(r.h("retry-after")) >= 59 && Number(r.h("retry-after")) <= 60);
    assert.equal((await app.req("GET", "/seed002/api/default", { ip: "198.51.100.8" })).status, 200, "per IP");
  });

  test("client IP: the right-most X-Forwarded-For address that is not loopback", async () => {
    for (let i = 0; i < 5; i++) assert.equal((await app.req("GET", "/seed002/api/custom", { ip: `10.9.9.${i}, 192.0.2.55, 127.0.0.1` })).status, 200);
    const r = await app.req("GET", "/seed002/api/custom", { ip: "192.0.2.55" });
    assertProblem(r, 429, "rate-limited");
    assert.equal(r.h("ratelimit-policy"), '"custom";q=5;w=30');
    legacy(r, "custom");
  });

  test("user/{userId}: 3 per 60 s per path variable", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await app.req("GET", "/seed002/api/user/u42", { ip: `192.0.2.${i + 1}` })).status, 200);
    const r = await app.req("GET", "/seed002/api/user/u42", { ip: "192.0.2.99" });
    assertProblem(r, 429, "rate-limited");
    assert.equal(r.h("ratelimit-policy"), '"user";q=3;w=60');
    legacy(r, "user");
    assert.deepEqual((await app.req("GET", "/seed002/api/user/u43")).body, { user: "u43" });
  });

  test("20 concurrent clients on one IP: exactly 5 admitted by custom", async () => {
    const rs = await Promise.all(Array.from({ length: 20 }, () => app.req("GET", "/seed002/api/custom", { ip: "192.0.2.200" })));
    assert.equal(rs.filter((r) => r.status === 200).length, 5, rs.map((r) => r.status).join());
  });
});

describe("4. POST /seed004/login", () => {
  test("5 calls per 10 s window, the 6th locks for 30 s as /locked", async () => {
    for (let i = 1; i <= 5; i++) {
      const r = await app.req("POST", "/seed004/login", { ip: "203.0.113.44" });
      assert.equal(r.status, 200);
      assert.equal(r.h("ratelimit-policy"), '"login";q=5;w=10');
      const s = items(r.h("ratelimit")).login;
      assert.equal(s.r, 5 - i);
      assert.ok(s.t >= 9 && s.t <= 10);
    }
    for (let i = 0; i < 2; i++) {
      const r = await app.req("POST", "/seed004/login", { ip: "203.0.113.44" });
      assertProblem(r, 429, "locked");
      assert.ok(Number(r.h("retry-after")) >= 29 && Number(r.h("retry-after")) <= 30);
      assert.equal(items(r.h("ratelimit")).login.r, 0);
      assert.equal(items(r.h("ratelimit")).login.t, Number(r.h("retry-after")));
    }
    assert.equal((await app.req("POST", "/seed004/login", { ip: "203.0.113.45" })).status, 200, "per IP");
  });
});

describe("5. POST /llm/complete", () => {
  const llm = (key, { n = 1000, zone = "Asia/Tokyo", headers = {}, signal } = {}) =>
    app.req("POST", "/llm/complete", { json: { max_tokens: n }, headers: { "X-Api-Key": key, "X-Zone": zone, ...headers }, signal });
  const tokens = (r) => items(r.h("ratelimit")).tokens.r;

  test("bad input: 401 without a key, 400 for a zone or max_tokens out of contract", async () => {
    assertProblem(await app.req("POST", "/llm/complete", { json: { max_tokens: 1 }, headers: { "X-Zone": "UTC" } }), 401, "unauthorized");
    assertProblem(await llm("k0", { zone: "Mars/Base" }), 400, "bad-request");
    assertProblem(await llm("k0", { zone: "europe/paris" }), 400, "bad-request");
    // RL.QUOTA takes a fixed offset, and Debian's zoneinfo directory holds
    // files that are no IANA names: neither is an IANA zone (SERVICES.md).
    for (const zone of ["+05:00", "-00:00", "localtime", "posixrules"]) assertProblem(await llm("k0", { zone }), 400, "bad-request");
    assertProblem(await llm("k0", { n: 0 }), 400, "bad-request");
    assertProblem(await llm("k0", { n: 100001 }), 400, "bad-request");
    assertProblem(await llm("k0", { n: 1.5 }), 400, "bad-request");
    // an integer is one written as an integer, as the Python and Java apps read JSON
    for (const n of ["1e3", "100.0", "1E2", "99999999999999999999"]) {
      const body = `{"max_tokens": ${n}}`;
      assertProblem(await app.req("POST", "/llm/complete", { body, headers: { "X-Api-Key": "k0", "X-Zone": "UTC", "Content-Type": "application/json" } }), 400, "bad-request");
    }
  });

  test("the fake model's knobs: X-Used-Tokens above N (even beyond a long) counts as N; not a number: the default", async () => {
    const a = await llm("k-knobs", { n: 10, headers: { "X-Used-Tokens": "99999999999999999999999", "X-Sleep-Ms": "0" } });
    assert.equal(a.status, 200);
    assert.deepEqual(a.body, { used_tokens: 10 });
    const b = await llm("k-knobs", { n: 10, headers: { "X-Used-Tokens": "x", "X-Sleep-Ms": "-5" } });
    assert.equal(b.status, 200);
    assert.deepEqual(b.body, { used_tokens: 5 });
  });

  test("the budget is settled to the tokens used; a failing model uses none; headers per item", async () => {
    const a = await llm("k1", { n: 1000, headers: { "X-Used-Tokens": "300", "X-Sleep-Ms": "10" } });
    assert.equal(a.status, 200);
    assert.deepEqual(a.body, { used_tokens: 300 });
    assert.equal(a.h("ratelimit-policy"), '"rate";q=60;w=60, "inflight";q=2, "tokens";q=100000;w=86400, "global";q=1000;w=60');
    assert.equal(tokens(a), 99_000, "N checked up front");
    const b = await llm("k1", { n: 500, headers: { "X-Sleep-Ms": "10" } });
    assert.equal(tokens(b), 100_000 - 300 - 500, "settled to U = 300");
    assert.deepEqual(b.body, { used_tokens: 250 }, "default U = floor(N/2)");
    const fail = await llm("k1", { n: 2000, headers: { "X-Fail": "1", "X-Sleep-Ms": "10" } });
    assert.equal(fail.status, 500);
    const c = await llm("k1", { n: 1, headers: { "X-Used-Tokens": "5", "X-Sleep-Ms": "10" } });
    assert.equal(tokens(c), 100_000 - 300 - 250 - 1, "the 500 settled to 0; X-Used-Tokens above N counts as N");
    // A knob that is not a non-negative integer takes its default (floor(N/2)), as in the Python app.
    const d = await llm("k1", { n: 10, headers: { "X-Used-Tokens": "-5", "X-Sleep-Ms": "soon" } });
    assert.deepEqual([d.status, d.body], [200, { used_tokens: 5 }]);
    assert.deepEqual(c.body, { used_tokens: 1 });
  });

  test("at most 2 in flight; the 3rd is 429 with Retry-After: 1; no lease left after", async () => {
    const rs = await Promise.all([0, 1, 2].map(() => llm("k2", { headers: { "X-Sleep-Ms": "400" } })));
    const refused = rs.filter((r) => r.status === 429);
    assert.equal(rs.filter((r) => r.status === 200).length, 2);
    assert.equal(refused.length, 1);
    assertProblem(refused[0], 429, "rate-limited");
    assert.equal(refused[0].h("retry-after"), "1");
    assert.equal(items(refused[0].h("ratelimit")).inflight.r, 0);
    const after1 = await llm("k2", { headers: { "X-Sleep-Ms": "10" } });
    assert.equal(items(after1.h("ratelimit")).inflight.r, 1, "both leases given back");
  });

  test("a client that disconnects: the lease is released and the budget settled to 0", async () => {
    const before1 = await llm("k3", { n: 10, headers: { "X-Sleep-Ms": "10", "X-Used-Tokens": "0" } });
    assert.equal(tokens(before1), 99_990);
    const controllers = [new AbortController(), new AbortController()];
    const pending = controllers.map((c) => llm("k3", { n: 5000, headers: { "X-Sleep-Ms": "5000" }, signal: c.signal }).catch((e) => e));
    await sleep(200);
    const full = await llm("k3", { n: 10, headers: { "X-Sleep-Ms": "10" } });
    assert.equal(full.status, 429, "two in flight");
    const t0 = Date.now();
    controllers.forEach((c) => c.abort());
    await Promise.all(pending);
    await waitUntil("leases released after the disconnects", async () => (await llm("k3", { n: 10, headers: { "X-Sleep-Ms": "10", "X-Used-Tokens": "0" } })).status === 200, 3000, 20);
    // Cancelled with the client, not when the model would have ended (4.8 s
    // later); no tighter bound: a loaded CI box took 719 ms for a 700 ms one.
    assert.ok(Date.now() - t0 < 2000, `released ${Date.now() - t0} ms after the disconnect`);
    const r = await llm("k3", { n: 10, headers: { "X-Sleep-Ms": "10", "X-Used-Tokens": "0" } });
    assert.equal(tokens(r), 99_990, "the cancelled calls used nothing");
    assert.equal(items(r.h("ratelimit")).inflight.r, 1);
  });

  test("60 per minute with a burst of 10: the 11th at once is refused", async () => {
    // One after another (two at once would meet the in-flight limit), so on a
    // loaded machine the 11 can take over a second and a token (1 per s)
    // come back. The bucket holds: after the first admission 9 are left
    // whatever the pace (a full bucket cannot fill more), and the admissions
    // before the first refusal are 10 plus at most floor(seconds from the
    // first request sent to the refusal answered), each refill one token.
    const t0 = Date.now();
    const rs = [];
    for (let i = 0; i < 60 && !rs.some((r) => r.status === 429); i++) rs.push(await llm("k4", { n: 1, headers: { "X-Sleep-Ms": "0" } }));
    const refills = Math.floor((Date.now() - t0) / 1000);
    const admitted = rs.filter((r) => r.status === 200).length;
    assert.equal(items(rs[0].h("ratelimit")).rate.r, 9, "a burst of 10, one taken");
    assert.ok(admitted >= 10 && admitted <= 10 + refills, `${admitted} admitted with ${refills} s of refills: ${rs.map((r) => r.status).join()}`);
    const last = rs.at(-1);
    assertProblem(last, 429, "rate-limited");
    assert.equal(last.h("retry-after"), "1");
    assert.equal(items(last.h("ratelimit")).rate.r, 0);
  });
});

describe("two instances on one Redis are one service", () => {
  test("limits hold across both, and an instance started later sees the counts", async () => {
    const b = await new App(env).start();
    try {
      const rs = [];
      for (let i = 0; i < 6; i++) rs.push(await (i % 2 ? b : app).req("GET", "/seed002/api/custom", { ip: "192.0.2.77" }));
      assert.deepEqual(rs.map((r) => r.status), [200, 200, 200, 200, 200, 429]);
      const c = await new App(env).start();
      try {
        assert.equal((await c.req("GET", "/seed002/api/custom", { ip: "192.0.2.77" })).status, 429);
        assert.equal((await app.req("POST", "/seed000/sms", { json: { phone: "1077", n: 1 } })).status, 200);
        assert.equal((await b.req("POST", "/seed000/sms", { json: { phone: "1077", n: 2 } })).status, 200);
        assert.equal((await c.req("POST", "/seed000/sms", { json: { phone: "1077", n: 3 } })).status, 429);
      } finally {
        await c.stop();
      }
    } finally {
      await b.stop();
    }
  });
});

test("one decision is one command of the backend (INFO commandstats: FCALL on the library)", async () => {
  const c = redis.client();
  try {
    await c.config("RESETSTAT");
    assert.equal((await app.req("GET", "/seed002/api/custom", { ip: "198.51.100.77" })).status, 200);
    const stats = await c.info("commandstats");
    const sum = (re) => [...stats.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
    const rl = sum(/^cmdstat_rl\.[a-z]+:calls=(\d+)/gm);
    const fcalls = sum(/^cmdstat_fcall(?:_ro)?:calls=(\d+)/gm);
    assert.deepEqual([fcalls, rl], BACKEND === "functions" ? [1, 0] : [0, 1], stats);
  } finally {
    c.disconnect();
  }
});
