/**
 * Sending RL commands through the caller's own Redis client: ioredis
 * (`Redis`, `Cluster`) or node-redis (`createClient`, `createCluster` from
 * `redis` / `@redis/client`). Neither client knows where an RL command's
 * key is (ioredis knows built-in commands only; node-redis routes a raw
 * command by the key it is given), so under Cluster every call carries its
 * routing key explicitly: the first key, which for RL.ALL is the one after
 * `numkeys`. A batch is split per hash slot, each part one pipeline on that
 * slot's node, so calls on different nodes never see `MOVED`.
 */
import calculateSlot from "cluster-key-slot";

/** One command: its routing key, whether it only reads, and its arguments (name first). */
export interface Call {
  readonly key: string;
  readonly readOnly: boolean;
  readonly args: readonly string[];
}

export interface Transport {
  /** "ioredis", "ioredis-cluster", "node-redis", "node-redis-cluster". */
  readonly kind: string;
  send(call: Call): Promise<unknown>;
  /** Replies in call order; a failed call's slot holds its Error. */
  batch(calls: readonly Call[]): Promise<unknown[]>;
  /** A command with no key (COMMAND INFO, PING), to any node. */
  sendAny(args: readonly string[]): Promise<unknown>;
  /** A command with no key to every primary of a Cluster, replies in node order (absent: one server). */
  sendEach?(args: readonly string[]): Promise<unknown[]>;
  /** Every primary of a Cluster, named host:port, each with a sender of keyless commands (absent: one server). */
  primaries?(): Promise<Primary[]>;
  /** The name (host:port) of the primary that serves `key` as the client knows it now; "*" when unknown (absent: one server). */
  nodeOf?(key: string): string;
  /** PING the primary `name` (`nodeOf`); "*": any node. */
  ping?(name: string): Promise<unknown>;
  /** Whether the client says it is connected (false: reconnecting, commands queued); absent: unknown. */
  connected?(): boolean;
}

/** One primary of a Cluster: its name (host:port) and how to send it a command with no key. */
export interface Primary {
  readonly name: string;
  send(args: readonly string[]): Promise<unknown>;
}

/** Any client object the package accepts. Typed loosely so neither client is a hard dependency. */
export type RedisLike = object;

function bySlot(calls: readonly Call[]): Map<number, number[]> {
  const groups = new Map<number, number[]>();
  calls.forEach((c, i) => {
    const slot = calculateSlot(c.key);
    const list = groups.get(slot);
    if (list) list.push(i);
    else groups.set(slot, [i]);
  });
  return groups;
}

async function splitBySlot(calls: readonly Call[], run: (part: Call[]) => Promise<unknown[]>): Promise<unknown[]> {
  const out = new Array<unknown>(calls.length);
  await Promise.all(
    [...bySlot(calls).values()].map(async (indexes) => {
      let replies: unknown[];
      try {
        replies = await run(indexes.map((i) => calls[i]));
      } catch (e) {
        replies = indexes.map(() => e);
      }
      indexes.forEach((callIndex, j) => (out[callIndex] = replies[j]));
    }),
  );
  return out;
}

/* ---------------- ioredis ---------------- */

interface IoRedisCommandCtor {
  new (name: string, args: readonly string[], options?: { readOnly?: boolean }): { keys?: unknown[] };
}

function ioredisCommandClass(cluster: any): IoRedisCommandCtor {
  // The Command class of the caller's own ioredis copy (Redis.Command on its
  // node connections' class), else the ioredis this package resolves (a
  // peer dependency, loaded only here, so node-redis users need not install it).
  const own = cluster.nodes?.("all")?.[0]?.constructor?.Command;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return own ?? require("ioredis").Command;
}

type IoPipeline = { exec(): Promise<Array<[Error | null, unknown]>> } & Record<string, any>;

function ioredisExec(pipeline: IoPipeline, n: number): Promise<unknown[]> {
  return pipeline.exec().then((rows) => (rows ?? new Array(n).fill(new Error("pipeline discarded"))).map(([err, reply]) => err ?? reply));
}

function ioredisStandalone(client: any): Transport {
  return {
    kind: "ioredis",
    connected: () => client.status === "ready",
    // ioredis flattens one level of array arguments (Command does args.flat()).
    send: (c) => client.call(c.args[0], c.args.slice(1)),
    sendAny: (args) => client.call(args[0], args.slice(1)),
    batch: (calls) => {
      const p = client.pipeline();
      for (const c of calls) p.call(c.args[0], c.args.slice(1));
      return ioredisExec(p, calls.length);
    },
  };
}

