// Appended by integration/test_cluster_clients.py to docs/recipes/cluster_ioredis.js, the ioredis
// snippet (which defines `rl` and `rlPipeline`). Reads {port, mode, single,
// pipeline} as JSON on stdin and prints the replies as JSON. mode "plain"
// sends the same calls with `cluster.call`, as an earlier README suggested.
const { Cluster } = require("ioredis");

(async () => {
  const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const cluster = new Cluster([{ host: "127.0.0.1", port: input.port }]);
  const plain = input.mode === "plain";
  const out = { single: [], pipeline: [] };
  for (const args of input.single) {
    out.single.push(plain ? await cluster.call(...args) : await rl(cluster, ...args));
  }
  let replies;
  if (plain) {
    const pipeline = cluster.pipeline();
    for (const args of input.pipeline) pipeline.call(...args);
    replies = await pipeline.exec().catch((e) => input.pipeline.map(() => [e]));
  } else {
    replies = await rlPipeline(cluster, input.pipeline);
  }
  out.pipeline = replies.map(([error, reply]) => (error ? `error: ${error.message}` : reply));
  console.log(JSON.stringify(out));
  await cluster.quit();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
