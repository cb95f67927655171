/**
 * One method per RL command, over the caller's ioredis or node-redis
 * client (standalone or Cluster). Each method checks its arguments before
 * any Redis call, sends one command routed to its key's node, and returns a
 * frozen decision; an error reply becomes a `RateLimitError` with the
 * server's text.
 */
import * as b from "./build";
import { backendOf, fcall, isFunctionMissing, isModuleMissing, library, loadCommand, versionOf, type Backend } from "./backend";
import * as d from "./decisions";
import { isServerReplyError, LibraryNotLoadedError, ModuleNotLoadedError, RateLimitError, RateLimitUnavailableError } from "./errors";
import { transportFor, type Call, type Primary, type RedisLike, type Transport } from "./transport";

export interface RateLimitClientOptions {
  /**
   * Which engine decides: `"module"` (default: the RL commands), `"functions"`
   * (the project's Redis Functions library, loaded when absent or older than
   * this package) or `"auto"` (the module where every primary has it, else
   * the library; and the library once the module goes missing at run time).
   */
  readonly backend?: Backend | string;
}

/** What `health()` answers. */
export interface Health {
  readonly status: "UP" | "DOWN";
  /** The engine deciding now. */
  readonly backend: "module" | "functions";
  /** Why DOWN: the module or the library missing, or Redis unreachable. */
  readonly detail?: string;
}

export class RateLimitClient {
  /** How calls reach Redis (picked from the client given). */
  readonly transport: Transport;
  /** The backend setting. */
  readonly backendSetting: Backend;
  /** The engine deciding now (`auto`: the module until the first call's check, `ensureBackend`, or a failover says otherwise). */
  backend: "module" | "functions";
  // Every backend checks the servers once before the first call (as
  // Python's first use does): `module` that every primary has the module
  // (else ModuleNotLoadedError: a misconfigured server, which the adapters
  // answer 500 `misconfigured`, not a Redis-down 503), `auto` picks its
  // engine, `functions` loads the library where absent or older. Concurrent
  // first calls share one check; a failed check is tried again by the next call.
  private resolved = false;
  private resolving: Promise<void> | null = null;

  /** `redis`: an ioredis `Redis`/`Cluster`, or a node-redis client/cluster (connected). */
  constructor(redis: RedisLike, options: RateLimitClientOptions = {}) {
    this.transport = transportFor(redis);
    this.backendSetting = backendOf(options.backend ?? "module");
    this.backend = this.backendSetting === "functions" ? "functions" : "module";
  }

  /** Whether the first call's check (`ensureBackend`) has passed: after it, a missing module went away at run time. */
  get checked(): boolean {
    return this.resolved;
  }

  /** The first call's backend check (shared by concurrent first calls); nothing once done. */
  private resolve(): Promise<void> {
    this.resolving ??= this.ensureBackend().finally(() => {
      this.resolving = null;
    });
    return this.resolving;
  }

  /** A call as the deciding engine takes it (FCALL for the library). */
  private wire(call: Call): Call {
    return this.backend === "functions" ? { key: call.key, readOnly: call.readOnly, args: fcall(call.args) } : call;
  }

  /** Whether an error is one the backend repairs and retries once: the library missing, or (`auto`) the module gone. */
  private recovers(e: unknown): boolean {
    if (!isServerReplyError(e)) return false;
    if (this.backend === "functions") return isFunctionMissing(e.message);
    return this.backendSetting === "auto" && isModuleMissing(e.message);
  }

  /** Loads the library on the node of `call` (the library missing there), or switches `auto` to the library. */
  private async repair(e: Error, call: Call): Promise<void> {
    if (this.backend === "module") {
      console.error(`redis-ratelimit: the module is gone (${e.message}); backend auto: deciding with the Functions library from now on`);
      this.backend = "functions";
      await this.ensureLibraryEverywhere();
      return;
    }
    await this.ensureLibrary({ name: "", send: (args) => this.transport.send({ key: call.key, readOnly: false, args }) });
  }

