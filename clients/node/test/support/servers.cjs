// Real redis-server processes on free loopback ports, with the module
// loaded (RL_MODULE), for the tests; each test file stops what it started.
// REDIS_SERVER picks the binary (default: redis-server on PATH, Debian's 7.0).
"use strict";
const { spawn, execFileSync } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");
const Redis = require("ioredis");

const MODULE = process.env.RL_MODULE;
const BINARY = process.env.REDIS_SERVER || "redis-server";
const CLI = process.env.REDIS_CLI || "redis-cli";

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(what, fn, timeoutMs = 15000, interval = 50) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      if (await fn()) return;
    } catch (e) {
      last = e;
    }
    await sleep(interval);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

class Server {
  /** `module: false`: a server without it (the Functions backend); `args`: more redis-server options. */
  constructor({ module = true, cluster = false, port, args = [] } = {}) {
    if (module && !MODULE) throw new Error("RL_MODULE must name libredis_ratelimit.so");
    this.module = module;
    this.extra = args;
    this.cluster = cluster;
    this.port = port;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "rl-node-"));
    this.proc = null;
  }

  async start() {
    if (!this.port) this.port = await freePort();
    fs.mkdirSync(this.dir, { recursive: true }); // again after a stop (a restart on the same port)
    const args = ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", this.dir];
    if (this.module) args.push("--loadmodule", MODULE);
    if (this.cluster) args.push("--cluster-enabled", "yes", "--cluster-config-file", `nodes-${this.port}.conf`);
    args.push(...this.extra);
    this.proc = spawn(BINARY, args, { stdio: ["ignore", "ignore", "inherit"] });
    const proc = this.proc;
    await waitUntil(`redis-server on :${this.port}`, async () => {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`);
      const c = this.client({ lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      c.on("error", () => {});
      try {
        await c.connect();
        return (await c.ping()) === "PONG";
      } finally {
        c.disconnect();
      }
    });
    return this;
  }

  /** An ioredis client for administration (INFO, CONFIG) of this node. */
  client(opts = {}) {
    return new Redis({ host: "127.0.0.1", port: this.port, ...opts });
  }

  async stop() {
    const proc = this.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGKILL");
      await exited;
    }
    this.proc = null;
    // Its directory goes with it: every run used to leave one in /tmp.
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** SIGKILL, keeping its directory (a Cluster node's nodes.conf), so `start()` brings the same node back. */
  async kill() {
    const proc = this.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGKILL");
      await exited;
    }
    this.proc = null;
  }

  /** Pauses (SIGSTOP: connections accepted, never answered) or resumes the process. */
  pause() {
    this.proc.kill("SIGSTOP");
  }
  resume() {
    this.proc.kill("SIGCONT");
  }
}

class Cluster {
  constructor(n = 3, { module = true } = {}) {
    this.nodes = Array.from({ length: n }, () => new Server({ cluster: true, module }));
  }

  async start() {
    await Promise.all(this.nodes.map((n) => n.start()));
    const addrs = this.nodes.map((n) => `127.0.0.1:${n.port}`);
    execFileSync(CLI, ["--cluster", "create", ...addrs, "--cluster-replicas", "0", "--cluster-yes"], { stdio: "ignore" });
    for (const node of this.nodes) {
      const c = node.client();
      try {
        await waitUntil(`cluster_state:ok on :${node.port}`, async () => {
          const info = await c.cluster("INFO");
          if (!/cluster_state:ok/.test(info)) return false;
          const nodes = (await c.cluster("NODES")).trim().split("\n");
          return nodes.length === this.nodes.length && nodes.every((l) => / connected/.test(l) && !/fail/.test(l));
        });
      } finally {
        c.disconnect();
      }
    }
    return this;
  }

  get seeds() {
    return this.nodes.map((n) => ({ host: "127.0.0.1", port: n.port }));
  }

  /** Sum over the primaries of a field of INFO (errorstats, commandstats, ...). */
  async infoField(section, field) {
    let total = 0;
    for (const node of this.nodes) {
      const c = node.client();
      try {
        const m = new RegExp(`^${field}:(?:count=)?(\\d+)`, "m").exec(await c.info(section));
        if (m) total += Number(m[1]);
      } finally {
        c.disconnect();
      }
    }
    return total;
  }

  async resetStats() {
    for (const node of this.nodes) {
      const c = node.client();
      try {
        await c.config("RESETSTAT");
      } finally {
        c.disconnect();
      }
    }
  }

  async stop() {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

/**
 * True when the loaded module answers RL.ALL's DETAILS option; this tree's
 * engine has it, so a module that does not fails the run (rather than
 * skipping every DETAILS check behind `if (DETAILS)`).
 */
async function supportsDetails(port) {
  const c = new Redis({ host: "127.0.0.1", port });
  try {
    const reply = await c.call("RL.ALLPEEK", "1", "rl-node-details-probe", "*", "CHECK", "1", "1", "1000", "DETAILS");
    if (!Array.isArray(reply) || reply.length <= 7) throw new Error(`RL.ALLPEEK ... DETAILS answered ${JSON.stringify(reply)}`);
    return true;
  } catch (e) {
    throw new Error(`the module at RL_MODULE answers no RL.ALL DETAILS: ${e.message}`);
  } finally {
    c.disconnect();
  }
}

module.exports = { Server, Cluster, freePort, sleep, waitUntil, supportsDetails, MODULE };
