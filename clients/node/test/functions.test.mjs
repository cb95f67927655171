// Backend "functions" and "auto" on servers without the module, through
// ioredis and node-redis: the library loaded when absent or older, on every
// Cluster primary, again after `Function not found`; a user without
// FUNCTION LOAD told the command to run by hand; OOM answered as the module
// answers it; auto switching when the module goes missing; health().
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { RateLimitClient, RateLimiter, RateLimitError, RateLimitUnavailableError, LibraryNotLoadedError, Policy, LIBRARY_PATH } from "redis-ratelimit";

const require = createRequire(import.meta.url);
const { Server, Cluster } = require("./support/servers.cjs");
const { makers } = require("./support/clients.cjs");
const { library, versionOf } = require("../dist/backend.js");

const policy = new Policy("fn").slidingWindow("w", 2, 60_000).tokenBucket("b", 10, 60_000, 5).quota("q", "Asia/Shanghai", "day", 100);
const want = () => versionOf(library());
const setVersion = (src, v) => src.replace(/^(local\s+(?:RL_)?VERSION\s*=\s*)\d+/m, `$1${v}`);
const fcalls = async (admin) => Number(/cmdstat_fcall:calls=(\d+)/.exec(await admin.info("commandstats"))?.[1] ?? 0);

test("the package carries the repository's library byte for byte", () => {
  assert.deepEqual(readFileSync(LIBRARY_PATH), readFileSync(new URL("../../../functions/ratelimit.lua", import.meta.url)));
});

describe("a server without the module", () => {
  let bare, admin;
  before(async () => {
    bare = await new Server({ module: false }).start();
    admin = bare.client();
  });
  after(async () => {
    admin?.disconnect();
    await bare?.stop();
  });

  for (const [name, make] of Object.entries(makers)) {
    test(`${name}: loads the library, decides with one FCALL, reloads an older one, again after Function not found`, async () => {
      await admin.function("FLUSH");
      const c = await make.standalone(bare.port);
      try {
        const rl = new RateLimiter(c, { backend: "functions" });
        await rl.client.ensureBackend();
        assert.equal(Number(await admin.call("FCALL", "rl_version", "0")), want());
        const before = await fcalls(admin);
        const got = [];
        for (let i = 0; i < 3; i++) got.push((await rl.decide(policy, `${name}-u`)).limited);
        assert.deepEqual(got, [false, false, true]);
        assert.equal((await fcalls(admin)) - before, 3);
        assert.deepEqual(await rl.health(), { status: "UP", backend: "functions" });

        await admin.function("LOAD", "REPLACE", setVersion(library(), 1));
        await new RateLimitClient(c, { backend: "functions" }).ensureBackend();
        assert.equal(Number(await admin.call("FCALL", "rl_version", "0")), want());

        await admin.function("FLUSH");
        const h = await rl.health();
        assert.equal(h.status, "DOWN");
        assert.match(h.detail, /Functions library is not loaded/);
        assert.equal((await rl.client.check(`${name}-fnf`, { count: 5, window: 60_000 })).remaining, 4);
        await admin.function("FLUSH");
        const [r] = await rl.client.batch([{ key: `${name}-fnf2`, readOnly: false, args: ["RL.CHECK", `${name}-fnf2`, "*", "5", "60000"] }]);
        assert.equal(r[3], 4);
      } finally {
        await make.close(c);
      }
    });
  }

  test("a user without FUNCTION LOAD is told the command, then uses a library loaded that way", async () => {
    await admin.function("FLUSH");
    await admin.acl("SETUSER", "app", "on", ">pw", "~*", "+@all", "-function|load");
    const c = await makers.ioredis.standalone(bare.port);
    await c.auth("app", "pw");
    try {
      const err = await new RateLimitClient(c, { backend: "functions" }).ensureBackend().then(() => null, (e) => e);
      assert.ok(err instanceof LibraryNotLoadedError, String(err));
      assert.match(err.message, /redis-cli .*-x FUNCTION LOAD REPLACE < \S+ratelimit\.lua/);
      await admin.function("LOAD", "REPLACE", readFileSync(LIBRARY_PATH, "utf8")); // the operator, once
      const rl = new RateLimiter(new RateLimitClient(c, { backend: "functions" }));
      await rl.client.ensureBackend();
      assert.equal((await rl.decide(policy, "acl")).limited, false);
    } finally {
      c.disconnect();
      await admin.acl("DELUSER", "app");
    }
  });

  // CLIENTS.md §3 ("module missing at run time"), as Python: the library gone
  // (a flush, a failover to a node that never had it) and this user unable to
  // load it is no engine to decide with: the Redis-down mode, not an error
  // (an adapter's 500), health() DOWN naming it; back once an operator loads it.
  test("the library gone at run time and a user without FUNCTION LOAD: the Redis-down mode decides, not an error", async () => {
    await admin.function("LOAD", "REPLACE", readFileSync(LIBRARY_PATH, "utf8"));
    await admin.acl("SETUSER", "app2", "on", ">pw", "~*", "+@all", "-function|load");
    const c = await makers.ioredis.standalone(bare.port);
    await c.auth("app2", "pw");
    const logged = [];
    const error = console.error;
    console.error = (m) => logged.push(String(m));
    const rl = new RateLimiter(new RateLimitClient(c, { backend: "functions" }), { timeout: 300 });
    try {
      assert.equal((await rl.decide(policy, "gone")).limited, false);
      await admin.function("FLUSH");
      await assert.rejects(rl.decide(policy, "gone"), RateLimitUnavailableError);
      const h = await rl.health();
      assert.equal(h.status, "DOWN");
      assert.match(h.detail, /Functions library/);
      assert.ok(logged.some((m) => /FUNCTION LOAD/.test(m)), logged.join("\n"));
      await admin.function("LOAD", "REPLACE", readFileSync(LIBRARY_PATH, "utf8")); // the operator
      assert.equal((await rl.decide(policy, "gone")).limited, false);
      assert.deepEqual(await rl.health(), { status: "UP", backend: "functions" });
    } finally {
      console.error = error;
      rl.close();
      c.disconnect();
      await admin.acl("DELUSER", "app2");
    }
  });

  test("above maxmemory: the module's OOM error, refunds still run", async () => {
    const c = await makers["node-redis"].standalone(bare.port);
    const rl = new RateLimitClient(c, { backend: "functions" });
    try {
      await rl.ensureBackend();
      assert.equal((await rl.check("oom", { count: 5, window: 60_000 })).remaining, 4);
      await admin.config("SET", "maxmemory", "1");
      await assert.rejects(rl.check("oom", { count: 5, window: 60_000 }), (e) => e instanceof RateLimitError && e.message === "OOM command not allowed when used memory > 'maxmemory'.");
      assert.equal((await rl.check("oom", { count: 5, window: 60_000 }, { refund: true })).remaining, 5);
    } finally {
      await admin.config("SET", "maxmemory", "0");
      await c.close();
    }
  });

  test("auto and functions check the server on the first call by themselves, once: no ensureBackend needed", async () => {
    await admin.function("FLUSH");
    const c = await makers.ioredis.standalone(bare.port);
    await c.ping(); // the connection's own set-up calls (CLIENT SETINFO: an error on 7.0) are done
    await admin.config("RESETSTAT");
    try {
      const auto = new RateLimitClient(c, { backend: "auto" });
      const first = await Promise.all([1, 2, 3].map(() => auto.check("first-use", { count: 5, window: 60_000 })));
      assert.deepEqual(first.map((d) => d.remaining).sort(), [2, 3, 4]);
      assert.equal(auto.backend, "functions");
      for (let i = 0; i < 5; i++) await auto.check("first-use", { count: 50, window: 60_000 });
      const stats = await admin.info("commandstats");
      const calls = (cmd) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
      // one check for three concurrent first calls, none after: one COMMAND INFO,
      // one load; every decision one FCALL, no RL command sent to fail first
      assert.equal(calls("command\\|info"), 1);
      assert.equal(calls("function\\|load"), 1);
      assert.equal(calls("fcall"), 8 + 1); // + rl_version before the load
      // the one error reply: rl_version before the load (no RL command refused first)
      assert.match(await admin.info("errorstats"), /errorstat_ERR:count=1\r/);
      // functions: an older library is replaced at the first call, not only by ensureBackend
      await admin.function("LOAD", "REPLACE", setVersion(library(), want() - 1));
      const fn = new RateLimitClient(c, { backend: "functions" });
      assert.equal((await fn.check("first-use-2", { count: 5, window: 60_000 })).remaining, 4);
      assert.equal(Number(await admin.fcall("rl_version", 0)), want());
    } finally {
      c.disconnect();
    }
  });

  test("auto takes the library here", async () => {
    const c = await makers.ioredis.standalone(bare.port);
    try {
      const rl = new RateLimitClient(c, { backend: "auto" });
      await rl.ensureBackend();
      assert.equal(rl.backend, "functions");
    } finally {
      c.disconnect();
    }
  });
});