  /** Sends one call; error replies become `RateLimitError`, other failures pass through. */
  async send(call: Call): Promise<unknown> {
    if (!this.resolved) await this.resolve().catch(rethrow);
    try {
      return await this.transport.send(this.wire(call));
    } catch (e) {
      if (!this.recovers(e)) throw asRateLimitError(e);
      await this.repair(e as Error, call).catch(rethrow); // then once more (SPEC: load on that node, retry once)
      return this.transport.send(this.wire(call)).catch(rethrow);
    }
  }

  /** Sends calls in one round trip per node; each slot holds a reply or a `RateLimitError`/Error. */
  async batch(calls: readonly Call[]): Promise<unknown[]> {
    if (!this.resolved) await this.resolve().catch(rethrow);
    const replies = await this.transport.batch(calls.map((c) => this.wire(c)));
    for (let i = 0; i < replies.length; i++) {
      if (!this.recovers(replies[i])) continue;
      try {
        await this.repair(replies[i] as Error, calls[i]);
        replies[i] = await this.transport.send(this.wire(calls[i]));
      } catch (e) {
        replies[i] = e;
      }
    }
    return replies.map((r) => (r instanceof Error ? asRateLimitError(r) : r));
  }

  private async primaries(): Promise<Primary[]> {
    return this.transport.primaries ? this.transport.primaries() : [{ name: "", send: (args) => this.transport.sendAny(args) }];
  }

  /**
   * Throws `ModuleNotLoadedError` unless the server -- under Cluster, every
   * primary -- knows RL.ALL (`COMMAND INFO RL.ALL`). Call it once at start.
   */
  async assertModuleLoaded(): Promise<void> {
    const missing = await this.moduleMissing();
    if (missing !== null) throw new ModuleNotLoadedError(missing);
  }

  /** Why the module is not usable (the first primary without it), or null. */
  private async moduleMissing(): Promise<string | null> {
    const args = ["COMMAND", "INFO", "RL.ALL"];
    let replies: unknown[];
    try {
      replies = this.transport.sendEach ? await this.transport.sendEach(args) : [await this.transport.sendAny(args)];
    } catch (e) {
      throw asRateLimitError(e);
    }
    if (replies.length === 0) return "no primary answered COMMAND INFO RL.ALL";
    const i = replies.findIndex((reply) => !Array.isArray(reply) || reply.length === 0 || reply[0] == null);
    if (i < 0) return null;
    return `COMMAND INFO RL.ALL answered nothing${replies.length > 1 ? ` on primary ${i + 1} of ${replies.length}` : ""}`;
  }

  /**
   * The start-up check of the backend, on every primary: `module` as
   * `assertModuleLoaded`; `functions` loads the library where it is absent
   * or older than this package (`LibraryNotLoadedError`, naming the command
   * to run by hand, when this Redis user may not load it); `auto` picks the
   * module when every primary has it, else the library. The first call (and
   * `health()`) runs it by itself; call it at start to fail there instead.
   */
  async ensureBackend(): Promise<void> {
    if (this.backendSetting !== "functions") {
      const missing = await this.moduleMissing();
      if (missing === null) {
        this.backend = "module";
        this.resolved = true;
        return;
      }
      if (this.backendSetting === "module") throw new ModuleNotLoadedError(missing);
      this.backend = "functions";
    }
    await this.ensureLibraryEverywhere();
    this.resolved = true;
  }

  private async ensureLibraryEverywhere(): Promise<void> {
    for (const node of await this.primaries()) await this.ensureLibrary(node);
  }