function ioredisCluster(client: any): Transport {
  let Command: IoRedisCommandCtor | null = null;
  // ioredis routes a Command by `keys[0]`, which it computes only for the
  // commands it knows; giving it the key routes RL commands like GET.
  const command = (c: Call) => {
    Command ??= ioredisCommandClass(client);
    const cmd = new Command(c.args[0], c.args.slice(1), { readOnly: c.readOnly });
    cmd.keys = [c.key];
    return cmd;
  };
  return {
    kind: "ioredis-cluster",
    connected: () => client.status === "ready",
    send: (c) => client.sendCommand(command(c)),
    sendAny: (args) => client.call(args[0], ...args.slice(1)),
    sendEach: async (args) => {
      await client.call("PING"); // queued until the cluster is ready, so its primaries are known
      return Promise.all(client.nodes("master").map((node: any) => node.call(args[0], ...args.slice(1))));
    },
    primaries: async () => {
      await client.call("PING");
      return client.nodes("master").map((node: any) => ({
        name: `${node.options.host}:${node.options.port}`,
        send: (args: readonly string[]) => node.call(args[0], ...args.slice(1)),
      }));
    },
    batch: (calls) =>
      splitBySlot(calls, (part) => {
        const p = client.pipeline();
        for (const c of part) p.sendCommand(command(c));
        return ioredisExec(p, part.length);
      }),
    // ioredis's slot table: `slots[slot]` lists "host:port" keys, the primary first.
    nodeOf: (key) => client.slots?.[calculateSlot(key)]?.[0] ?? "*",
    ping: async (name) => {
      if (name === "*") return client.call("PING");
      const find = () => client.nodes("master").find((n: any) => `${n.options.host}:${n.options.port}` === name);
      let node = find();
      if (!node) {
        // ioredis drops a node from its pool when its connection ends and
        // reconnects it only on a slot refresh, which only a command routed
        // there triggers; with the circuit open none is, so the probe asks
        // for one (CLUSTER SLOTS; its reset reconnects the node if it serves slots).
        await new Promise<void>((resolve, reject) => client.refreshSlotsCache((e?: Error) => (e ? reject(e) : resolve())));
        node = find();
      }
      if (!node) throw new Error(`no primary ${name} in the slot table`);
      return node.call("PING");
    },
  };
}

/* ---------------- node-redis ---------------- */

function nodeRedisStandalone(client: any): Transport {
  return {
    kind: "node-redis",
    connected: () => client.isReady !== false,
    send: (c) => client.sendCommand([...c.args]),
    sendAny: (args) => client.sendCommand([...args]),
    // Sent in one tick, node-redis writes them as one pipeline; each keeps
    // its own reply or error (execAsPipeline rejects at the first error
    // reply and the others' replies are lost).
    batch: (calls) => Promise.all(calls.map((c) => client.sendCommand([...c.args]).catch((e: unknown) => e))),
  };
}

function nodeRedisCluster(client: any): Transport {
  return {
    kind: "node-redis-cluster",
    send: (c) => client.sendCommand(c.key, c.readOnly, [...c.args]),
    sendAny: (args) => client.sendCommand(undefined, true, [...args]),
    sendEach: (args) =>
      Promise.all(client.masters.map(async (node: any) => (await client.nodeClient(node)).sendCommand([...args]))),
    primaries: async () =>
      client.masters.map((node: any) => ({
        name: `${node.host}:${node.port}`,
        send: async (args: readonly string[]) => (await client.nodeClient(node)).sendCommand([...args]),
      })),
    batch: (calls) =>
      splitBySlot(calls, (part) =>
        Promise.all(part.map((c) => client.sendCommand(c.key, c.readOnly, [...c.args]).catch((e: unknown) => e))),
      ),
    nodeOf: (key) => {
      try {
        const m = client.getSlotMaster(calculateSlot(key));
        return m ? `${m.host}:${m.port}` : "*";
      } catch {
        return "*"; // no slot table yet
      }
    },
    ping: async (name) => {
      if (name === "*") return client.sendCommand(undefined, true, ["PING"]);
      const node = client.masters.find((n: any) => `${n.host}:${n.port}` === name);
      if (!node) throw new Error(`no primary ${name} in the slot table`);
      return (await client.nodeClient(node)).sendCommand(["PING"]);
    },
  };
}

/** Picks the transport for a client object, by the shape of its API. */
export function transportFor(client: RedisLike): Transport {
  const c = client as any;
  if (c && typeof c.send === "function" && typeof c.batch === "function" && typeof c.sendAny === "function") {
    return c as Transport; // already a Transport (tests, custom clients)
  }
  if (c && typeof c.pipeline === "function" && typeof c.call === "function") {
    return c.isCluster === true ? ioredisCluster(c) : ioredisStandalone(c);
  }
  if (c && typeof c.sendCommand === "function" && typeof c.multi === "function") {
    return typeof c.getSlotMaster === "function" ? nodeRedisCluster(c) : nodeRedisStandalone(c);
  }
  throw new TypeError(
    "unsupported Redis client: pass an ioredis Redis or Cluster, or a node-redis client or cluster (createClient/createCluster)",
  );
}
