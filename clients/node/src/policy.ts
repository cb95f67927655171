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
import type { Clause, Period } from "./build";
import { PERIODS } from "./build";

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
    return this;
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

export interface CallShape {
  readonly cost: number;
  readonly estimate: number;
  readonly zone?: string;
  readonly subkeys?: Readonly<Record<string, string>>;
}

/** One clause of the decision and the limits its rules stand for, in rule order. */
export interface PlannedClause {
  readonly clause: Clause;
  readonly limits: readonly Limit[];
  readonly costKind: "request" | "estimate";
}

export interface Plan {
  readonly clauses: readonly PlannedClause[];
  /** Set for a lockout policy (RL.LOCKCOUNT). */
  readonly lockout?: { readonly limit: Limit; readonly lockKey: string; readonly countKey: string };
}

export function keyOf(policy: Policy, key: string, limit: Limit, subkeys?: Readonly<Record<string, string>>): string {
  checkKeyPart("key", key);
  const { prefix, tag } = policy.options;
  let k = tag === null ? `${prefix}${policy.name}:{${key}}` : limit.options.global ? `${prefix}${policy.name}:{${tag}}` : `${prefix}${policy.name}:{${tag}}:${key}`;
  k += `:${limit.name}`;
  if (limit.options.subkey) {
    const sub = subkeys?.[limit.name];
    if (typeof sub !== "string" || sub.length === 0) throw new RangeError(`limit '${limit.name}' needs subkeys.${limit.name}`);
    k += `:${sub}`;
  }
  return k;
}

/** The clauses a call sends: sliding windows on one key share a CHECK clause, quota periods of one zone a QUOTA clause. */
export function plan(policy: Policy, key: string, shape: CallShape, token: string | null): Plan {
  if (policy.limits.length === 0) throw new RangeError(`policy '${policy.name}' has no limit`);
  const first = policy.limits[0];
  if (first.kind === "lockout") {
    const base = keyOf(policy, key, first);
    return { clauses: [], lockout: { limit: first, lockKey: `${base}:lock`, countKey: `${base}:count` } };
  }
  type Group = { kind: LimitKind; limits: Limit[]; key: string; costKind: "request" | "estimate"; zone?: string; shareable: boolean };
  const groups: Group[] = [];
  for (const l of policy.limits) {
    const costKind = l.options.cost ?? "request";
    const shareable = !l.options.subkey && (l.kind === "slidingWindow" || l.kind === "quota");
    let zone: string | undefined;
    if (l.kind === "quota") {
      zone = l.zone ?? shape.zone;
      if (zone === undefined) throw new RangeError(`quota '${l.name}' takes its zone per call: pass zone`);
      a.zone(zone);
    }
    const g = shareable
      ? groups.find(
          (x) =>
            x.shareable &&
            x.kind === l.kind &&
            x.costKind === costKind &&
            !!x.limits[0].options.global === !!l.options.global &&
            x.zone === zone &&
            (l.kind !== "quota" || !x.limits.some((y) => y.period === l.period)),
        )
      : undefined;
    if (g) g.limits.push(l);
    else groups.push({ kind: l.kind, limits: [l], key: keyOf(policy, key, l, shape.subkeys), costKind, zone, shareable });
  }
  const clauses = groups.map((g): PlannedClause => {
    const cost = g.costKind === "estimate" ? shape.estimate : shape.cost;
    const c = cost === 1 ? undefined : cost;
    switch (g.kind) {
      case "slidingWindow":
        return { limits: g.limits, costKind: g.costKind, clause: { kind: "check", key: g.key, rules: g.limits.map((l) => ({ count: l.limit, window: l.window! })), cost: c } };
      case "tokenBucket":
        return { limits: g.limits, costKind: g.costKind, clause: { kind: "throttle", key: g.key, rules: g.limits.map((l) => ({ burst: l.burst!, count: l.limit, window: l.window! })), cost: c } };
      case "quota":
        return {
          limits: g.limits,
          costKind: g.costKind,
          clause: { kind: "quota", key: g.key, zone: g.zone!, periods: Object.fromEntries(g.limits.map((l) => [l.period!, l.limit])), cost: c },
        };
      case "concurrency": {
        const l = g.limits[0];
        return { limits: g.limits, costKind: g.costKind, clause: { kind: "lease", key: g.key, limit: l.limit, ttl: l.ttl!, token: token ?? undefined, cost: c } };
      }
      default:
        throw new RangeError(`unexpected limit kind ${g.kind}`);
    }
  });
  return { clauses };
}
