// One benchmark app: the same express endpoint guarded by this package
// (`package`) or by express-rate-limit with rate-limit-redis (`erl`), on
// one ioredis connection. Usage: node app.mjs <package|erl> <redisPort> <httpPort>
import express from "express";
import Redis from "ioredis";
import { rateLimit as erlRateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { Policy, RateLimiter } from "redis-ratelimit";
import { rateLimit, keys } from "redis-ratelimit/express";

const [kind, redisPort, httpPort] = process.argv.slice(2);
const redis = new Redis({ host: "127.0.0.1", port: Number(redisPort) });
const app = express();
app.set("trust proxy", "loopback");

// A limit no run reaches: both guards decide and count every request.
const LIMIT = 1_000_000_000;
if (kind === "package") {
  const policy = new Policy("bench", { prefix: "pkg:" }).slidingWindow("minute", LIMIT, 60_000);
  app.get("/api", rateLimit({ limiter: new RateLimiter(redis), policy, key: keys.ip(), legacyHeaders: true }), (_req, res) => res.json({ ok: true }));
} else {
  const store = new RedisStore({ prefix: "erl:", sendCommand: (command, ...args) => redis.call(command, ...args) });
  app.get("/api", erlRateLimit({ windowMs: 60_000, limit: LIMIT, standardHeaders: "draft-8", legacyHeaders: true, store }), (_req, res) => res.json({ ok: true }));
}
app.listen(Number(httpPort), "127.0.0.1", () => console.log("ready"));
