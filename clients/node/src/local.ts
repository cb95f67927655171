/**
 * A local backend: the RL commands answered in process, for tests without
 * Redis (`redis-ratelimit/local`).
 *
 * `new RateLimiter(new LocalBackend())` decides every limit kind — windows
 * (RL.CHECK), buckets (RL.THROTTLE), quotas (RL.QUOTA, in their zones),
 * concurrency (RL.LEASE/RELEASE/RENEW), lockouts (RL.LOCKCOUNT), several at
 * once (RL.ALL ... DETAILS, REFUND, DEBIT) and every peek — with SPEC.md's
 * formulas, so a test sees the decisions, `RateLimit` headers and
 * `Retry-After` the module gives. The golden sequence cases
 * (clients/conformance/sequences/) run against it and against the real
 * module, in every client (Python: redis_rl.local, the same design).
 *
 * The clock is injectable (`ManualClock`): `now = *` is its time, and keys
 * expire by it. It trusts the argv the client builds (the client validates
 * before sending), keeps exact expiries (no decision depends on SPEC's
 * grid), and is one process's memory: for tests, not a shared limit.
 *
 * It is also what the `local` Redis-down mode decides on (a policy's
 * `failure: "local"`): the same commands the limiter sends to Redis, so the
 * same decisions, costs, estimates, leases and `Retry-After`. For that its
 * memory is bounded (`maxKeys` keys, `maxEntries` entries: a sorted-set member
 * per unit of a window or lease, a hash field, a string): a key is dropped
 * only when it expires, as in Redis, never to make room; a command that would
 * grow it past the bound is undone and throws `LocalBackendFullError` (its
 * `retryAfter`: ms until the earliest key expires), which the local mode
 * answers as a refusal. The same bounds and error as the Java and Python
 * local backends.
 */
import { LocalBackendFullError } from "./errors";
import type { Call, Transport } from "./transport";
import { RateLimiter } from "./limiter";
import type { RateLimiterOptions } from "./limiter";

/** A clock a test moves by hand (ms since the epoch). */
export class ManualClock {
  constructor(public ms: number = 1_767_225_600_000 /* 2026-01-01T00:00:00Z */) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

type Clock = { now(): number };
type Row = [number, number, number, number, number, number]; // limited, rule, limit, remaining, retry_after, reset_after

interface Entry {
  kind: "zset" | "hash" | "string";
  value: any;
  expireAt: number | null;
}

interface Clause {
  kind: string;
  key: string;
  args: string[];
  cost: number;
  token: string | null;
  rows: Row[];
  admitted: boolean;
  apply: () => void;
  rules?: [number, number, number][];
  fields?: string[];
}

const KINDS = new Set(["CHECK", "THROTTLE", "QUOTA", "LEASE"]);
const NS = 1_000_000n;
const ceil = (x: number) => Math.ceil(x);
const ceilDiv = (a: bigint, b: bigint) => (a >= 0n ? (a + b - 1n) / b : -(-a / b));
const floorDiv = (a: bigint, b: bigint) => (a >= 0n ? a / b : -((-a + b - 1n) / b));

/** SPEC's binding rule (0-based): refused, -1 first, then the largest retry; admitted, the fewest left, then the longest reset. */
function binding(rows: Row[], admitted: boolean, per = 1): number {
  const idx = rows.map((_, i) => i);
  if (!admitted) {
    const refusing = idx.filter((i) => rows[i][0] === 1);
    const never = refusing.filter((i) => rows[i][4] === -1);
    if (never.length) return never[0];
    return refusing.reduce((b, i) => (rows[i][4] > rows[b][4] ? i : b));
  }
  return idx.reduce((b, i) => {
    const [ri, rb] = [Math.floor(rows[i][3] / per), Math.floor(rows[b][3] / per)];
    return ri < rb || (ri === rb && rows[i][5] > rows[b][5]) ? i : b;
  });
}

function units(z: Map<string, number>, token: string | null): string[] {
  if (token === null || !z.has(token)) return [];
  const out = [token];
  for (let j = 2; z.has(`${token}#${j}`); j += 1) out.push(`${token}#${j}`);
  return out;
}

/* ---------------- calendar buckets (RL.QUOTA) ---------------- */

const formats = new Map<string, Intl.DateTimeFormat>();

/** The local wall time of `ms` in `zone` as [y, m, d, h, mi, s], and the offset in seconds. */
function local(zone: string, ms: number): { parts: number[]; offset: number } {
  const fixed = /^([+-])(\d\d):(\d\d)$/.exec(zone);
  let offset: number;
  if (fixed) {
    offset = (fixed[1] === "-" ? -1 : 1) * (Number(fixed[2]) * 3600 + Number(fixed[3]) * 60);
  } else {
    let f = formats.get(zone);
    if (!f) {
      f = new Intl.DateTimeFormat("en-US", {
        timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
        hour: "numeric", minute: "numeric", second: "numeric",
      });
      formats.set(zone, f);
    }
    const p = Object.fromEntries(f.formatToParts(new Date(ms)).map((x) => [x.type, Number(x.value)]));
    const wall = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
    offset = Math.round((wall - Math.floor(ms / 1000) * 1000) / 1000);
  }
  const d = new Date(ms + offset * 1000);
  return {
    parts: [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds()],
    offset,
  };
}

const wallKey = (p: number[]) => p.map((x) => String(x).padStart(2, "0")).join("-");

/** The first instant whose local date is y-m-d (a midnight in a spring-forward gap: the instant of the change). */
function midnight(zone: string, y: number, m: number, d: number): number {
  const target = Date.UTC(y, m - 1, d);
  const want = wallKey([y, m, d, 0, 0, 0]);
  let guess = target - local(zone, target).offset * 1000;
  guess = target - local(zone, guess).offset * 1000;
  if (wallKey(local(zone, guess).parts) === want) return guess;
  let lo = target - 26 * 3_600_000;
  let hi = target + 26 * 3_600_000;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    const p = local(zone, mid).parts;
    if (Date.UTC(p[0], p[1] - 1, p[2]) >= target) hi = mid;
    else lo = mid;
  }
  return hi;
}