test("auto switches to the library when the module goes missing at run time", async () => {
  const s = await new Server({ args: ["--enable-module-command", "yes"] }).start();
  const c = await makers.ioredis.standalone(s.port);
  try {
    const rl = new RateLimitClient(c, { backend: "auto" });
    await rl.ensureBackend();
    assert.equal(rl.backend, "module");
    assert.equal((await rl.check("sw", { count: 5, window: 60_000 })).remaining, 4);
    await c.call("MODULE", "UNLOAD", "ratelimit"); // as a failover to a server without it
    assert.equal((await rl.check("sw", { count: 5, window: 60_000 })).remaining, 3); // the same counts
    assert.equal(rl.backend, "functions");
    assert.deepEqual(await rl.health(), { status: "UP", backend: "functions" });
  } finally {
    c.disconnect();
    await s.stop();
  }
});

describe("a Cluster without the module", () => {
  let cluster;
  before(async () => {
    cluster = await new Cluster(3, { module: false }).start();
  });
  after(async () => cluster?.stop());

  for (const [name, make] of Object.entries(makers)) {
    test(`${name}: every primary gets the library, and again after a flush; no MOVED`, async () => {
      const c = await make.cluster(cluster.seeds);
      try {
        const rl = new RateLimiter(c, { backend: "functions" });
        await rl.client.ensureBackend();
        for (const node of cluster.nodes) {
          const a = node.client();
          assert.equal(Number(await a.call("FCALL", "rl_version", "0")), want());
          await a.function("FLUSH");
          a.disconnect();
        }
        await cluster.resetStats();
        for (let i = 0; i < 30; i++) assert.equal((await rl.decide(policy, `${name}${i}`)).limited, false);
        for (const node of cluster.nodes) {
          const a = node.client();
          assert.equal(Number(await a.call("FCALL", "rl_version", "0")), want());
          a.disconnect();
        }
        assert.equal(await cluster.infoField("errorstats", "errorstat_MOVED"), 0);
        assert.deepEqual(await rl.health(), { status: "UP", backend: "functions" });
      } finally {
        await make.close(c);
      }
    });
  }
});
