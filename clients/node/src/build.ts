/**
 * From typed arguments to the argument lists of the RL commands
 * (SPEC.md), refusing what the module would refuse before anything is
 * sent. Pure functions: tested without a server.
 */
import * as a from "./args";
import type { Call } from "./transport";

/** "At most `count` units in any `window` ms" (a sliding-window log rule). */
export interface WindowRule {
  readonly count: number;
  /** ms */
  readonly window: number;
}

/** A token bucket (GCRA): `burst` at once, refilled at `count` per `window` ms. */
export interface BucketRule {
  readonly burst: number;
  readonly count: number;
  /** ms */
  readonly window: number;
}

export type Period = "minute" | "hour" | "day" | "week" | "month" | "year";
export const PERIODS: readonly Period[] = ["minute", "hour", "day", "week", "month", "year"];
/** Calendar periods and their limits, in the order given: `{ day: 20, hour: 5 }`. */
export type Periods = Readonly<Partial<Record<Period, number>>>;

export interface CallOptions {
  /** Unix ms; the server's clock (`*`) when omitted (recommended). */
  readonly now?: a.Now;
}
export interface CostOptions extends CallOptions {
  readonly cost?: number;
}
export interface WriteOptions extends CostOptions {
  /** Give `cost` units back (after an admission that could not be served). */
  readonly refund?: boolean;
  /** Record `cost` units whether or not they fit (usage known afterwards). */
  readonly debit?: boolean;
}
export interface ThrottleOptions extends WriteOptions {
  /** Wait up to this many ms instead of being refused (RESERVE). */
  readonly reserve?: number;
}
export interface ThrottlePeekOptions extends CostOptions {
  readonly reserve?: number;
}
export interface LeaseOptions extends CostOptions {
  readonly limit: number;
  /** ms the lease lives unless renewed or released. */
  readonly ttl: number;
  /** The lease's name (a request id); the module names it when omitted. */
  readonly token?: string;
}
export interface LeasePeekOptions extends CostOptions {
  readonly limit: number;
  readonly token?: string;
}
export interface DayHourOptions {
  readonly dayLimit: number;
  readonly hourLimit: number;
  /** ms the day key lives when created (usually until the end of the day). */
  readonly dayTtl: number;
  readonly hourTtl: number;
}
export interface LockCountOptions {
  /** ms of the counting window the first call starts. */
  readonly window: number;
  /** Calls admitted per window; the next one locks. */
  readonly max: number;
  /** ms the lock lasts. */
  readonly lockTime: number;
}

export type Clause =
  | { readonly kind: "check"; readonly key: string; readonly rules: WindowRule | readonly WindowRule[]; readonly cost?: number }
  | { readonly kind: "throttle"; readonly key: string; readonly rules: BucketRule | readonly BucketRule[]; readonly cost?: number }
  | { readonly kind: "quota"; readonly key: string; readonly zone: string; readonly periods: Periods; readonly cost?: number }
  | {
      readonly kind: "lease";
      readonly key: string;
      readonly limit: number;
      readonly ttl: number;
      readonly token?: string;
      readonly cost?: number;
    };

export interface AllOptions extends CallOptions {
  /** Give back what an earlier identical call took (RL.ALL only). */
  readonly refund?: boolean;
  /** Every rule's state in the reply (`decision.details`). */
  readonly details?: boolean;
}

const list = <T>(what: string, rules: T | readonly T[]): readonly T[] => {
  const l = Array.isArray(rules) ? (rules as readonly T[]) : [rules as T];
  if (l.length === 0) throw new RangeError(`invalid ${what}: expected at least one rule`);
  return l;
};

type Mode = "write" | "peek" | "settle";

function checkRules(rules: WindowRule | readonly WindowRule[], out: string[]): number {
  let min = a.MAX;
  list("rules", rules).forEach((r, i) => {
    out.push(String(a.int(`count for rule ${i + 1}`, r?.count, 1, a.MAX)), String(a.duration(`window for rule ${i + 1}`, r.window)));
    min = Math.min(min, r.count);
  });
  return min;
}

function checkCost(cost: number | undefined, minCount: number, mode: Mode): number {
  if (mode === "settle") return a.int("cost", cost ?? 1, 1, a.MAX_UNIT_COST);
  return a.int("cost", cost ?? 1, mode === "peek" ? 0 : 1, Math.min(minCount, a.MAX_UNIT_COST));
}

