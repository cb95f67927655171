/**
 * One method per RL command, over the caller's ioredis or node-redis
 * client (standalone or Cluster). Each method checks its arguments before
 * any Redis call, sends one command routed to its key's node, and returns a
 * frozen decision; an error reply becomes a `RateLimitError` with the
 * server's text.
 */
import * as b from "./build";
import * as d from "./decisions";
import { isServerReplyError, ModuleNotLoadedError, RateLimitError } from "./errors";
import { transportFor, type Call, type RedisLike, type Transport } from "./transport";

export class RateLimitClient {
  /** How calls reach Redis (picked from the client given). */
  readonly transport: Transport;

  /** `redis`: an ioredis `Redis`/`Cluster`, or a node-redis client/cluster (connected). */
  constructor(redis: RedisLike) {
    this.transport = transportFor(redis);
  }

  /** Sends one call; error replies become `RateLimitError`, other failures pass through. */
  send(call: Call): Promise<unknown> {
    return this.transport.send(call).catch(rethrow);
  }

  /** Sends calls in one round trip per node; each slot holds a reply or a `RateLimitError`/Error. */
  async batch(calls: readonly Call[]): Promise<unknown[]> {
    const replies = await this.transport.batch(calls);
    return replies.map((r) => (r instanceof Error ? asRateLimitError(r) : r));
  }

  /**
   * Throws `ModuleNotLoadedError` unless the server -- under Cluster, every
   * primary -- knows RL.ALL (`COMMAND INFO RL.ALL`). Call it once at start.
   */
  async assertModuleLoaded(): Promise<void> {
    const args = ["COMMAND", "INFO", "RL.ALL"];
    let replies: unknown[];
    try {
      replies = this.transport.sendEach ? await this.transport.sendEach(args) : [await this.transport.sendAny(args)];
    } catch (e) {
      throw asRateLimitError(e);
    }
    if (replies.length === 0) throw new ModuleNotLoadedError("no primary answered COMMAND INFO RL.ALL");
    replies.forEach((reply, i) => {
      if (!Array.isArray(reply) || reply.length === 0 || reply[0] == null) {
        throw new ModuleNotLoadedError(`COMMAND INFO RL.ALL answered nothing${replies.length > 1 ? ` on primary ${i + 1} of ${replies.length}` : ""}`);
      }
    });
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

export function asRateLimitError(e: unknown): unknown {
  if (e instanceof RateLimitError || !isServerReplyError(e)) return e;
  return new RateLimitError(e.message, e);
}