function bucket(period: string, zone: string, t: number): { start: number; end: number; field: string } {
  const { parts } = local(zone, t);
  const [y, m, d, h, mi, s] = parts;
  let start: number;
  let end: number;
  if (period === "minute" || period === "hour") {
    start = t - (s * 1000 + (((t % 1000) + 1000) % 1000) + (period === "hour" ? mi * 60_000 : 0));
    end = start + (period === "minute" ? 60_000 : 3_600_000);
  } else {
    const day = new Date(Date.UTC(y, m - 1, d));
    let first: Date;
    let next: Date;
    if (period === "day") {
      first = day;
      next = new Date(Date.UTC(y, m - 1, d + 1));
    } else if (period === "week") {
      first = new Date(Date.UTC(y, m - 1, d - ((day.getUTCDay() + 6) % 7)));
      next = new Date(first.getTime() + 7 * 86_400_000);
    } else if (period === "month") {
      first = new Date(Date.UTC(y, m - 1, 1));
      next = new Date(Date.UTC(y, m, 1));
    } else {
      first = new Date(Date.UTC(y, 0, 1));
      next = new Date(Date.UTC(y + 1, 0, 1));
    }
    const at = (x: Date) => midnight(zone, x.getUTCFullYear(), x.getUTCMonth() + 1, x.getUTCDate());
    start = at(first);
    end = at(next);
  }
  const { parts: sp, offset } = local(zone, start);
  const two = (x: number) => String(x).padStart(2, "0");
  const abs = Math.abs(offset);
  const off = `${offset < 0 ? "-" : "+"}${two(Math.floor(abs / 3600))}:${two(Math.floor((abs % 3600) / 60))}${abs % 60 ? `:${two(abs % 60)}` : ""}`;
  return { start, end, field: `${period}:${sp[0]}-${two(sp[1])}-${two(sp[2])}T${two(sp[3])}:${two(sp[4])}${off}` };
}

/* ---------------- the engine ---------------- */

