// Every RL command through the package against the raw reply, on ioredis
// and node-redis, standalone: the decision holds exactly the reply's
// values, frozen; error replies arrive as RateLimitError with the server's
// text; 50 concurrent callers on one key admit exactly the limit.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { RateLimitClient, RateLimitError, ModuleNotLoadedError } from "redis-ratelimit";

const require = createRequire(import.meta.url);
const { Server } = require("./support/servers.cjs");
const { cases, toInts } = require("./support/cases.cjs");
const { makers } = require("./support/clients.cjs");

let server;
let bare;
let admin;
before(async () => {
  server = await new Server().start();
  bare = await new Server({ module: false }).start();
  admin = server.client();
});
after(async () => {
  admin?.disconnect();
  await server?.stop();
  await bare?.stop();
});

for (const [clientName, make] of Object.entries(makers)) {
  describe(`${clientName} standalone`, () => {
    let redis;
    let rl;
    before(async () => {
      redis = await make.standalone(server.port);
      rl = new RateLimitClient(redis);
    });
    after(async () => make.close(redis));

    for (const c of cases((n) => `{${clientName}:${n}}`)) {
      test(`${c.name}: the decision is the raw reply`, async () => {
        if (c.setup) {
          await admin.call(...c.setup(c.keyA).map(String));
          await admin.call(...c.setup(c.keyB).map(String));
        }
        for (let i = 0; i < c.repeat; i++) {
          const d = await c.pkg(rl, c.keyA);
          const raw = toInts(await admin.call(...c.raw(c.keyB).map(String)));
          assert.ok(Object.isFrozen(d), "decisions are frozen");
          assert.deepEqual(c.fields(d), c.rawFields ? c.rawFields(raw) : raw, `call ${i + 1}`);
        }
      });
    }

    test("RL.ALL with DETAILS parses when the module has it", async (t) => {
      const clauses = [
        { kind: "check", key: `{${clientName}:det}:c`, rules: [{ count: 2, window: 10000 }, { count: 5, window: 60000 }] },
        { kind: "lease", key: `{${clientName}:det}:l`, limit: 2, ttl: 60000, token: "x" },
      ];
      let d;
      try {
        d = await rl.all(clauses, { details: true });
      } catch (e) {
        if (e instanceof RateLimitError && /DETAILS/i.test(e.message)) return t.skip("the loaded module has no DETAILS yet");
        throw e;
      }
      assert.equal(d.details.length, 2);
      assert.deepEqual(
        d.details[0].map((r) => [r.rule, r.limit, r.remaining]),
        [[1, 2, 1], [2, 5, 4]],
      );
      assert.deepEqual([d.details[1][0].limit, d.details[1][0].remaining], [2, 1]);
      assert.ok(Object.isFrozen(d.details) && Object.isFrozen(d.details[0]) && Object.isFrozen(d.details[0][0]));
    });

    test("an error reply is a RateLimitError with the server's text", async () => {
      await admin.set(`{${clientName}}:string`, "x");
      await assert.rejects(rl.check(`{${clientName}}:string`, { count: 1, window: 1000 }), (e) => {
        assert.ok(e instanceof RateLimitError);
        assert.equal(e.message, "WRONGTYPE Operation against a key holding the wrong kind of value");
        return true;
      });
    });

    test("assertModuleLoaded passes with the module and fails with one clear error without it", async () => {
      await rl.assertModuleLoaded();
      const other = await make.standalone(bare.port);
      try {
        await assert.rejects(new RateLimitClient(other).assertModuleLoaded(), (e) => {
          assert.ok(e instanceof ModuleNotLoadedError);
          assert.match(e.message, /module is not loaded/);
          return true;
        });
      } finally {
        await make.close(other);
      }
    });

    test("50 concurrent callers on one key admit exactly the limit", async () => {
      const key = `{${clientName}}:concurrent`;
      const results = await Promise.all(Array.from({ length: 50 }, () => rl.check(key, { count: 17, window: 60000 })));
      assert.equal(results.filter((d) => !d.limited).length, 17);
      assert.equal(Number(await admin.zcard(key)), 17);
      const leases = await Promise.all(Array.from({ length: 50 }, (_, i) => rl.lease(`{${clientName}}:lease50`, { limit: 7, ttl: 60000, token: `r${i}` })));
      assert.equal(leases.filter((d) => !d.limited).length, 7);
    });
  });
}

test("a test server leaves no directory behind, and starts again on its port after a stop", async () => {
  const fs = require("node:fs");
  const s = await new Server().start();
  const dir = s.dir;
  assert.ok(fs.existsSync(dir));
  await s.stop();
  assert.equal(fs.existsSync(dir), false, `${dir} left in the temporary directory`);
  await s.start(); // the outage tests restart a server on its port
  const c = s.client();
  assert.equal(await c.ping(), "PONG");
  c.disconnect();
  await s.stop();
  assert.equal(fs.existsSync(dir), false);
});
