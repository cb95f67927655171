// Starts example-node processes (node server.js) against real redis-server
// processes, and speaks HTTP to them with fetch. The servers come from the
// package's test support (clients/node/test/support/servers.cjs).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const support = require("../../../clients/node/test/support/servers.cjs");
export const { freePort, sleep, waitUntil } = support;

// RL_BACKEND=functions runs every test on servers without the module, the app
// deciding with the Functions library (SERVICES.md "On a Redis without the
// module"); the app inherits the variable.
export const BACKEND = process.env.RL_BACKEND || "module";
const withModule = BACKEND !== "functions";
export class Server extends support.Server {
  constructor(options = {}) {
    super({ module: withModule, ...options });
  }
}
export class Cluster extends support.Cluster {
  constructor(n = 3, options = {}) {
    super(n, { module: withModule, ...options });
  }
}

// The app under test: this directory's express app, or another example app
// that serves the same contract (EXAMPLE_SERVER=../fastify/server.js: the
// Fastify one; `npm test` in examples/fastify runs these tests against it).
const SERVER_JS = fileURLToPath(new URL(process.env.EXAMPLE_SERVER ?? "server.js", new URL("../", import.meta.url)));

export class App {
  constructor(env) {
    this.env = env;
  }

  async start() {
    this.port = await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    this.output = "";
    this.proc = spawn(process.execPath, [SERVER_JS], { env: { ...process.env, ...this.env, PORT: String(this.port) }, stdio: ["ignore", "pipe", "pipe"] });
    this.proc.stdout.on("data", (b) => (this.output += b));
    this.proc.stderr.on("data", (b) => (this.output += b));
    const proc = this.proc;
    await waitUntil(`example-node on :${this.port}`, async () => {
      if (proc.exitCode !== null) throw new Error(`exited ${proc.exitCode}: ${this.output}`);
      return (await fetch(`${this.url}/health`)).status === 200;
    });
    return this;
  }

  /** Runs the app expecting it to refuse to start: its exit code and output, at once (no /health polling). */
  async refused(ms = 10_000) {
    this.port = await freePort();
    this.output = "";
    const proc = spawn(process.execPath, [SERVER_JS], { env: { ...process.env, ...this.env, PORT: String(this.port) }, stdio: ["ignore", "pipe", "pipe"] });
    proc.stdout.on("data", (b) => (this.output += b));
    proc.stderr.on("data", (b) => (this.output += b));
    const timer = setTimeout(() => proc.kill("SIGKILL"), ms);
    const [code] = await new Promise((r) => proc.once("exit", (...a) => r(a)));
    clearTimeout(timer);
    return code;
  }

  async stop() {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    await exited;
  }

  /** fetch with a client IP (X-Forwarded-For, the app trusts loopback proxies) and JSON bodies. */
  async req(method, path, { ip = "203.0.113.1", headers = {}, json, body, signal } = {}) {
    const h = { "X-Forwarded-For": ip, ...headers };
    if (json !== undefined) {
      body = JSON.stringify(json);
      h["Content-Type"] = "application/json";
    }
    const res = await fetch(this.url + path, { method, headers: h, body, signal });
    const text = await res.text();
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, headers: res.headers, body: parsed, h: (n) => res.headers.get(n) };
  }

  /**
   * The slowest of n GET /health at once (no Redis call), in ms: what this
   * machine adds to any answer right now. SERVICES.md's "within 1,000 ms"
   * checks allow 1,000 ms plus this, so a loaded 2-core machine (where
   * scheduling alone can take 100s of ms) does not fail a correct app, and
   * an app that waits on Redis past its budget still fails.
   */
  async overhead(n = 1) {
    const ms = await Promise.all(Array.from({ length: n }, async () => {
      const t0 = performance.now();
      await this.req("GET", "/health");
      return performance.now() - t0;
    }));
    return Math.max(...ms);
  }
}

/** `"short";r=1;t=10, ...` → { short: { r: 1, t: 10 } } */
export function items(field) {
  const out = {};
  for (const item of (field ?? "").split(",").map((s) => s.trim()).filter(Boolean)) {
    const [name, ...params] = item.split(";");
    out[JSON.parse(name)] = Object.fromEntries(params.map((p) => p.split("=")).map(([k, v]) => [k, Number(v)]));
  }
  return out;
}

export const names = (field) => Object.keys(items(field));