/** Default bound on the keys held at once. */
export const DEFAULT_MAX_KEYS = 100_000;
/** Default bound on the entries held at once (sorted-set members: one per unit of a window or lease; hash fields; strings). */
export const DEFAULT_MAX_ENTRIES = 1_000_000;
const GROWING = new Set(["RL.CHECK", "RL.THROTTLE", "RL.QUOTA", "RL.LEASE", "RL.ALL", "RL.LOCKCOUNT"]);

const weightOf = (e: Entry | undefined): number =>
  !e ? 0 : e.value instanceof Map ? e.value.size : typeof e.value === "object" && e.value !== null ? Object.keys(e.value).length : 1;
const copyOf = (v: any): any => (v instanceof Map ? new Map(v) : typeof v === "object" && v !== null ? { ...v } : v);

/** The keys a command reads or writes. */
function touchedBy(name: string, args: readonly string[]): string[] {
  let out: string[];
  if (name === "RL.ALL" || name === "RL.ALLPEEK") out = args.slice(2, 2 + Number(args[1]));
  else if (name === "RL.LOCKCOUNT") out = args.slice(1, 3);
  else if (name === "DEL") out = args.slice(1);
  else if (name === "PING" || name === "COMMAND") out = [];
  else out = args.slice(1, 2);
  return [...new Set(out)];
}

/** The most entries a command can add: a member per unit of COST, a field or string per argument. */
function marginOf(args: readonly string[]): number {
  let m = args.length;
  for (let i = 0; i + 1 < args.length; i += 1) if (args[i].toUpperCase() === "COST" && /^\d+$/.test(args[i + 1])) m += Number(args[i + 1]);
  return m;
}

/** The keyspace and the RL commands, answered in process. A `Transport`: give it to `RateLimiter` as a client. */
export class LocalBackend implements Transport {
  readonly kind = "local";
  readonly clock: Clock;
  readonly keys = new Map<string, Entry>();
  readonly maxKeys: number;
  readonly maxEntries: number;
  /** The entries held (kept up to date per command from the keys it touches). */
  entries = 0;
  private names = 0;
  /** No scan for expired keys before this time (ms): the earliest expiry the last scan saw. */
  private nextSweep = 0;

  /**
   * `clock`: anything with `now()` in ms (default: a `ManualClock` at 2026-01-01T00:00:00Z; pass `Date` for real time).
   * `maxKeys`, `maxEntries`: the bounds on its memory (defaults 100,000 and 1,000,000).
   */
  constructor(options: { clock?: Clock; maxKeys?: number; maxEntries?: number } = {}) {
    this.clock = options.clock ?? new ManualClock();
    this.maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    this.maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    if (!Number.isSafeInteger(this.maxKeys) || !Number.isSafeInteger(this.maxEntries) || this.maxKeys < 1 || this.maxEntries < 1) {
      throw new RangeError("local backend bounds must be at least 1");
    }
  }

  /** The keys held now (expired ones included until a command touches them or a sweep drops them). */
  get size(): number {
    return this.keys.size;
  }

  /** Moves a `ManualClock` by `ms`. */
  advance(ms: number): void {
    if (!(this.clock instanceof ManualClock)) throw new TypeError("advance() needs the backend's ManualClock");
    this.clock.advance(ms);
  }

  /** Forgets every key (the clock stays). */
  reset(): void {
    this.keys.clear();
    this.entries = 0;
    this.nextSweep = 0;
  }

  /** A `RateLimiter` deciding on this backend (its options as `RateLimiter`'s). Close it at the end (`limiter.close()`). */
  limiter(options: RateLimiterOptions = {}): RateLimiter {
    return new RateLimiter(this, options);
  }

  async send(call: Call): Promise<unknown> {
    return this.execute(call.args);
  }

  async sendAny(args: readonly string[]): Promise<unknown> {
    return this.execute(args);
  }

  async batch(calls: readonly Call[]): Promise<unknown[]> {
    return calls.map((c) => {
      try {
        return this.execute(c.args);
      } catch (e) {
        return e;
      }
    });
  }

  connected(): boolean {
    return true;
  }

