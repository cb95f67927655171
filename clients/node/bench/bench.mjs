// `make bench-node`: interleaved, ratios printed (not a timed test).
//
// 1. A decision of a policy of three limits (sliding window, token bucket,
//    calendar quota) through the package against the bare RL.ALL with the
//    same arguments through the same ioredis client: time per decision,
//    one caller and 32 concurrent, and the RL.ALL calls Redis counted (the
//    package adds no round trip).
// 2. The same express endpoint guarded by the package and by
//    express-rate-limit + rate-limit-redis, each app its own process,
//    driven at a fixed concurrency: requests per second and p99 latency.
import { spawn } from "node:child_process";
import http from "node:http";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import Redis from "ioredis";
import { Policy, RateLimiter } from "redis-ratelimit";

const require = createRequire(import.meta.url);
const { Server, freePort, waitUntil } = require("../test/support/servers.cjs");

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const BLOCK = Number(process.env.BENCH_BLOCK ?? 2000);
const HTTP_SECONDS = Number(process.env.BENCH_HTTP_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x, d = 1) => x.toFixed(d);

async function rlAllCalls(redis) {
  const m = /^cmdstat_rl\.all:calls=(\d+)/m.exec(await redis.info("commandstats"));
  return m ? Number(m[1]) : 0;
}

async function decisionOverhead(server) {
  const redis = new Redis({ host: "127.0.0.1", port: server.port });
  const limiter = new RateLimiter(redis);
  await limiter.client.assertModuleLoaded();
  const policy = new Policy("bench", { prefix: "pkg:" })
    .slidingWindow("minute", 1e12, 60_000)
    .tokenBucket("rate", 1e6, 1000, 1e6)
    .quota("day", "UTC", "day", 1e15);
  // The bare call: exactly what the package sends, on other keys.
  const bare = ["RL.ALL", "3", "bare:bench:{user}:minute", "bare:bench:{user}:rate", "bare:bench:{user}:day", "*", "CHECK", "1", "1000000000000", "60000", "THROTTLE", "2", "1000000", "1000000", "1000", "QUOTA", "3", "UTC", "DAY", "1000000000000000", "DETAILS"];
  const sent = [];
  const spy = limiter.client.transport.send;
  limiter.client.transport.send = (c) => (sent.push(c.args.join(" ")), spy(c));
  await limiter.decide(policy, "user");
  limiter.client.transport.send = spy;
  if (sent[0].replaceAll("pkg:", "bare:") !== bare.join(" ")) throw new Error(`the bare call differs from the package's: ${sent[0]}`);

  const block = async (fn, parallel) => {
    const each = Math.ceil(BLOCK / parallel);
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        for (let i = 0; i < each; i++) await fn();
      }),
    );
    const wall = Number(process.hrtime.bigint() - t0) / 1000 / (each * parallel); // µs per decision
    const cpu = process.cpuUsage(cpu0);
    cpuPer = (cpu.user + cpu.system) / (each * parallel); // client CPU µs per decision (this process)
    return wall;
  };
  let cpuPer = 0;
  const pkg = () => limiter.decide(policy, "user");
  const raw = () => redis.call(...bare);
  for (const parallel of [1, 32]) {
    await block(pkg, parallel); // warm-up
    await block(raw, parallel);
    const ratios = [];
    const pkgTimes = [];
    const rawTimes = [];
    const pkgCpu = [];
    const rawCpu = [];
    const calls0 = await rlAllCalls(redis);
    for (let r = 0; r < ROUNDS; r++) {
      // Interleaved, and the order alternates per round.
      let a, b;
      if (r % 2) {
        b = await block(raw, parallel);
        rawCpu.push(cpuPer);
        a = await block(pkg, parallel);
        pkgCpu.push(cpuPer);
      } else {
        a = await block(pkg, parallel);
        pkgCpu.push(cpuPer);
        b = await block(raw, parallel);
        rawCpu.push(cpuPer);
      }
      pkgTimes.push(a);
      rawTimes.push(b);
      ratios.push(a / b);
    }
    const calls = (await rlAllCalls(redis)) - calls0;
    console.log(
      `decision, ${parallel === 1 ? "one caller" : `${parallel} concurrent`}: package ${fmt(median(pkgTimes))} µs, bare RL.ALL ${fmt(median(rawTimes))} µs per decision; ` +
        `package/bare = ${fmt(median(ratios), 3)} (median of ${ROUNDS} interleaved rounds of ${BLOCK}); client CPU ${fmt(median(pkgCpu))} vs ${fmt(median(rawCpu))} µs per decision; RL.ALL calls counted ${calls} for ${2 * ROUNDS * Math.ceil(BLOCK / parallel) * parallel} decisions`,
    );
  }
  limiter.close();
  redis.disconnect();
}

async function startApp(kind, redisPort) {
  const port = await freePort();
  const proc = spawn(process.execPath, [fileURLToPath(new URL("./app.mjs", import.meta.url)), kind, String(redisPort), String(port)], { stdio: ["ignore", "pipe", "inherit"] });
  await waitUntil(`${kind} app`, () => new Promise((resolve) => http.get(`http://127.0.0.1:${port}/api`, (res) => (res.resume(), resolve(res.statusCode === 200))).on("error", () => resolve(false))));
  return { kind, port, proc };
}

/** CONCURRENCY keep-alive clients for HTTP_SECONDS: requests/s and p99 latency (ms). */
async function load(port) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const latencies = [];
  let errors = 0;
  const end = performance.now() + HTTP_SECONDS * 1000;
  const one = () =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const req = http.get({ host: "127.0.0.1", port, path: "/api", agent, headers: { "X-Forwarded-For": "198.51.100.1" } }, (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode !== 200) errors++;
          latencies.push(performance.now() - t0);
          resolve();
        });
      });
      req.on("error", () => (errors++, resolve()));
    });
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) await one();
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  if (errors) throw new Error(`${errors} failed requests`);
  return { rps: latencies.length / seconds, p99: latencies[Math.floor(latencies.length * 0.99)] };
}

async function httpComparison(server) {
  const apps = [await startApp("package", server.port), await startApp("erl", server.port)];
  try {
    for (const a of apps) await load(a.port); // warm-up
    const res = { package: [], erl: [] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const a of r % 2 ? [...apps].reverse() : apps) res[a.kind].push(await load(a.port));
    }
    const rpsRatios = res.package.map((p, i) => p.rps / res.erl[i].rps);
    const p99Ratios = res.package.map((p, i) => p.p99 / res.erl[i].p99);
    const m = (k, f) => median(res[k].map(f));
    console.log(
      `HTTP GET /api at concurrency ${CONCURRENCY}: redis-ratelimit ${fmt(m("package", (x) => x.rps), 0)} req/s, p99 ${fmt(m("package", (x) => x.p99), 2)} ms; ` +
        `express-rate-limit + rate-limit-redis ${fmt(m("erl", (x) => x.rps), 0)} req/s, p99 ${fmt(m("erl", (x) => x.p99), 2)} ms; ` +
        `ratios package/erl: rps ${fmt(median(rpsRatios), 3)}, p99 ${fmt(median(p99Ratios), 3)} (median of ${ROUNDS} interleaved rounds of ${HTTP_SECONDS} s)`,
    );
  } finally {
    for (const a of apps) a.proc.kill("SIGTERM");
  }
}

const server = await new Server().start();
try {
  console.log(`bench-node: Node ${process.version}, one redis-server (${process.env.REDIS_SERVER ?? "redis-server"}) with the module, ioredis`);
  await decisionOverhead(server);
  await httpComparison(server);
} finally {
  await server.stop();
}
