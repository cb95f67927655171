// The shipped types, as users compile against them: an ES-module and a
// CommonJS TypeScript consumer type-check against dist/*.d.ts (tsc,
// module nodenext, strict), and the ES one — with `await using` on a
// permit, which TypeScript lowers to Symbol.asyncDispose — runs against a
// real server: the permit's lease is released and its estimate settled.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { rmSync } from "node:fs";

const require = createRequire(import.meta.url);
const { Server } = require("./support/servers.cjs");
const root = fileURLToPath(new URL("..", import.meta.url));
const out = new URL("../.types-out/", import.meta.url);

let server;
before(async () => {
  server = await new Server().start();
});
after(async () => {
  await server?.stop();
  rmSync(out, { recursive: true, force: true });
});

test("ESM and CommonJS consumers type-check, and `await using` closes a permit", async () => {
  execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", "test/types/tsconfig.json"], { cwd: root, stdio: "pipe" });
  const { run } = await import(new URL("esm-consumer.mjs", out));
  assert.deepEqual(JSON.parse(await run(server.port)), { limited: false, limits: 2, left: 97, inflight: 1 });
  const cjs = require(fileURLToPath(new URL("cjs-consumer.cjs", out)));
  assert.equal(cjs.policy.name, "cjs");
  assert.equal(typeof cjs.mw, "function");
});