  /**
   * One command, as Redis would answer it, counting the entries it adds;
   * near the bound the keys it touches are saved first and put back when it
   * grew past the bound (`LocalBackendFullError`). Only expired keys are ever
   * dropped to make room.
   */
  execute(argv: readonly unknown[]): unknown {
    const args = argv.map(String);
    const name = args[0].toUpperCase();
    const touched = touchedBy(name, args);
    const last = args.at(-1)?.toUpperCase();
    const grows = GROWING.has(name) && last !== "REFUND" && !(name === "RL.ALL" && args.at(-2)?.toUpperCase() === "REFUND");
    const t = this.clock.now();
    const margin = marginOf(args);
    const tight = () => this.keys.size + touched.length > this.maxKeys || this.entries + margin > this.maxEntries;
    let saved: Map<string, Entry | undefined> | null = null;
    if (grows && tight()) {
      this.sweep(t);
      if (tight()) {
        saved = new Map();
        for (const k of touched) {
          const e = this.keys.get(k);
          saved.set(k, e && { kind: e.kind, value: copyOf(e.value), expireAt: e.expireAt });
        }
      }
    }
    const weight = () => touched.reduce((w, k) => w + weightOf(this.keys.get(k)), 0);
    const before = weight();
    let reply: unknown;
    try {
      reply = this.run(args, name);
    } finally {
      this.entries += weight() - before;
    }
    const after = weight();
    if (saved && (this.keys.size > this.maxKeys || (after > before && this.entries > this.maxEntries))) {
      this.entries -= after - before;
      for (const [k, e] of saved) {
        if (e) this.keys.set(k, e);
        else this.keys.delete(k);
      }
      throw new LocalBackendFullError(this.nextSweep <= t ? 1000 : this.nextSweep - t, this.maxKeys, this.maxEntries);
    }
    return reply;
  }

  /** Drops every expired key (at most one scan until the earliest expiry the last one saw). */
  private sweep(t: number): void {
    if (t < this.nextSweep) return;
    let earliest = Infinity;
    for (const [k, e] of this.keys) {
      if (e.expireAt !== null && e.expireAt <= t) {
        this.entries -= weightOf(e);
        this.keys.delete(k);
      } else if (e.expireAt !== null) earliest = Math.min(earliest, e.expireAt);
    }
    this.nextSweep = earliest === Infinity ? 0 : earliest; // nothing expires: scan again next time
  }

  private run(args: string[], name: string): unknown {
    const t = this.clock.now();
    const single: Record<string, string> = {
      "RL.CHECK": "CHECK", "RL.PEEK": "CHECK", "RL.THROTTLE": "THROTTLE", "RL.THROTTLEPEEK": "THROTTLE",
      "RL.QUOTA": "QUOTA", "RL.QUOTAPEEK": "QUOTA", "RL.LEASE": "LEASE", "RL.LEASEPEEK": "LEASE",
    };
    if (single[name]) {
      const kind = single[name];
      const peek = name.endsWith("PEEK");
      const now = this.now(args[2], t);
      let rest = args.slice(3);
      let mode: string | null = null;
      const last = rest.at(-1)?.toUpperCase();
      if (last === "REFUND" || last === "DEBIT") {
        mode = last;
        rest = rest.slice(0, -1);
      }
      let c = this.clause(kind, args[1], rest, now, t, peek || mode !== null);
      if (mode === "REFUND") this.refund(c, now, t);
      else if (mode === "DEBIT") this.debit(c, now, t);
      if (mode !== null) c = this.clause(kind, args[1], withCost(rest, 0), now, t, true);
      else if (c.admitted && !peek) c.apply();
      const b = binding(c.rows, c.admitted);
      const row: unknown[] = [...c.rows[b]];
      row[0] = c.admitted ? 0 : 1;
      row[1] = b + 1;
      if (name === "RL.LEASE") row.push(c.admitted ? c.token : null);
      return row;
    }
    switch (name) {
      case "RL.ALL":
      case "RL.ALLPEEK":
        return this.all(args, t, name === "RL.ALLPEEK");
      case "RL.RELEASE":
        return this.release(args[1], this.now(args[2], t), t, args.slice(3));
      case "RL.RENEW":
        return this.renew(args[1], this.now(args[2], t), t, Number(args[3]), args.slice(4));
      case "RL.LOCKCOUNT":
        return this.lockcount(t, args[1], args[2], Number(args[3]), Number(args[4]), Number(args[5]));
      case "DEL": {
        let n = 0;
        for (const k of args.slice(1)) if (this.get(k, t)) n += 1;
        for (const k of args.slice(1)) this.keys.delete(k);
        return n;
      }
      case "GET": {
        const e = this.get(args[1], t);
        return e ? String(e.value) : null;
      }
      case "PTTL": {
        const e = this.get(args[1], t);
        return !e ? -2 : e.expireAt === null ? -1 : e.expireAt - t;
      }
      case "HGETALL":
        return [...Object.entries(this.hash(args[1], t))].flat();
      case "HSET": {
        const h = { ...this.hash(args[1], t) };
        let added = 0;
        for (let i = 2; i + 1 < args.length; i += 2) {
          if (!(args[i] in h)) added += 1;
          h[args[i]] = args[i + 1];
        }
        this.keys.set(args[1], { kind: "hash", value: h, expireAt: null });
        return added;
      }
      case "PING":
        return "PONG";
      case "COMMAND":
        return [["rl.all"]]; // COMMAND INFO: every RL command is answered here
      default:
        throw new Error(`ERR unknown command '${args[0]}' (the local backend answers RL.* only)`);
    }
  }

