// Appended by integration/test_cluster_clients.py to docs/recipes/cluster_node_redis.js, the node-redis
// snippet (which defines `rl` and `rlPipeline`). Reads {port, single,
// pipeline} as JSON on stdin and prints the replies as JSON.
(async () => {
  const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const cluster = await createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${input.port}` }] }).connect();
  const out = { single: [], pipeline: [] };
  for (const args of input.single) out.single.push(await rl(cluster, ...args));
  out.pipeline = await rlPipeline(cluster, input.pipeline);
  console.log(JSON.stringify(out));
  await cluster.close();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
