/**
 * A policy: a named set of named limits on one key, decided in one call
 * (one RL.ALL with DETAILS; one plain command when the policy is a single
 * rule), with every limit's state for the `RateLimit` headers.
 *
 * Keys: `<prefix><policy>:{<key>}:<limit>` — the caller's key in a hash
 * tag, so one policy's keys share a Cluster slot. With a fixed `tag`
 * (needed by a `global` limit shared by every key):
 * `<prefix><policy>:{<tag>}:<key>:<limit>`, and a global limit's key is
 * `<prefix><policy>:{<tag>}:<limit>`. A limit with `subkey` takes a
 * per-call discriminator (`subkeys: { duplicate: sha }`) after its name.
 */
import * as a from "./args";
import * as b from "./build";
import type { Period } from "./build";
import { PERIODS } from "./build";
import type { PolicyCall } from "./combined";
import type { DecideOptions } from "./limiter";

export type FailureMode = "open" | "closed";

export interface PolicyOptions {
  /** Put before every key (an app's namespace; `RL_PREFIX`). */
  readonly prefix?: string;
  /** A fixed hash tag for every key of the policy (required by `global` limits). */
  readonly tag?: string;
  /** Redis slow or down: `"open"` lets the call through, `"closed"` refuses it (503). Default `"closed"`. */
  readonly failure?: FailureMode;
  /** `Retry-After` seconds when an in-flight (lease) limit binds a refusal. Default 1. */
  readonly inFlightRetryAfter?: number;
  /**
   * Ask RL.ALL for every limit's state (`DETAILS`, for the `RateLimit`
   * headers). Default true; false leaves `decision.limits` with the binding
   * limit only (and works with module builds older than DETAILS).
   */
  readonly details?: boolean;
}

export interface LimitOptions {
  /**
   * What one call costs on this limit: `"request"` (the call's `cost`,
   * default 1) or `"estimate"` (the call's `estimate`, settled to the real
   * usage when the permit closes: the token budget of an LLM call).
   */
  readonly cost?: "request" | "estimate";
  /** One counter for every key of the policy (the policy needs a fixed `tag`). */
  readonly global?: boolean;
  /** The key takes a per-call discriminator: `subkeys[name]` (e.g. a body hash for duplicates). */
  readonly subkey?: boolean;
  /** Problem type slug sent when this limit refuses (e.g. `"duplicate"`); default `"rate-limited"`. */
  readonly problem?: string;
}

export type LimitKind = "slidingWindow" | "tokenBucket" | "quota" | "concurrency" | "lockout";

export interface Limit {
  readonly name: string;
  readonly kind: LimitKind;
  /** The limit in units (`q` of `RateLimit-Policy`): count, rate, quota limit, in-flight limit, calls before lockout. */
  limit: number;
  /** ms; the window of `w` (sliding window, bucket `per`, lockout window); a quota's nominal period length; null for in-flight. */
  readonly window: number | null;
  readonly burst?: number;
  /** A quota's zone; null: taken per call (`zone` option). */
  readonly zone?: string | null;
  readonly period?: Period;
  /** In-flight lease time to live, ms. */
  readonly ttl?: number;
  /** Lockout time, ms. */
  readonly lockTime?: number;
  readonly options: LimitOptions;
}