  private now(arg: string, t: number): number {
    return arg === "*" ? t : Number(arg);
  }

  private get(key: string, t: number): Entry | undefined {
    const e = this.keys.get(key);
    if (e && e.expireAt !== null && e.expireAt <= t) {
      this.keys.delete(key);
      return undefined;
    }
    return e;
  }

  private zset(key: string, t: number): Map<string, number> {
    return (this.get(key, t)?.value as Map<string, number>) ?? new Map();
  }

  private hash(key: string, t: number): Record<string, string> {
    return (this.get(key, t)?.value as Record<string, string>) ?? {};
  }

  private put(key: string, kind: Entry["kind"], value: any, expireAt: number | null, keepLonger = true): void {
    const size = value instanceof Map ? value.size : Object.keys(value).length;
    if (size === 0) {
      this.keys.delete(key);
      return;
    }
    const old = this.keys.get(key);
    if (keepLonger && old?.expireAt != null && expireAt !== null) expireAt = Math.max(old.expireAt, expireAt);
    this.keys.set(key, { kind, value, expireAt });
  }

  private clause(kind: string, key: string, rest: string[], t: number, server: number, peek: boolean): Clause {
    const c: Clause = { kind, key, args: [], cost: 1, token: null, rows: [], admitted: true, apply: () => {} };
    for (let i = 0; i < rest.length; i += 1) {
      const u = rest[i].toUpperCase();
      if (u === "COST") c.cost = Number(rest[++i]);
      else if (u === "TOKEN") c.token = rest[++i];
      else c.args.push(rest[i]);
    }
    if (kind === "CHECK") this.check(c, t, server);
    else if (kind === "THROTTLE") this.throttle(c, t, server);
    else if (kind === "QUOTA") this.quota(c, t, server);
    else this.lease(c, t, server, peek);
    c.admitted = c.rows.every((r) => r[0] === 0);
    return c;
  }

  private check(c: Clause, t: number, server: number): void {
    const rules: [number, number][] = [];
    for (let i = 0; i < c.args.length; i += 2) rules.push([Number(c.args[i]), Number(c.args[i + 1])]);
    const scores = [...this.zset(c.key, server).values()].sort((a, b) => a - b);
    for (const [count, window] of rules) {
      const inside = scores.filter((s) => s > t - window);
      const used = inside.length;
      if (used + c.cost <= count) {
        const newest = Math.max(inside.length ? inside[inside.length - 1] : t - window, c.cost ? t : t - window);
        c.rows.push([0, 0, count, count - used - c.cost, -1, Math.max(0, ceil(newest + window - t))]);
      } else {
        const k = used + c.cost - count;
        const reset = inside.length ? ceil(inside[inside.length - 1] + window - t) : 0;
        c.rows.push([1, 0, count, Math.max(0, count - used), ceil(inside[k - 1] + window - t), Math.max(0, reset)]);
      }
    }
    const longest = Math.max(...rules.map(([, w]) => w));
    c.apply = () => {
      let zs = new Map(this.zset(c.key, server));
      for (let i = 0; i < c.cost; i += 1) zs.set(`l:${++this.names}`, t);
      const x = ceil(Math.max(Math.max(...zs.values()), server) + longest);
      const old = this.keys.get(c.key);
      if (!old || old.expireAt === null || old.expireAt < x) {
        zs = new Map([...zs].filter(([, s]) => s > t - longest));
        this.put(c.key, "zset", zs, x, false);
      } else this.put(c.key, "zset", zs, old.expireAt, false);
    };
  }

