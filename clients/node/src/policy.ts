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
import { parseLimits } from "./text";

export type FailureMode = "open" | "closed" | "local";

export interface PolicyOptions {
  /** Put before every key (an app's namespace; `RL_PREFIX`). */
  readonly prefix?: string;
  /** A fixed hash tag for every key of the policy (required by `global` limits). */
  readonly tag?: string;
  /**
   * Redis slow or down: `"open"` lets the call through, `"closed"` refuses it
   * (503), `"local"` decides it in this process on the limiter's local backend
   * (exact within one instance, each instance alone). Default `"closed"`.
   */
  readonly failure?: FailureMode;
  /** `Retry-After` seconds when an in-flight (lease) limit binds a refusal. Default 1. */
  readonly inFlightRetryAfter?: number;
  /**
   * Ask RL.ALL for every limit's state (`DETAILS`, for the `RateLimit`
   * headers). Default true; false leaves `decision.limits` with the binding
   * limit only (and works with module builds older than DETAILS).
   */
  readonly details?: boolean;
  /** Limits as text, each a sliding window: `"5/minute;100/hour"` (text.ts, `parseLimits`). */
  readonly limits?: string;
  /**
   * Count only one outcome: every call is charged up front and given back
   * (one RL.ALL ... REFUND) when its permit closes with the other outcome
   * (`permit.failed()`/`succeeded()`; adapters: a throw or a status ≥ 400 is
   * a failure). Needs a window, bucket or quota; default: every call counts.
   */
  readonly counts?: "failures" | "successes";
}

export interface LimitOptions {
  /**
   * What one call costs on this limit: `"request"` (the call's `cost`,
   * default 1) or `"estimate"` (the call's `estimate`, settled to the real
   * usage when the permit closes: the token budget of an LLM call).
   */
  readonly cost?: "request" | "estimate";
  /** One counter for every key of the policy (the policy needs a fixed `tag`). */
  readonly shared?: boolean;
  /** @deprecated the former name of `shared`. */
  readonly global?: boolean;
  /** The key takes a per-call discriminator: `subkeys[name]` (e.g. a body hash for duplicates). */
  readonly subkey?: boolean;
  /** Problem type slug sent when this limit refuses (e.g. `"duplicate"`); default `"rate-limited"`. */
  readonly problem?: string;
}

// The option names each takes: an unknown one (a typo such as `costt`) is a
// TypeError, as Python's keyword arguments refuse it, never silently ignored.
const POLICY_OPTIONS = ["prefix", "tag", "failure", "inFlightRetryAfter", "details", "limits", "counts"];
const LIMIT_OPTIONS = ["cost", "shared", "global", "subkey", "problem"];

function knownOptions(of: string, options: object, names: readonly string[]): void {
  const unknown = Object.keys(options ?? {}).find((k) => !names.includes(k));
  if (unknown !== undefined) {
    throw new TypeError(`unknown option '${unknown}' of ${of}: expected ${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}`);
  }
}

export type LimitKind = "slidingWindow" | "tokenBucket" | "quota" | "concurrency" | "lockout";