  /** Loads the library on `node` unless it has this package's version or a newer one (`rl_version`). */
  private async ensureLibrary(node: Primary): Promise<void> {
    const src = library();
    const want = versionOf(src);
    let have = -1;
    try {
      have = Number(await node.send(["FCALL", "rl_version", "0"]));
    } catch (e) {
      if (!(isServerReplyError(e) && isFunctionMissing(e.message))) throw asRateLimitError(e);
    }
    if (have >= want) return;
    try {
      await node.send(["FUNCTION", "LOAD", "REPLACE", src]);
    } catch (e) {
      if (isServerReplyError(e) && /^NOPERM/.test(e.message)) {
        const where = node.name ? ` on ${node.name}` : "";
        throw new LibraryNotLoadedError(
          `the Redis user may not run FUNCTION LOAD (${e.message}) and the redis-ratelimit Functions library is ` +
            `${have >= 0 ? "older than this client" : "not loaded"}${where}: load it once by hand with ` +
            `\`${loadCommand(node.name)}\`${node.name ? " on every primary" : ""}, or grant the user +function|load`,
        );
      }
      throw asRateLimitError(e);
    }
  }

  /**
   * Whether Redis can decide now and with which engine, asked of every
   * primary: `{ status: "UP", backend }`, or `"DOWN"` with a `detail` naming
   * the module or the library missing, or Redis unreachable. Never throws.
   * Before the first call it runs the first call's check (`ensureBackend`:
   * `functions` loads the library, `auto` picks its engine), so a fresh app
   * is UP without waiting for a decision.
   */
  async health(): Promise<Health> {
    try {
      if (!this.resolved) await this.resolve();
      const backend = this.backend;
      if (backend === "module") {
        const missing = await this.moduleMissing();
        if (missing !== null) return { status: "DOWN", backend, detail: new ModuleNotLoadedError(missing).message };
      } else {
        for (const node of await this.primaries()) await node.send(["FCALL", "rl_version", "0"]);
      }
      return { status: "UP", backend };
    } catch (e) {
      const text = (e as Error)?.message ?? String(e);
      // An error reply (or ours, naming what is missing) passes as it is; any
      // other failure is the connection's (ioredis: "Reached the max retries
      // per request limit", node-redis: "The client is closed").
      const detail =
        isServerReplyError(e) && isFunctionMissing(text)
          ? `the redis-ratelimit Functions library is not loaded (${text})`
          : isServerReplyError(e) || e instanceof RateLimitError || e instanceof RateLimitUnavailableError
            ? text
            : `Redis cannot be reached (${text})`;
      return { status: "DOWN", backend: this.backend, detail };
    }
  }