  private throttle(c: Clause, t: number, server: number): void {
    const rules: [number, number, number][] = [];
    for (let i = 0; i < c.args.length; i += 3) rules.push([Number(c.args[i]), Number(c.args[i + 1]), Number(c.args[i + 2])]);
    c.rules = rules;
    const h = this.hash(c.key, server);
    const tNs = BigInt(t) * NS;
    const news: bigint[] = [];
    for (const [burst, count, window] of rules) {
      const em = (BigInt(window) * NS) / BigInt(count);
      const tau = em * BigInt(burst);
      const tat = h[String(window)] !== undefined ? BigInt(h[String(window)]) : tNs;
      const base = tat > tNs ? tat : tNs;
      const nw = base + em * BigInt(c.cost);
      news.push(nw);
      const ok = nw - tau <= tNs;
      const ell = ok ? nw : base;
      let remaining = floorDiv(tau - (ell - tNs), em);
      remaining = remaining < 0n ? 0n : remaining > BigInt(burst) ? BigInt(burst) : remaining;
      const reset = ceilDiv(ell - tNs, NS);
      c.rows.push([ok ? 0 : 1, 0, burst, Number(remaining), ok ? -1 : Number(ceilDiv(nw - tau - tNs, NS)), Math.max(0, Number(reset))]);
    }
    c.apply = () => {
      const hs = { ...this.hash(c.key, server) };
      rules.forEach(([, , window], i) => (hs[String(window)] = String(news[i])));
      const top = news.reduce((a, b) => (a > b ? a : b));
      this.put(c.key, "hash", hs, Number(ceilDiv(top, NS)) + Math.max(0, server - t));
    };
  }

  private quota(c: Clause, t: number, server: number): void {
    const zone = c.args[0];
    const h = this.hash(c.key, server);
    const fields: string[] = [];
    const ends: number[] = [];
    for (let i = 1; i + 1 < c.args.length; i += 2) {
      const limit = Number(c.args[i + 1]);
      const { end, field } = bucket(c.args[i].toLowerCase(), zone, t);
      fields.push(field);
      ends.push(end);
      const used = Math.max(0, Number(h[field] ?? "0"));
      if (used + c.cost <= limit) c.rows.push([0, 0, limit, Math.max(0, limit - used - c.cost), -1, end - t]);
      else c.rows.push([1, 0, limit, Math.max(0, limit - used), c.cost > limit ? -1 : end - t, end - t]);
    }
    c.fields = fields;
    c.apply = () => {
      const hs = { ...this.hash(c.key, server) };
      for (const f of fields) hs[f] = String(Math.max(0, Number(hs[f] ?? "0")) + c.cost);
      this.put(c.key, "hash", hs, Math.max(...ends) + Math.max(0, server - t));
    };
  }