const NOMINAL_PERIOD_MS: Record<Period, number> = {
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 604_800_000,
  month: 2_592_000_000,
  year: 31_536_000_000,
};

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export class Policy {
  readonly name: string;
  readonly options: Required<Omit<PolicyOptions, "tag">> & { tag: string | null };
  readonly limits: Limit[] = [];
  private compiled: Compiled | null = null;

  constructor(name: string, options: PolicyOptions = {}) {
    if (!NAME.test(name)) throw new RangeError(`invalid policy name '${name}': 1 to 64 letters, digits, '_', '.', '-'`);
    this.name = name;
    this.options = {
      prefix: options.prefix ?? "",
      tag: options.tag ?? null,
      failure: options.failure ?? "closed",
      inFlightRetryAfter: a.int("inFlightRetryAfter", options.inFlightRetryAfter ?? 1, 0, a.MAX),
      details: options.details ?? true,
    };
    if (this.options.failure !== "open" && this.options.failure !== "closed") {
      throw new RangeError(`invalid failure '${String(options.failure)}': "open" or "closed"`);
    }
    if (this.options.tag !== null) checkKeyPart("tag", this.options.tag);
  }

  private add(limit: Limit): this {
    if (!NAME.test(limit.name)) throw new RangeError(`invalid limit name '${limit.name}': 1 to 64 letters, digits, '_', '.', '-'`);
    if (this.limits.some((l) => l.name === limit.name)) throw new RangeError(`limit '${limit.name}' is defined twice`);
    if (limit.options.global && this.options.tag === null) throw new RangeError(`global limit '${limit.name}' needs the policy's fixed tag`);
    if (limit.kind === "lockout" || this.limits.some((l) => l.kind === "lockout")) {
      if (this.limits.length > 0) throw new RangeError("a lockout (RL.LOCKCOUNT) stands alone in its policy");
    }
    if (this.limits.length >= a.MAX_RULES) throw new RangeError(`too many limits: at most ${a.MAX_RULES}`);
    this.limits.push(limit);
    this.compiled = null;
    return this;
  }

  /** At most `count` units in any `window` ms (sliding-window log; RL.CHECK). */
  slidingWindow(name: string, count: number, window: number, options: LimitOptions = {}): this {
    a.int(`count of '${name}'`, count, 1, a.MAX);
    a.duration(`window of '${name}'`, window);
    return this.add({ name, kind: "slidingWindow", limit: count, window, options });
  }

  /** `rate` units per `per` ms, `burst` at once (token bucket, GCRA; RL.THROTTLE `burst rate per`). */
  tokenBucket(name: string, rate: number, per: number, burst: number, options: LimitOptions = {}): this {
    a.int(`rate of '${name}'`, rate, 1, a.MAX);
    a.duration(`per of '${name}'`, per);
    a.int(`burst of '${name}'`, burst, 1, a.MAX);
    b.throttle("RL.THROTTLE", name, { burst, count: rate, window: per }); // the module's exact-arithmetic bounds
    return this.add({ name, kind: "tokenBucket", limit: rate, window: per, burst, options });
  }

  /**
   * At most `limit` units per natural `period` in `zone` (RL.QUOTA). `zone`
   * `null`: each call names it (`zone` option). Periods of one zone share a clause.
   */
  quota(name: string, zone: string | null, period: Period, limit: number, options: LimitOptions = {}): this {
    if (zone !== null) a.zone(zone);
    if (!PERIODS.includes(period)) throw new RangeError(`invalid period '${period}': expected one of ${PERIODS.join(", ")}`);
    a.int(`limit of '${name}'`, limit, 0, a.MAX);
    return this.add({ name, kind: "quota", limit, window: NOMINAL_PERIOD_MS[period], zone, period, options });
  }

  /** At most `limit` calls in flight; each holds a lease of `ttl` ms until its permit closes (RL.LEASE). */
  concurrency(name: string, limit: number, ttl: number, options: LimitOptions = {}): this {
    a.int(`limit of '${name}'`, limit, 1, a.MAX);
    a.duration(`ttl of '${name}'`, ttl);
    return this.add({ name, kind: "concurrency", limit, window: null, ttl, options });
  }

  /** `max` calls per `window` ms (started by the first); the next one locks the key for `lockTime` ms (RL.LOCKCOUNT). */
  lockout(name: string, max: number, window: number, lockTime: number): this {
    a.int(`max of '${name}'`, max, 0, a.MAX);
    a.duration(`window of '${name}'`, window);
    a.duration(`lockTime of '${name}'`, lockTime);
    return this.add({ name, kind: "lockout", limit: max, window, lockTime, options: { problem: "locked" } });
  }

  /** Changes a limit's number at run time (count, rate, quota limit, in-flight limit, max); counts are kept. */
  setLimit(name: string, value: number): this {
    const l = this.limits.find((x) => x.name === name);
    if (!l) throw new RangeError(`no limit '${name}' in policy '${this.name}'`);
    a.int(`limit of '${name}'`, value, l.kind === "quota" || l.kind === "lockout" ? 0 : 1, a.MAX);
    l.limit = value;
    this.compiled = null;
    return this;
  }

  /** The argument templates of this policy (rebuilt after a change). */
  compile(): Compiled {
    return (this.compiled ??= compile(this));
  }

  /**
   * This policy bound to `key` (and cost, estimate, zone, subkeys), for
   * deciding several policies in one call:
   * `limiter.decideAll([perIp.bind(ip), perPhone.bind(phone)])`.
   */
  bind(key: string, options: DecideOptions = {}): PolicyCall {
    return Object.freeze({ policy: this, key, options });
  }

  /** Whether a call must hold a permit (an in-flight limit or an estimate to settle). */
  get needsPermit(): boolean {
    return this.limits.some((l) => l.kind === "concurrency" || l.options.cost === "estimate");
  }
}