  /** RL.CHECK: sliding-window log, every rule at once. */
  async check(key: string, rules: b.WindowRule | readonly b.WindowRule[], o?: b.WriteOptions): Promise<d.Decision> {
    return d.decision("RL.CHECK", await this.send(b.check("RL.CHECK", key, rules, o)));
  }
  /** RL.PEEK: what RL.CHECK would answer; writes nothing (`cost: 0`: the state now). */
  async peek(key: string, rules: b.WindowRule | readonly b.WindowRule[], o?: b.CostOptions): Promise<d.Decision> {
    return d.decision("RL.PEEK", await this.send(b.check("RL.PEEK", key, rules, o)));
  }
  /** RL.THROTTLE: token bucket (GCRA). */
  async throttle(key: string, rules: b.BucketRule | readonly b.BucketRule[], o?: b.ThrottleOptions): Promise<d.Decision> {
    return d.decision("RL.THROTTLE", await this.send(b.throttle("RL.THROTTLE", key, rules, o)));
  }
  async throttlePeek(key: string, rules: b.BucketRule | readonly b.BucketRule[], o?: b.ThrottlePeekOptions): Promise<d.Decision> {
    return d.decision("RL.THROTTLEPEEK", await this.send(b.throttle("RL.THROTTLEPEEK", key, rules, o)));
  }
  /** RL.QUOTA: calendar quotas in a time zone (`{ day: 20, hour: 5 }`). */
  async quota(key: string, zone: string, periods: b.Periods, o?: b.WriteOptions): Promise<d.Decision> {
    return d.decision("RL.QUOTA", await this.send(b.quota("RL.QUOTA", key, zone, periods, o)));
  }
  async quotaPeek(key: string, zone: string, periods: b.Periods, o?: b.CostOptions): Promise<d.Decision> {
    return d.decision("RL.QUOTAPEEK", await this.send(b.quota("RL.QUOTAPEEK", key, zone, periods, o)));
  }
  /** RL.DAYHOUR: two fixed-window counters you name and time yourself. */
  async dayhour(dayKey: string, hourKey: string, o: b.DayHourOptions): Promise<d.DayHourDecision> {
    return d.dayHourDecision(await this.send(b.dayhour(dayKey, hourKey, o)), o.dayLimit, o.hourLimit);
  }
  /** RL.LOCKCOUNT: count, then lock out. */
  async lockcount(lockKey: string, countKey: string, o: b.LockCountOptions): Promise<d.LockCountDecision> {
    return d.lockCountDecision(await this.send(b.lockcount(lockKey, countKey, o)));
  }
  /** RL.LEASE: take `cost` units of an in-flight limit; `token` names the lease. */
  async lease(key: string, o: b.LeaseOptions): Promise<d.LeaseDecision> {
    return d.leaseDecision(await this.send(b.lease(key, o)));
  }
  async leasePeek(key: string, o: b.LeasePeekOptions): Promise<d.Decision> {
    return d.decision("RL.LEASEPEEK", await this.send(b.leasePeek(key, o)));
  }
  /** RL.RELEASE: per token, the live units given back (0: the lease was already gone). */
  async release(key: string, tokens: string | readonly string[], o?: b.CallOptions): Promise<number[]> {
    return d.counts("RL.RELEASE", await this.send(b.release(key, tokens, o)));
  }
  /** RL.RENEW: per token, the units renewed (0: the lease is lost). */
  async renew(key: string, ttl: number, tokens: string | readonly string[], o?: b.CallOptions): Promise<number[]> {
    return d.counts("RL.RENEW", await this.send(b.renew(key, ttl, tokens, o)));
  }
  /** RL.ALL: one all-or-nothing decision over clauses on keys of one hash slot. */
  async all(clauses: readonly b.Clause[], o: b.AllOptions = {}): Promise<d.AllDecision> {
    return d.allDecision("RL.ALL", await this.send(b.all("RL.ALL", clauses, o)), !!o.details);
  }
  async allPeek(clauses: readonly b.Clause[], o: Omit<b.AllOptions, "refund"> = {}): Promise<d.AllDecision> {
    return d.allDecision("RL.ALLPEEK", await this.send(b.all("RL.ALLPEEK", clauses, o)), !!o.details);
  }
}

function rethrow(e: unknown): never {
  throw asRateLimitError(e);
}

// Error replies that mean "cannot decide now", not "this call is wrong"
// (CLIENTS.md §3): unavailable, like a refused connection.
const UNAVAILABLE_REPLY = /^(CLUSTERDOWN|TRYAGAIN|MASTERDOWN|LOADING)\b/;

/**
 * A Redis client's error as this package raises it: an error reply becomes
 * `RateLimitError` (the server's text), the RL commands unknown
 * `ModuleNotLoadedError`, `CLUSTERDOWN`/`TRYAGAIN`/`MASTERDOWN`/`LOADING`
 * `RateLimitUnavailableError`; other failures (connections) pass through.
 */
export function asRateLimitError(e: unknown): unknown {
  if (e instanceof RateLimitError || e instanceof RateLimitUnavailableError || !isServerReplyError(e)) return e;
  if (UNAVAILABLE_REPLY.test(e.message)) return new RateLimitUnavailableError(`Redis cannot decide now: ${e.message}`, e);
  if (isModuleMissing(e.message)) return new ModuleNotLoadedError(`the server answered '${e.message}'`);
  return new RateLimitError(e.message, e);
}
