/**
 * Runtime overrides: an admin changes a limit while the service runs, and
 * every instance -- of any client: Java, Python, Node -- applies it within a
 * refresh (CLIENTS.md §1, "overrides").
 *
 * The store is one Redis hash per prefix, `<prefix>ratelimit:limits`, field
 * `<policy>/<limit>`, value the limit's new `q` as a decimal integer (a
 * window's or quota's limit, a bucket's rate, a concurrency limit, a
 * lockout's max). A limiter reads it before its first decision for a prefix
 * and then every `refresh` ms (250), keeping the last values while Redis
 * cannot be reached. The module applies a new limit to the existing state, so
 * nothing is reset. A stored value the limit cannot take (not a decimal
 * integer; 0 for a window, bucket or concurrency limit, whose commands need 1
 * or more) is ignored, reported once to `onError`, and the limit as defined
 * applies.
 */
import * as a from "./args";
import type { RateLimitClient } from "./client";
import { lowest, type Policy } from "./policy";

/** CLIENTS.md: "refreshed at least every 250 ms". */
export const REFRESH_MS = 250;
/**
 * How long a prefix's first decision waits for the hash's first read. A
 * healthy Redis answers in well under a millisecond; a stalled one must not
 * eat the decision's budget (the decision then goes out with the limits as
 * defined). An app calls `load` at start-up to wait for it in full.
 */
export const FIRST_READ_WAIT_MS = 100;
const DECIMAL = /^[0-9]{1,16}$/;

/** The override hash of a prefix: `<prefix>ratelimit:limits`. */
export const hashKey = (prefix: string): string => `${prefix}ratelimit:limits`;
/** The hash field of a limit: `<policy>/<limit>`. */
export const field = (policy: string, limit: string): string => `${policy}/${limit}`;

interface Prefix {
  readonly policies: Set<Policy>;
  values: Record<string, string>;
  first: Promise<void>;
  waited: boolean;
  reading: boolean;
}

export class RuntimeLimits {
  private readonly prefixes = new Map<string, Prefix>();
  private readonly warned = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly client: RateLimitClient,
    readonly refresh: number = REFRESH_MS,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    a.int("refresh", refresh, 1, REFRESH_MS);
  }

  /**
   * Null when every policy's prefix was read (or its first read waited for);
   * else a promise that settles once those first reads end, or after at most
   * FIRST_READ_WAIT_MS. Called before each decision: no promise on the hot path.
   */
  ready(policies: readonly Policy[]): Promise<void> | null {
    let pending: Prefix[] | null = null;
    for (const p of policies) {
      const state = this.track(p);
      if (!state.waited) (pending ??= []).push(state);
    }
    if (!pending) return null;
    const states = pending;
    let timer: NodeJS.Timeout | undefined;
    const cap = new Promise<void>((resolve) => (timer = setTimeout(resolve, FIRST_READ_WAIT_MS)));
    return Promise.race([Promise.all(states.map((s) => s.first)), cap]).then(() => {
      clearTimeout(timer);
      for (const s of states) s.waited = true;
    });
  }

  /** Reads the policies' hashes now and keeps them refreshed (at start-up: decisions then never wait). */
  async load(...policies: Policy[]): Promise<void> {
    await Promise.all(policies.map((p) => this.track(p).first));
    for (const p of policies) this.track(p).waited = true;
  }

  /** Sets limits of `policy` (`{ limit name: q }`) on every instance, within a refresh; counts are kept. */
  async set(policy: Policy, limits: Readonly<Record<string, number>>): Promise<void> {
    const entries = Object.entries(limits ?? {});
    if (entries.length === 0) throw a.invalid("limits", new RangeError("no limit to set: give { limit name: q, ... }"));
    const args = ["HSET", hashKey(policy.options.prefix)];
    for (const [name, q] of entries) {
      const l = policy.limits.find((x) => x.name === name);
      if (!l) throw a.invalid("limit_name", new RangeError(`policy '${policy.name}' has no limit '${name}'`));
      args.push(field(policy.name, name), String(a.int("q", q, lowest(l), a.MAX)));
    }
    await this.client.transport.send({ key: args[1], readOnly: false, args });
    this.track(policy);
    await this.read(policy.options.prefix);
  }

  /** Every limit's q in force for `policy`, read from Redis now (an admin endpoint's answer). */
  async get(policy: Policy): Promise<Record<string, number>> {
    const prefix = policy.options.prefix;
    this.track(policy);
    await this.read(prefix, true);
    const values = this.valuesFor(policy);
    return Object.fromEntries(policy.limits.map((l) => [l.name, values[l.name] ?? l.base]));
  }

  /** Stops the background refreshes. */
  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private track(policy: Policy): Prefix {
    const prefix = policy.options.prefix;
    let state = this.prefixes.get(prefix);
    if (!state) {
      const s: Prefix = { policies: new Set(), values: {}, first: Promise.resolve(), waited: false, reading: false };
      this.prefixes.set(prefix, s);
      s.first = this.read(prefix);
      state = s;
      if (!this.timer) {
        this.timer = setInterval(() => {
          for (const p of this.prefixes.keys()) void this.read(p);
        }, this.refresh);
        this.timer.unref();
      }
    }
    if (!state.policies.has(policy)) {
      state.policies.add(policy);
      policy.applyOverrides(this.valuesFor(policy));
    }
    return state;
  }

  /** One read of a prefix's hash; a failure keeps the last values. `force`: even while another is in flight. */
  private async read(prefix: string, force = false): Promise<void> {
    const state = this.prefixes.get(prefix);
    if (!state || (state.reading && !force)) return;
    state.reading = true;
    try {
      const key = hashKey(prefix);
      state.values = pairs(await this.client.transport.send({ key, readOnly: true, args: ["HGETALL", key] }));
      for (const p of state.policies) p.applyOverrides(this.valuesFor(p));
    } catch {
      // Redis unreachable: the last values stay (the decisions say the rest).
    } finally {
      state.reading = false;
    }
  }

  /** The overrides in force for `policy`: limit name → q. */
  valuesFor(policy: Policy): Record<string, number> {
    const stored = this.prefixes.get(policy.options.prefix)?.values ?? {};
    const out: Record<string, number> = {};
    for (const l of policy.limits) {
      const f = field(policy.name, l.name);
      const v = stored[f];
      if (v === undefined) continue;
      const q = Number(v);
      if (DECIMAL.test(v) && q >= lowest(l) && q <= a.MAX) out[l.name] = q;
      else if (!this.warned.has(`${policy.options.prefix}\n${f}\n${v}`)) {
        this.warned.add(`${policy.options.prefix}\n${f}\n${v}`);
        this.onError(new RangeError(`ignoring runtime limit ${hashKey(policy.options.prefix)} ${f} = '${v}': not an integer from ${lowest(l)} to 2^53-1`));
      }
    }
    return out;
  }
}

/** HGETALL's reply (a flat array under RESP2, a map under RESP3) as text. */
function pairs(reply: unknown): Record<string, string> {
  const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString("utf8") : String(v));
  const out: Record<string, string> = {};
  if (Array.isArray(reply)) for (let i = 0; i + 1 < reply.length; i += 2) out[text(reply[i])] = text(reply[i + 1]);
  else if (reply instanceof Map) for (const [k, v] of reply) out[text(k)] = text(v);
  else if (reply && typeof reply === "object") for (const [k, v] of Object.entries(reply)) out[k] = text(v);
  return out;
}
