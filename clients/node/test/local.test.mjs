// The local backend (redis-ratelimit/local), with no Redis: the README's
// example as written, and what the sequence cases cannot drive against the
// real module (a lockout lifting by the clock). The golden sequences
// (sequences.test.mjs) show it decides as the module does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Policy } from "redis-ratelimit";
import { LocalBackend, ManualClock } from "redis-ratelimit/local";

test("the README's endpoint test runs as written, without Redis", async () => {
  const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes("new LocalBackend()"));
  assert.ok(block, "the README has the local backend example");
  const code = block.replace('console.log(statuses.join(" ")); // 200 200 200 429 200', "export { statuses };");
  assert.notEqual(code, block);
  const file = fileURLToPath(new URL("./readme-local.tmp.mjs", import.meta.url));
  writeFileSync(file, code);
  let mod;
  try {
    mod = await import(file);
  } finally {
    rmSync(file);
  }
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