function checkKeyPart(what: string, v: unknown): string {
  // An empty key or one starting with '}' would make an empty hash tag, so
  // the policy's keys would hash apart and RL.ALL would get CROSSSLOT.
  if (typeof v !== "string" || v.length === 0 || v.startsWith("}")) {
    throw new RangeError(`invalid ${what} '${String(v)}': a non-empty string not starting with '}'`);
  }
  return v;
}

/**
 * A policy compiled to argument templates (once, and again after a
 * `setLimit`): sliding windows on one key share a CHECK clause, quota
 * periods of one zone a QUOTA clause; every number is checked and turned
 * into a string here, so a decision only adds keys, zone, cost and token.
 */
export interface Group {
  readonly kind: "check" | "throttle" | "quota" | "lease";
  /** The clause word of RL.ALL. */
  readonly word: "CHECK" | "THROTTLE" | "QUOTA" | "LEASE";
  /** The command deciding this group alone (and settling it). */
  readonly command: "RL.CHECK" | "RL.THROTTLE" | "RL.QUOTA" | "RL.LEASE";
  readonly limits: readonly Limit[];
  readonly costKind: "request" | "estimate";
  /** The group's key is `<base>:<name>` (plus `:<subkey>` when `subkey`). */
  readonly name: string;
  readonly global: boolean;
  readonly subkey: boolean;
  /** The rules after key/now (after the zone for a quota). */
  readonly rules: readonly string[];
  /** A quota's zone; null: per call. */
  readonly zone: string | null;
  /** The largest admission cost the module takes for this group. */
  readonly maxCost: number;
  /** The largest settlement (REFUND/DEBIT) cost. */
  readonly maxSettle: number;
}

export interface Compiled {
  readonly groups: readonly Group[];
  readonly rules: number;
  readonly lockout: Limit | null;
  readonly hasLease: boolean;
}