function throttleRules(rules: BucketRule | readonly BucketRule[], out: string[]): number {
  let min = a.MAX;
  const windows = new Set<number>();
  list("rules", rules).forEach((r, i) => {
    const n = i + 1;
    const burst = a.int(`burst for rule ${n}`, r?.burst, 1, a.MAX);
    const count = a.int(`count for rule ${n}`, r.count, 1, a.MAX);
    const window = a.duration(`window for rule ${n}`, r.window);
    if (windows.has(window)) throw new RangeError(`invalid window '${window}' for rule ${n}: two rules with the same window`);
    windows.add(window);
    // Exact, as the module computes it: emission interval T = floor(window * 1e6 / count) ns >= 1,
    // tolerance T * burst <= (2^53-1) * 1e6.
    const t = (BigInt(window) * 1_000_000n) / BigInt(count);
    if (t < 1n) throw a.invalid("rate", new RangeError(`invalid rule ${n}: ${count} per ${window} ms is more than one unit per nanosecond`));
    if (t * BigInt(burst) > BigInt(a.MAX) * 1_000_000n) throw a.invalid("burst", new RangeError(`invalid rule ${n}: burst ${burst} makes the bucket too deep`));
    out.push(String(burst), String(count), String(window));
    min = Math.min(min, burst);
  });
  return min;
}

function throttleCost(cost: number | undefined, minBurst: number, mode: Mode): number {
  if (mode === "settle") return a.int("cost", cost ?? 1, 1, a.MAX);
  return a.int("cost", cost ?? 1, mode === "peek" ? 0 : 1, minBurst);
}

function quotaPeriods(zone: string, periods: Periods, out: string[]): void {
  out.push(a.zone(zone));
  const entries = Object.entries(periods ?? {});
  if (entries.length === 0) throw new RangeError("invalid periods: expected at least one period");
  for (const [p, limit] of entries) {
    if (!(PERIODS as readonly string[]).includes(p)) throw a.invalid("period", new RangeError(`invalid period '${p}': expected one of ${PERIODS.join(", ")}`));
    out.push(p.toUpperCase(), String(a.int(`limit for ${p}`, limit, 0, a.MAX)));
  }
}

function leaseCost(cost: number | undefined, limit: number, mode: Mode): number {
  return a.int("cost", cost ?? 1, mode === "peek" ? 0 : 1, Math.min(limit, a.MAX_UNIT_COST));
}

const call = (key: string, readOnly: boolean, args: string[]): Call => ({ key, readOnly, args });

export function check(name: "RL.CHECK" | "RL.PEEK", key: string, rules: WindowRule | readonly WindowRule[], o: WriteOptions = {}): Call {
  const args = [name, a.key("key", key), a.now(o.now)];
  const min = checkRules(rules, args);
  if (args.length - 3 > a.MAX_RULES * 2) throw new RangeError(`too many rules: at most ${a.MAX_RULES}`);
  const mode = name === "RL.PEEK" ? undefined : a.settleMode(o);
  const cost = checkCost(o.cost, min, name === "RL.PEEK" ? "peek" : mode ? "settle" : "write");
  if (o.cost !== undefined) args.push("COST", String(cost));
  if (mode) args.push(mode);
  return call(key, name === "RL.PEEK", args);
}

export function throttle(name: "RL.THROTTLE" | "RL.THROTTLEPEEK", key: string, rules: BucketRule | readonly BucketRule[], o: ThrottleOptions = {}): Call {
  const args = [name, a.key("key", key), a.now(o.now)];
  const min = throttleRules(rules, args);
  if (args.length - 3 > a.MAX_RULES * 3) throw new RangeError(`too many rules: at most ${a.MAX_RULES}`);
  const peek = name === "RL.THROTTLEPEEK";
  const mode = peek ? undefined : a.settleMode(o);
  const cost = throttleCost(o.cost, min, peek ? "peek" : mode ? "settle" : "write");
  if (o.cost !== undefined) args.push("COST", String(cost));
  if (mode) args.push(mode);
  if (o.reserve !== undefined) {
    if (mode) throw new RangeError(`invalid options: RESERVE excludes ${mode}`);
    args.push("RESERVE", String(a.int("RESERVE", o.reserve, 0, a.MAX)));
  }
  return call(key, peek, args);
}

export function quota(name: "RL.QUOTA" | "RL.QUOTAPEEK", key: string, zone: string, periods: Periods, o: WriteOptions = {}): Call {
  const args = [name, a.key("key", key), a.now(o.now, a.MAX_QUOTA_NOW)];
  quotaPeriods(zone, periods, args);
  const peek = name === "RL.QUOTAPEEK";
  const mode = peek ? undefined : a.settleMode(o);
  const cost = a.int("cost", o.cost ?? 1, peek ? 0 : 1, a.MAX);
  if (o.cost !== undefined) args.push("COST", String(cost));
  if (mode) args.push(mode);
  return call(key, peek, args);
}

export function lease(key: string, o: LeaseOptions): Call {
  const args = ["RL.LEASE", a.key("key", key), a.now(o.now)];
  const limit = a.int("limit", o?.limit, 1, a.MAX);
  args.push(String(limit), String(a.duration("ttl", o.ttl)));
  const cost = leaseCost(o.cost, limit, "write");
  if (o.cost !== undefined) args.push("COST", String(cost));
  if (o.token !== undefined) args.push("TOKEN", a.token(o.token));
  return call(key, false, args);
}

