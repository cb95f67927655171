// `make example-fastify`: serves the seed services on 127.0.0.1:PORT with
// Fastify. Environment as examples/node: PORT, REDIS_URL
// (redis://127.0.0.1:6379) or REDIS_CLUSTER (host:port,... seeds; wins over
// REDIS_URL), RL_PREFIX, RL_TIMEOUT_MS (the decision budget, default 500)
// and RL_BACKEND (module, the default; functions; auto).
import Redis from "ioredis";
import { RateLimitClient, RateLimiter } from "redis-ratelimit";
import { createApp } from "./app.js";

// Reconnect at most every 500 ms: no storm against a Redis that is down, and
// back within the 2 s SERVICES.md allows once it answers.
const retryStrategy = (times) => Math.min(times * 50, 500);

// REDIS_CLUSTER's host:port,host:port,...: a typo is one line and a non-zero
// exit at start (as RL_BACKEND's), not a 10 s wait for a Redis at port NaN.
function clusterSeeds(value, app) {
  return value.split(",").map((s) => {
    const i = s.trim().lastIndexOf(":");
    const host = s.trim().slice(0, Math.max(i, 0));
    const port = s.trim().slice(i + 1);
    if (i <= 0 || !/^[0-9]{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
      console.error(`${app}: REDIS_CLUSTER: expected host:port,host:port,... but one seed is '${s}'`);
      process.exit(1);
    }
    return { host, port: Number(port) };
  });
}

function connect() {
  const cluster = process.env.REDIS_CLUSTER;
  if (cluster) {
    return new Redis.Cluster(clusterSeeds(cluster, "example-fastify"), { clusterRetryStrategy: retryStrategy, redisOptions: { retryStrategy } });
  }
  return new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { retryStrategy });
}

const redis = connect();
redis.on("error", () => {}); // reconnects are ioredis's; decisions fail open/closed per policy meanwhile

let client;
try {
  client = new RateLimitClient(redis, { backend: process.env.RL_BACKEND || "module" });
} catch (e) {
  console.error(`example-fastify: RL_BACKEND: ${e.message}`); // one line, as the module missing (SERVICES.md)
  process.exit(1);
}
try {
  await Promise.race([
    client.ensureBackend(),
    new Promise((_, reject) => setTimeout(() => reject(new Error("Redis did not answer within 10 s")), 10_000).unref()),
  ]);
} catch (e) {
  console.error(`example-fastify: ${e.message}`);
  process.exit(1);
}

const limiter = new RateLimiter(client, { timeout: Number(process.env.RL_TIMEOUT_MS ?? 500) });
const app = await createApp({ redis, prefix: process.env.RL_PREFIX ?? "", limiter });
const port = Number(process.env.PORT ?? 8080);
await app.listen({ port, host: "127.0.0.1" });
console.log(`example-fastify: listening on http://127.0.0.1:${port}`);