  private lease(c: Clause, t: number, server: number, peek: boolean): void {
    const limit = Number(c.args[0]);
    const ttl = c.args.length > 1 ? Number(c.args[1]) : null;
    const z = this.zset(c.key, server);
    const live = new Map([...z].filter(([, s]) => s > t));
    const own = new Set(c.cost && c.token !== null ? units(z, c.token) : []);
    const held = [...own].filter((m) => live.has(m)).length;
    const others = [...live].filter(([m]) => !own.has(m)).map(([, s]) => s).sort((a, b) => a - b);
    const liveTop = live.size ? Math.max(...live.values()) : t;
    if (live.size - held + c.cost <= limit) {
      const after = c.cost ? others.length + c.cost : live.size;
      const top = ttl !== null && c.cost ? Math.max(t + ttl, ...others) : liveTop;
      c.rows.push([0, 0, limit, Math.max(0, limit - after), -1, Math.max(0, ceil(top - t))]);
    } else {
      const k = live.size - held + c.cost - limit;
      c.rows.push([1, 0, limit, Math.max(0, limit - live.size), ceil(others[k - 1] - t), Math.max(0, ceil(liveTop - t))]);
    }
    if (c.token === null && !peek) c.token = `l${String(++this.names).padStart(7, "0")}`;
    c.apply = () => {
      const zs = new Map(this.zset(c.key, server));
      for (const m of units(zs, c.token)) zs.delete(m);
      for (let j = 0; j < c.cost; j += 1) zs.set(j === 0 ? c.token! : `${c.token}#${j + 1}`, t + ttl!);
      for (const [m, s] of zs) if (s <= Math.min(t, server)) zs.delete(m);
      this.put(c.key, "zset", zs, Math.floor(Math.max(...zs.values())) + Math.max(0, server - t));
    };
  }

