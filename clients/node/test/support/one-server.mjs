// The set-up most test files share: one redis-server with the module
// (servers.cjs), an ioredis client on it and a RateLimiter over that client
// (3 s timeout), started before the file's tests and closed after them.
// Importing this module registers those hooks for the importing file (node
// --test runs each file in its own process); the bindings are set once the
// before hook has run, so use them inside tests only.
import { before, after } from "node:test";
import { createRequire } from "node:module";
import { RateLimiter } from "redis-ratelimit";

const require = createRequire(import.meta.url);
const Redis = require("ioredis");
const { Server } = require("./servers.cjs");

export let server;
export let redis;
export let limiter;

before(async () => {
  server = await new Server().start();
  redis = new Redis({ host: "127.0.0.1", port: server.port });
  limiter = new RateLimiter(redis, { timeout: 3000 });
});
after(async () => {
  limiter?.close();
  redis?.disconnect();
  await server?.stop();
});
