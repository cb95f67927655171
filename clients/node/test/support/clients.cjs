// The four client shapes the package accepts, made the way their users make
// them: ioredis Redis and Cluster, node-redis client and cluster.
"use strict";
const Redis = require("ioredis");
const { createClient, createCluster } = require("@redis/client");

const makers = {
  ioredis: {
    standalone: async (port) => new Redis({ host: "127.0.0.1", port }),
    cluster: async (seeds) => {
      const c = new Redis.Cluster(seeds);
      await new Promise((resolve, reject) => {
        c.once("ready", resolve);
        c.once("error", reject);
      });
      return c;
    },
    close: async (c) => c.quit(),
  },
  "node-redis": {
    // A reconnect back-off of at most 500 ms (the package warns about node-redis's default of 2 s + jitter).
    standalone: async (port) => createClient({ url: `redis://127.0.0.1:${port}`, socket: { reconnectStrategy: (n) => Math.min(50 * 2 ** n, 500) } }).connect(),
    cluster: async (seeds) => createCluster({ rootNodes: seeds.map((s) => ({ url: `redis://${s.host}:${s.port}` })) }).connect(),
    close: async (c) => (typeof c.close === "function" ? c.close() : c.quit()),
  },
};

module.exports = { makers };