  private refund(c: Clause, t: number, server: number): void {
    const e = this.get(c.key, server);
    if (!e) return;
    if (c.kind === "CHECK") {
      let longest = 0;
      for (let i = 1; i < c.args.length; i += 2) longest = Math.max(longest, Number(c.args[i]));
      const z = e.value as Map<string, number>;
      const inside = [...z].filter(([, s]) => s > t - longest).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? 1 : -1));
      for (const [m] of inside.slice(0, c.cost)) z.delete(m);
    } else if (c.kind === "THROTTLE") {
      const h = e.value as Record<string, string>;
      for (const [, count, window] of c.rules!) {
        const f = String(window);
        if (h[f] === undefined) continue;
        const tat = BigInt(h[f]) - ((BigInt(window) * NS) / BigInt(count)) * BigInt(c.cost);
        if (tat <= BigInt(t) * NS) delete h[f];
        else h[f] = String(tat);
      }
    } else if (c.kind === "QUOTA") {
      const h = e.value as Record<string, string>;
      for (const f of c.fields!) {
        if (h[f] === undefined) continue;
        let v = Number(h[f]);
        v -= Math.min(c.cost, Math.max(0, v));
        if (v <= 0) delete h[f];
        else h[f] = String(v);
      }
    } else if (c.kind === "LEASE" && c.token !== null) {
      this.release(c.key, t, server, [c.token]);
      return;
    }
    const size = e.value instanceof Map ? e.value.size : Object.keys(e.value).length;
    if (size === 0) this.keys.delete(c.key);
  }

  private debit(c: Clause, t: number, server: number): void {
    if (c.kind !== "THROTTLE") return c.apply(); // CHECK and QUOTA add their cost as an admission does
    const h = { ...this.hash(c.key, server) };
    const tNs = BigInt(t) * NS;
    let top = 0n;
    for (const [, count, window] of c.rules!) {
      const tat = h[String(window)] !== undefined ? BigInt(h[String(window)]) : tNs;
      const nw = (tat > tNs ? tat : tNs) + ((BigInt(window) * NS) / BigInt(count)) * BigInt(c.cost);
      h[String(window)] = String(nw);
      if (nw > top) top = nw;
    }
    this.put(c.key, "hash", h, Number(ceilDiv(top, NS)) + Math.max(0, server - t));
  }

  private release(key: string, t: number, server: number, tokens: string[]): number[] {
    const z = this.zset(key, server);
    const out = tokens.map((tok) => {
      const us = units(z, tok);
      const n = us.filter((m) => z.get(m)! > t).length;
      for (const m of us) z.delete(m);
      return n;
    });
    if (this.keys.has(key) && z.size === 0) this.keys.delete(key);
    return out;
  }

  private renew(key: string, t: number, server: number, ttl: number, tokens: string[]): number[] {
    const z = this.zset(key, server);
    const out = tokens.map((tok) => {
      const us = units(z, tok);
      if (!us.some((m) => z.get(m)! > t)) return 0;
      for (const m of us) z.set(m, t + ttl);
      return us.length;
    });
    const e = this.keys.get(key);
    if (e && z.size) e.expireAt = Math.max(e.expireAt ?? 0, Math.floor(Math.max(...z.values())) + Math.max(0, server - t));
    return out;
  }

  private lockcount(t: number, lock: string, count: string, window: number, max: number, lockTime: number): number[] {
    const ck = this.get(count, t);
    const c = ck ? Math.max(0, Number(ck.value)) : 0;
    const lk = this.get(lock, t);
    if (lk) return [1, c, lk.expireAt === null ? -1 : lk.expireAt - t];
    if (c < max) {
      const exp = ck?.expireAt ?? t + window;
      this.keys.set(count, { kind: "string", value: c + 1, expireAt: exp });
      return [0, c + 1, exp - t];
    }
    this.keys.set(lock, { kind: "string", value: 1, expireAt: t + lockTime });
    this.keys.delete(count);
    return [1, c, lockTime];
  }

  private all(args: string[], server: number, peek: boolean): unknown[] {
    const n = Number(args[1]);
    const keys = args.slice(2, 2 + n);
    const t = this.now(args[2 + n], server);
    let rest = args.slice(3 + n);
    const details = rest.at(-1)?.toUpperCase() === "DETAILS";
    if (details) rest = rest.slice(0, -1);
    const refund = rest.at(-1)?.toUpperCase() === "REFUND";
    if (refund) rest = rest.slice(0, -1);
    const parts: [string, string, string[]][] = [];
    for (let i = 0; i < rest.length; ) {
      const kind = rest[i].toUpperCase();
      const key = keys[Number(rest[i + 1]) - 1];
      const body: string[] = [];
      let j = i + 2;
      while (j < rest.length && !KINDS.has(rest[j].toUpperCase())) {
        body.push(rest[j]);
        const u = rest[j].toUpperCase();
        if (u === "COST" || u === "TOKEN") body.push(rest[++j]);
        j += 1;
      }
      parts.push([kind, key, body]);
      i = j;
    }
    let clauses: Clause[];
    if (refund) {
      for (const [kind, key, body] of parts) this.refund(this.clause(kind, key, body, t, server, true), t, server);
      clauses = parts.map(([kind, key, body]) => this.clause(kind, key, withCost(body, 0), t, server, true));
    } else clauses = parts.map(([kind, key, body]) => this.clause(kind, key, body, t, server, peek));
    const admitted = clauses.every((c) => c.admitted);
    if (admitted && !peek && !refund) {
      for (const c of clauses) c.apply();
      if (details) {
        // DETAILS after the writes: each rule as its command answers with COST 0 (a LEASE: its own reply)
        for (const c of clauses) if (c.kind !== "LEASE") c.rows = this.clause(c.kind, c.key, withCost(rawArgs(c), 0), t, server, true).rows;
      }
    }
    const firsts: Row[] = clauses.map((c) => {
      const b = binding(c.rows, c.admitted);
      const r = c.rows[b];
      return [c.admitted ? 0 : 1, b + 1, r[2], r[3], r[4], r[5]];
    });
    let pick: number;
    if (admitted) {
      pick = 0;
      firsts.forEach((r, k) => {
        const [a, b] = [Math.floor(r[3] / Math.max(clauses[k].cost, 1)), Math.floor(firsts[pick][3] / Math.max(clauses[pick].cost, 1))];
        if (a < b || (a === b && r[5] > firsts[pick][5])) pick = k;
      });
    } else pick = binding(firsts, false);
    const reply: unknown[] = [admitted ? 0 : 1, pick + 1, ...firsts[pick].slice(1)];
    if (details) for (const c of clauses) reply.push(c.rows.map((r, k) => [r[0], k + 1, r[2], r[3], r[4], r[5]]));
    return reply;
  }
}

/** A clause's arguments after its key, as sent (its rules, then COST and TOKEN). */
function rawArgs(c: Clause): string[] {
  const out = [...c.args, "COST", String(c.cost)];
  if (c.token !== null) out.push("TOKEN", c.token);
  return out;
}

function withCost(rest: string[], cost: number): string[] {
  const out = [...rest];
  const i = out.findIndex((x, j) => x.toUpperCase() === "COST" && j + 1 < out.length);
  if (i >= 0) out[i + 1] = String(cost);
  else out.push("COST", String(cost));
  return out;
}
