// The app against a three-primary Redis Cluster (REDIS_CLUSTER): the same
// answers, and no MOVED redirect on any primary.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { App, Cluster, items } from "./harness.js";

let cluster;
let app;
before(async () => {
  cluster = await new Cluster(3).start();
  app = await new App({ REDIS_CLUSTER: cluster.seeds.map((s) => `${s.host}:${s.port}`).join(","), RL_PREFIX: "cl:", RL_TIMEOUT_MS: "3000" }).start();
});
after(async () => {
  await app?.stop();
  await cluster?.stop();
});

test("every endpoint on three primaries: the contract's answers, zero MOVED", async () => {
  await cluster.resetStats();
  for (let p = 0; p < 8; p++) {
    const phone = `77${p}`;
    assert.equal((await app.req("POST", "/seed000/sms", { json: { phone, n: 1 } })).status, 200);
    assert.equal((await app.req("POST", "/seed000/sms", { json: { phone, n: 1 } })).body.type.endsWith("/duplicate"), true);
    assert.equal((await app.req("POST", "/seed000/sms", { json: { phone, n: 2 } })).status, 200);
    assert.equal((await app.req("POST", "/seed000/sms", { json: { phone, n: 3 } })).status, 429);
    const ip = `192.0.2.${p + 1}`;
    for (let i = 0; i < 5; i++) assert.equal((await app.req("GET", "/seed002/api/custom", { ip })).status, 200);
    assert.equal((await app.req("GET", "/seed002/api/custom", { ip })).status, 429);
    assert.equal((await app.req("GET", "/seed002/api/default", { ip })).status, 200);
    assert.equal((await app.req("GET", `/seed002/api/user/u${p}`)).status, 200);
    assert.equal((await app.req("POST", "/seed001/ocr", { headers: { "X-User": `user${p}` } })).status, 200);
    for (let i = 0; i < 5; i++) await app.req("POST", "/seed004/login", { ip });
    assert.equal((await app.req("POST", "/seed004/login", { ip })).body.type.endsWith("/locked"), true);
  }
  assert.equal((await app.req("PUT", "/admin/limits/ocr", { json: { day: 20, hour: 5 } })).status, 204);
  const llm = (key, extra = {}) => app.req("POST", "/llm/complete", { json: { max_tokens: 100 }, headers: { "X-Api-Key": key, "X-Zone": "UTC", "X-Sleep-Ms": "300", ...extra } });
  const rs = await Promise.all([llm("a"), llm("a"), llm("a")]);
  assert.deepEqual(rs.map((r) => r.status).sort(), [200, 200, 429]);
  const after1 = await llm("a", { "X-Sleep-Ms": "0", "X-Used-Tokens": "0" });
  assert.equal(items(after1.h("ratelimit")).inflight.r, 1, "leases released");
  assert.equal(items(after1.h("ratelimit")).tokens.r, 100_000 - 50 - 50 - 100, "settled");
  assert.equal(await cluster.infoField("errorstats", "errorstat_MOVED"), 0);
});
