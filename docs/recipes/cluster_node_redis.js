// node-redis: createCluster from "redis" (or "@redis/client"); give the key.
const { createCluster } = require("@redis/client"); // const cluster = await createCluster({ rootNodes: [{ url: "redis://10.0.0.1:6379" }] }).connect();

const readOnly = (name) => /^rl\.[a-z]*peek$/i.test(name); // the peeks

// The key a call is routed by: the first argument, or for RL.ALL and
// RL.ALLPEEK (numkeys key [key ...]) the first key after numkeys.
const routingKey = ([name, ...args]) => String(/^rl\.all/i.test(name) ? args[1] : args[0]);

// await rl(cluster, "RL.CHECK", "rl:{user:42}:ocr", "*", 10, 60000)
const rl = (cluster, ...args) => cluster.sendCommand(routingKey(args), readOnly(args[0]), args.map(String));

// A pipeline goes to the node of its first key: keys of one slot (one hash tag).
const rlPipeline = (cluster, calls) => {
  const batch = cluster.multi(routingKey(calls[0]));
  for (const args of calls) batch.addCommand(routingKey(args), readOnly(args[0]), args.map(String));
  return batch.execAsPipeline();
};