export interface Limit {
  readonly name: string;
  readonly kind: LimitKind;
  /** The limit in units (`q` of `RateLimit-Policy`) in force: count, rate, quota limit, in-flight limit, calls before lockout. */
  limit: number;
  /** The limit as defined (or last `setLimit`); `limit` differs while a runtime override applies. */
  base: number;
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

// The rules of the Python and Java clients (one definition is accepted or
// refused alike by all three): a policy name is any non-empty string without
// braces (they would move the hash tag); a limit name is printable ASCII
// without braces, quotes, commas, semicolons or spaces (it is a RateLimit
// header item's name and part of a key).
const LIMIT_NAME = /^[\x21-\x7e]+$/;
const NOT_IN_LIMIT_NAME = /[{}",;]/;

/** Whether a limit is one counter for every key (`shared`, formerly `global`). */
export const isShared = (l: Limit): boolean => !!(l.options.shared ?? l.options.global);

export class Policy {
  readonly name: string;
  readonly options: Required<Omit<PolicyOptions, "tag" | "limits" | "counts">> & { tag: string | null; counts: "failures" | "successes" | null };
  readonly limits: Limit[] = [];
  private compiled: Compiled | null = null;

  constructor(name: string, options: PolicyOptions = {}) {
    if (typeof name !== "string" || name.length === 0 || /[{}]/.test(name)) {
      throw a.invalid("name", new RangeError(`invalid policy name '${String(name)}': non-empty, without braces`));
    }
    this.name = name;
    knownOptions(`policy '${name}'`, options, POLICY_OPTIONS);
    this.options = {
      prefix: options.prefix ?? "",
      tag: options.tag ?? null,
      failure: options.failure ?? "closed",
      inFlightRetryAfter: a.int("inFlightRetryAfter", options.inFlightRetryAfter ?? 1, 0, a.MAX),
      details: options.details ?? true,
      counts: options.counts ?? null,
    };
    if (this.options.counts !== null && this.options.counts !== "failures" && this.options.counts !== "successes") {
      throw a.invalid("counts", new RangeError(`invalid counts '${String(this.options.counts)}': "failures", "successes" or absent (every call)`));
    }
    if (this.options.failure !== "open" && this.options.failure !== "closed" && this.options.failure !== "local") {
      throw new RangeError(`invalid failure '${String(options.failure)}': "open", "closed" or "local"`);
    }
    if (typeof this.options.prefix !== "string" || /[{}]/.test(this.options.prefix)) {
      throw a.invalid("prefix", new RangeError(`invalid prefix '${String(this.options.prefix)}': braces would move the hash tag`));
    }
    const tag = this.options.tag;
    if (tag !== null && (typeof tag !== "string" || tag.length === 0 || /[{}]/.test(tag))) {
      throw a.invalid("tag", new RangeError(`invalid tag '${String(tag)}': non-empty, without braces`));
    }
    if (options.limits !== undefined) for (const l of parseLimits(options.limits)) this.slidingWindow(l.name, l.count, l.window);
  }

  private add(limit: Omit<Limit, "base">): this {
    const l: Limit = { ...limit, base: limit.limit };
    knownOptions(`limit '${l.name}'`, l.options, LIMIT_OPTIONS);
    if (this.limits.some((x) => x.name === l.name)) throw a.invalid("limit_name", new RangeError(`limit '${l.name}' is defined twice`));
    if (isShared(l) && this.options.tag === null) throw a.invalid("tag", new RangeError(`shared limit '${l.name}' needs the policy's fixed tag`));
    if (l.kind === "lockout" || this.limits.some((x) => x.kind === "lockout")) {
      if (this.limits.length > 0) throw a.invalid("limits", new RangeError("a lockout (RL.LOCKCOUNT) stands alone in its policy"));
    }
    if (this.limits.length >= a.MAX_RULES) throw a.invalid("limits", new RangeError(`too many limits: at most ${a.MAX_RULES}`));
    // Compiled now, so a definition the clauses cannot hold (two concurrency
    // limits on one key, two buckets or quotas of one period) is refused here.
    compile(this, [...this.limits, l]);
    this.limits.push(l);
    this.compiled = null;
    return this;
  }

  /** At most `count` units in any `window` ms (sliding-window log; RL.CHECK). */
  slidingWindow(name: string, count: number, window: number, options: LimitOptions = {}): this {
    limitName(name);
    a.int(`count of '${name}'`, count, 1, a.MAX);
    a.duration(`window of '${name}'`, window);
    return this.add({ name, kind: "slidingWindow", limit: count, window, options });
  }

  /** `rate` units per `per` ms, `burst` at once (token bucket, GCRA; RL.THROTTLE `burst rate per`). */
  tokenBucket(name: string, rate: number, per: number, burst: number, options: LimitOptions = {}): this {
    limitName(name);
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
    limitName(name);
    if (zone !== null) a.zone(zone);
    if (!PERIODS.includes(period)) throw a.invalid("period", new RangeError(`invalid period '${period}': expected one of ${PERIODS.join(", ")}`));
    a.int(`limit of '${name}'`, limit, 0, a.MAX);
    return this.add({ name, kind: "quota", limit, window: NOMINAL_PERIOD_MS[period], zone, period, options });
  }

  /** At most `limit` calls in flight; each holds a lease of `ttl` ms until its permit closes (RL.LEASE). */
  concurrency(name: string, limit: number, ttl: number, options: LimitOptions = {}): this {
    limitName(name);
    // A lease's units are the call's cost (leases held), never an estimate.
    if (options.cost === "estimate") throw a.invalid("cost", new RangeError(`concurrency limit '${name}' cannot be costed by the estimate`));
    a.int(`limit of '${name}'`, limit, 1, a.MAX);
    a.duration(`ttl of '${name}'`, ttl);
    return this.add({ name, kind: "concurrency", limit, window: null, ttl, options });
  }

  /** `max` calls per `window` ms (started by the first); the next one locks the key for `lockTime` ms (RL.LOCKCOUNT). */
  lockout(name: string, max: number, window: number, lockTime: number): this {
    limitName(name);
    a.int(`max of '${name}'`, max, 0, a.MAX);
    a.duration(`window of '${name}'`, window);
    a.duration(`lockTime of '${name}'`, lockTime);
    return this.add({ name, kind: "lockout", limit: max, window, lockTime, options: { problem: "locked" } });
  }

  /** Changes a limit's number at run time (count, rate, quota limit, in-flight limit, max); counts are kept. */
  setLimit(name: string, value: number): this {
    const l = this.limits.find((x) => x.name === name);
    if (!l) throw a.invalid("limit_name", new RangeError(`no limit '${name}' in policy '${this.name}'`));
    a.int(`limit of '${name}'`, value, lowest(l), a.MAX);
    l.base = value;
    l.limit = value;
    this.compiled = null;
    return this;
  }

  /**
   * Applies runtime overrides (`{ limit name: q }`, the store's values;
   * limits not named go back to their `base`). Returns whether anything changed.
   */
  applyOverrides(values: Readonly<Record<string, number>>): boolean {
    let changed = false;
    for (const l of this.limits) {
      const q = values[l.name] ?? l.base;
      if (q !== l.limit) {
        l.limit = q;
        changed = true;
      }
    }
    if (changed) this.compiled = null;
    return changed;
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
    return this.options.counts !== null || this.limits.some((l) => l.kind === "concurrency" || l.options.cost === "estimate");
  }
}

/** The smallest `q` a limit takes: 0 for a quota or lockout (refuse everything), else 1. */
export const lowest = (l: Pick<Limit, "kind">): number => (l.kind === "quota" || l.kind === "lockout" ? 0 : 1);

function limitName(name: unknown): void {
  if (typeof name !== "string" || !LIMIT_NAME.test(name) || NOT_IN_LIMIT_NAME.test(name)) {
    throw a.invalid("limit_name", new RangeError(`invalid limit name '${String(name)}': non-empty printable ASCII, without braces, quotes, commas, semicolons or spaces`));
  }
}

function checkKeyPart(what: string, v: unknown): string {
  // An empty key or one starting with '}' would make an empty hash tag, so
  // the policy's keys would hash apart and RL.ALL would get CROSSSLOT.
  if (typeof v !== "string" || v.length === 0 || v.startsWith("}")) {
    throw a.invalid(what, new RangeError(`invalid ${what} '${String(v)}': a non-empty string not starting with '}'`));
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

export function compile(policy: Policy, all: readonly Limit[] = policy.limits): Compiled {
  if (all.length === 0) throw a.invalid("limits", new RangeError(`policy '${policy.name}' has no limit`));
  // Counting one outcome is a refund of the other: only windows, buckets and quotas refund.
  if (policy.options.counts !== null && (all.some((l) => l.kind === "lockout") || !all.some((l) => l.kind === "slidingWindow" || l.kind === "tokenBucket" || l.kind === "quota"))) {
    throw a.invalid("counts", new RangeError(`policy '${policy.name}' counts ${policy.options.counts} only: it needs a window, bucket or quota (a lockout cannot refund)`));
  }
  const first = all[0];
  if (first.kind === "lockout") return { groups: [], rules: 1, lockout: first, hasLease: false };
  type Draft = { kind: LimitKind; limits: Limit[]; costKind: "request" | "estimate"; shareable: boolean };
  const drafts: Draft[] = [];
  for (const l of all) {
    const costKind = l.options.cost ?? "request";
    // Limits of one kind on one key share a clause (and its key): sliding
    // windows one CHECK, token buckets one THROTTLE, quotas of one zone one
    // QUOTA -- the grouping of the Java and Python packages, so the three
    // write the same keys.
    const shareable = !l.options.subkey && (l.kind === "slidingWindow" || l.kind === "tokenBucket" || l.kind === "quota");
    const g = shareable
      ? drafts.find(
          (x) => x.shareable && x.kind === l.kind && x.costKind === costKind && isShared(x.limits[0]) === isShared(l) && x.limits[0].zone === l.zone,
        )
      : undefined;
    // One clause keeps one state per period (a bucket's window, a quota's
    // period): two of one period on one key are refused, as in Python and Java.
    const twin = g?.limits.find((y) => (l.kind === "quota" ? y.period === l.period : l.kind === "tokenBucket" && y.window === l.window));
    if (twin) throw a.invalid("limits", new RangeError(`${l.kind === "quota" ? "quotas" : "token buckets"} '${twin.name}' and '${l.name}' have the same period`));
    if (g) g.limits.push(l);
    else drafts.push({ kind: l.kind, limits: [l], costKind, shareable });
  }
  if (drafts.filter((x) => x.kind === "concurrency" && !isShared(x.limits[0])).length > 1) {
    throw a.invalid("limits", new RangeError("at most one per-key concurrency limit per policy"));
  }
  const groups = drafts.map((g): Group => {
    const base = { limits: g.limits, costKind: g.costKind, name: g.limits[0].name, global: isShared(g.limits[0]), subkey: !!g.limits[0].options.subkey };
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
  return { groups, rules: all.length, lockout: null, hasLease: groups.some((g) => g.kind === "lease") };
}

/** The key base of a call: `<prefix><policy>:{<key>}` or, with a tag, `<prefix><policy>:{<tag>}:<key>`. */
export function keyBase(policy: Policy, key: string): string {
  checkKeyPart("key", key);
  const { prefix, tag } = policy.options;
  return tag === null ? `${prefix}${policy.name}:{${key}}` : `${prefix}${policy.name}:{${tag}}:${key}`;
}

export function groupKey(policy: Policy, base: string, g: Group | Limit, subkeys?: Readonly<Record<string, string>>): string {
  const global = "global" in g ? g.global : isShared(g);
  const subkey = "subkey" in g ? g.subkey : !!g.options.subkey;
  let k = global ? `${policy.options.prefix}${policy.name}:{${policy.options.tag}}:${g.name}` : `${base}:${g.name}`;
  if (subkey) {
    const sub = subkeys?.[g.name];
    if (typeof sub !== "string" || sub.length === 0) throw a.invalid("subkeys", new RangeError(`limit '${g.name}' needs subkeys.${g.name} (a non-empty string)`));
    k += `:${sub}`;
  }
  return k;
}
