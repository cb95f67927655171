// ioredis: Cluster; a Command that carries its key is routed by that key.
const { Command } = require("ioredis"); // const cluster = new Cluster([{ host: "10.0.0.1", port: 6379 }]);

// The key a call is routed by: the first argument, or for RL.ALL and
// RL.ALLPEEK (numkeys key [key ...]) the first key after numkeys.
const routingKey = ([name, ...args]) => String(/^rl\.all/i.test(name) ? args[1] : args[0]);

class RLCommand extends Command {
  constructor([name, ...args]) {
    super(name, args);
    this.keys = [routingKey([name, ...args])]; // ioredis routes by this.keys[0]
  }
}

// await rl(cluster, "RL.CHECK", "rl:{user:42}:ocr", "*", 10, 60000)
const rl = (cluster, ...args) => cluster.sendCommand(new RLCommand(args));

// ioredis pipelines in Cluster hold keys of one slot: use one hash tag.
const rlPipeline = (cluster, calls) => {
  const pipeline = cluster.pipeline();
  for (const args of calls) pipeline.sendCommand(new RLCommand(args));
  return pipeline.exec(); // [[error, reply], ...]
};