export function compile(policy: Policy): Compiled {
  if (policy.limits.length === 0) throw new RangeError(`policy '${policy.name}' has no limit`);
  const first = policy.limits[0];
  if (first.kind === "lockout") return { groups: [], rules: 1, lockout: first, hasLease: false };
  type Draft = { kind: LimitKind; limits: Limit[]; costKind: "request" | "estimate"; shareable: boolean };
  const drafts: Draft[] = [];
  for (const l of policy.limits) {
    const costKind = l.options.cost ?? "request";
    // Limits of one kind on one key share a clause (and its key): sliding
    // windows one CHECK, token buckets one THROTTLE, quotas of one zone one
    // QUOTA -- the grouping of the Java and Python packages, so the three
    // write the same keys.
    const shareable = !l.options.subkey && (l.kind === "slidingWindow" || l.kind === "tokenBucket" || l.kind === "quota");
    const g = shareable
      ? drafts.find(
          (x) =>
            x.shareable &&
            x.kind === l.kind &&
            x.costKind === costKind &&
            !!x.limits[0].options.global === !!l.options.global &&
            x.limits[0].zone === l.zone &&
            (l.kind !== "quota" || !x.limits.some((y) => y.period === l.period)) &&
            // One hash field per window: a bucket of the same window takes its own clause.
            (l.kind !== "tokenBucket" || !x.limits.some((y) => y.window === l.window)),
        )
      : undefined;
    if (g) g.limits.push(l);
    else drafts.push({ kind: l.kind, limits: [l], costKind, shareable });
  }
  const groups = drafts.map((g): Group => {
    const base = { limits: g.limits, costKind: g.costKind, name: g.limits[0].name, global: !!g.limits[0].options.global, subkey: !!g.limits[0].options.subkey };
    const minOf = (f: (l: Limit) => number) => Math.min(...g.limits.map(f));
    switch (g.kind) {
      case "slidingWindow":
        return { ...base, kind: "check", word: "CHECK", command: "RL.CHECK", zone: null, rules: g.limits.flatMap((l) => [String(l.limit), String(l.window)]), maxCost: Math.min(minOf((l) => l.limit), a.MAX_UNIT_COST), maxSettle: a.MAX_UNIT_COST };
      case "tokenBucket":
        return { ...base, kind: "throttle", word: "THROTTLE", command: "RL.THROTTLE", zone: null, rules: g.limits.flatMap((l) => [String(l.burst), String(l.limit), String(l.window)]), maxCost: minOf((l) => l.burst!), maxSettle: a.MAX };
      case "quota":
        return { ...base, kind: "quota", word: "QUOTA", command: "RL.QUOTA", zone: g.limits[0].zone ?? null, rules: g.limits.flatMap((l) => [l.period!.toUpperCase(), String(l.limit)]), maxCost: a.MAX, maxSettle: a.MAX };
      case "concurrency": {
        const l = g.limits[0];
        return { ...base, kind: "lease", word: "LEASE", command: "RL.LEASE", zone: null, rules: [String(l.limit), String(l.ttl)], maxCost: Math.min(l.limit, a.MAX_UNIT_COST), maxSettle: 0 };
      }
      default:
        throw new RangeError(`unexpected limit kind ${g.kind}`);
    }
  });
  // Built from checked limits; the throttle rules' exact-arithmetic bounds are checked by build.ts.
  for (const g of groups) if (g.kind === "throttle") b.throttle("RL.THROTTLE", "k", g.limits.map((l) => ({ burst: l.burst!, count: l.limit, window: l.window! })));
  return { groups, rules: policy.limits.length, lockout: null, hasLease: groups.some((g) => g.kind === "lease") };
}

/** The key base of a call: `<prefix><policy>:{<key>}` or, with a tag, `<prefix><policy>:{<tag>}:<key>`. */
export function keyBase(policy: Policy, key: string): string {
  checkKeyPart("key", key);
  const { prefix, tag } = policy.options;
  return tag === null ? `${prefix}${policy.name}:{${key}}` : `${prefix}${policy.name}:{${tag}}:${key}`;
}

export function groupKey(policy: Policy, base: string, g: Group | Limit, subkeys?: Readonly<Record<string, string>>): string {
  const global = "global" in g ? g.global : !!g.options.global;
  const subkey = "subkey" in g ? g.subkey : !!g.options.subkey;
  let k = global ? `${policy.options.prefix}${policy.name}:{${policy.options.tag}}:${g.name}` : `${base}:${g.name}`;
  if (subkey) {
    const sub = subkeys?.[g.name];
    if (typeof sub !== "string" || sub.length === 0) throw new RangeError(`limit '${g.name}' needs subkeys.${g.name}`);
    k += `:${sub}`;
  }
  return k;
}