export function leasePeek(key: string, o: LeasePeekOptions): Call {
  const args = ["RL.LEASEPEEK", a.key("key", key), a.now(o.now)];
  const limit = a.int("limit", o?.limit, 1, a.MAX);
  args.push(String(limit));
  const cost = leaseCost(o.cost, limit, "peek");
  if (o.cost !== undefined) args.push("COST", String(cost));
  if (o.token !== undefined) args.push("TOKEN", a.token(o.token));
  return call(key, true, args);
}

export function release(key: string, tokens: string | readonly string[], o: CallOptions = {}): Call {
  return call(key, false, ["RL.RELEASE", a.key("key", key), a.now(o.now), ...a.tokens(tokens)]);
}

export function renew(key: string, ttl: number, tokens: string | readonly string[], o: CallOptions = {}): Call {
  return call(key, false, ["RL.RENEW", a.key("key", key), a.now(o.now), String(a.duration("ttl", ttl)), ...a.tokens(tokens)]);
}

export function dayhour(dayKey: string, hourKey: string, o: DayHourOptions): Call {
  a.key("dayKey", dayKey);
  a.key("hourKey", hourKey);
  if (dayKey === hourKey) throw new RangeError("invalid keys: dayKey and hourKey must differ");
  return call(dayKey, false, [
    "RL.DAYHOUR",
    dayKey,
    hourKey,
    String(a.int("dayLimit", o?.dayLimit, 0, a.MAX)),
    String(a.int("hourLimit", o.hourLimit, 0, a.MAX)),
    String(a.duration("dayTtl", o.dayTtl)),
    String(a.duration("hourTtl", o.hourTtl)),
  ]);
}

export function lockcount(lockKey: string, countKey: string, o: LockCountOptions): Call {
  a.key("lockKey", lockKey);
  a.key("countKey", countKey);
  if (lockKey === countKey) throw new RangeError("invalid keys: lockKey and countKey must differ");
  return call(lockKey, false, [
    "RL.LOCKCOUNT",
    lockKey,
    countKey,
    String(a.duration("window", o?.window)),
    String(a.int("max", o.max, 0, a.MAX)),
    String(a.duration("lockTime", o.lockTime)),
  ]);
}

export function all(name: "RL.ALL" | "RL.ALLPEEK", clauses: readonly Clause[], o: AllOptions = {}): Call {
  const peek = name === "RL.ALLPEEK";
  if (!Array.isArray(clauses) || clauses.length === 0) throw new RangeError("invalid clauses: expected at least one clause");
  if (clauses.length > a.MAX_RULES) throw new RangeError(`too many clauses: ${clauses.length} (at most ${a.MAX_RULES})`);
  const keys: string[] = [];
  for (const c of clauses) {
    a.key("clause key", c?.key);
    if (keys.includes(c.key)) throw new RangeError(`invalid clauses: key '${c.key}' is named by two clauses`);
    keys.push(c.key);
  }
  if (o.refund && peek) throw new RangeError("invalid options: RL.ALLPEEK takes no REFUND");
  const mode: Mode = peek ? "peek" : o.refund ? "settle" : "write";
  const body: string[] = [];
  let rules = 0;
  clauses.forEach((c, i) => {
    const idx = String(i + 1);
    const before = body.length;
    switch (c.kind) {
      case "check": {
        body.push("CHECK", idx);
        const min = checkRules(c.rules, body);
        rules += (body.length - before - 2) / 2;
        if (c.cost !== undefined) body.push("COST", String(checkCost(c.cost, min, mode)));
        break;
      }
      case "throttle": {
        body.push("THROTTLE", idx);
        const min = throttleRules(c.rules, body);
        rules += (body.length - before - 2) / 3;
        if (c.cost !== undefined) body.push("COST", String(throttleCost(c.cost, min, mode)));
        break;
      }
      case "quota": {
        body.push("QUOTA", idx);
        quotaPeriods(c.zone, c.periods, body);
        rules += (body.length - before - 3) / 2;
        if (c.cost !== undefined) body.push("COST", String(a.int("cost", c.cost, peek ? 0 : 1, a.MAX)));
        break;
      }
      case "lease": {
        body.push("LEASE", idx);
        const limit = a.int("limit", c.limit, 1, a.MAX);
        body.push(String(limit), String(a.duration("ttl", c.ttl)));
        if (c.token !== undefined) body.push("TOKEN", a.token(c.token));
        else if (!peek) throw new RangeError(`invalid clause ${idx}: a LEASE clause of RL.ALL needs a token`);
        if (c.cost !== undefined) body.push("COST", String(leaseCost(c.cost, limit, peek ? "peek" : "write")));
        rules += 1;
        break;
      }
      default:
        throw new RangeError(`invalid clause ${idx}: unknown kind '${(c as { kind?: unknown }).kind}'`);
    }
  });
  if (rules > a.MAX_RULES) throw new RangeError(`too many rules: ${rules} in all clauses (at most ${a.MAX_RULES})`);
  const args = [name, String(keys.length), ...keys, a.now(o.now), ...body];
  if (o.refund) args.push("REFUND");
  if (o.details) args.push("DETAILS");
  return call(keys[0], peek, args);
}
