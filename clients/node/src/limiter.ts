/**
 * Deciding policies: one call per decision within a time budget, a circuit
 * that stops sending while Redis is unreachable (a background probe closes
 * it as soon as Redis answers), and permits that hold a lease and an
 * estimate until they are closed.
 */
import { randomUUID } from "node:crypto";
import type { Backend } from "./backend";
import { RateLimitClient, type Health } from "./client";
import * as d from "./decisions";
import { LocalBackendFullError, ModuleNotLoadedError, RateLimitedError, RateLimitError, RateLimitUnavailableError } from "./errors";
import { LocalBackend } from "./local";
import * as a from "./args";
import { allCall, clausesOf, decisionOf, merge, slotGroups, type Clause, type Part, type PolicyCall } from "./combined";
import { groupKey, keyBase, type Group, type Limit, type LimitKind, type Policy } from "./policy";
import type { Call, RedisLike } from "./transport";
import { checkHooks, gaveBackLate, observed, type DecisionHooks } from "./hooks";
import { REFRESH_MS, RuntimeLimits } from "./overrides";
import * as admin from "./admin";
import { refundCall, uncounted } from "./outcome";

interface Pending {
  readonly deadline: number;
  expire: () => void;
}

/** One limit's state after a decision (what `RateLimit` / `RateLimit-Policy` send). */
export interface LimitState {
  readonly name: string;
  readonly kind: LimitKind;
  readonly limited: boolean;
  /** `q`: the limit as the policy states it (a bucket's rate, not its burst). */
  readonly limit: number;
  /** `w` in ms; null for an in-flight limit. */
  readonly window: number | null;
  readonly remaining: number;
  /** ms; null when -1 (admitted, or waiting cannot help). */
  readonly retryAfter: number | null;
  readonly resetAfter: number;
}

export interface PolicyDecision {
  /** The policy (of a combined decision: the policy of the binding limit). */
  readonly policy: string;
  /** A combined decision (`decideAll`/`acquireAll`): every bound policy, in binding order. */
  readonly policies?: readonly string[];
  readonly limited: boolean;
  /** The limit the reply names as binding. */
  readonly binding: LimitState;
  /** Every limit, in the policy's order (the binding one alone when the policy asks no `details`). */
  readonly limits: readonly LimitState[];
  /**
   * ms to send as `Retry-After` on a refusal: the binding limit's
   * `retryAfter`, or the policy's `inFlightRetryAfter` when an in-flight
   * limit binds; null when waiting cannot help.
   */
  readonly retryAfter: number | null;
  readonly waitingCannotHelp: boolean;
  /** Problem type slug: `"rate-limited"`, or a refusing limit's own (`"duplicate"`, `"locked"`). */
  readonly problem: string;
}

export interface DecideOptions {
  /** Units of this call on `"request"` limits (default 1). */
  readonly cost?: number;
  /** Units taken up front on `"estimate"` limits, settled when the permit closes (default: `cost`). */
  readonly estimate?: number;
  /** The zone of quotas declared with zone `null`. */
  readonly zone?: string;
  /** Discriminators of limits declared with `subkey`. */
  readonly subkeys?: Readonly<Record<string, string>>;
}

export interface AcquireOptions extends DecideOptions {
  /** Passed on to `permit.signal` (the work should stop); the permit still closes when the work ends. */
  readonly signal?: AbortSignal;
  /** Renew the lease (RL.RENEW) every third of its TTL while the permit is open (default true). */
  readonly renew?: boolean;
}

export interface RateLimiterOptions {
  /** The longest a decision waits for Redis, ms (default 500; checked every tenth of it, so at most 10% more). */
  readonly timeout?: number;
  /** How often the open circuit probes Redis, ms (default 250). */
  readonly probeInterval?: number;
  /** Called with errors that cannot be thrown (a release or settlement that failed). */
  readonly onError?: (error: unknown) => void;
  /** Told of every decision and late give-back (see `DecisionHooks`; metrics: `redis-ratelimit/opentelemetry`, `/prometheus`). */
  readonly hooks?: readonly DecisionHooks[];
  /** Which engine decides: `"module"` (default), `"functions"` or `"auto"` (`RateLimitClientOptions`). */
  readonly backend?: Backend | string;
  /**
   * Refuse a client whose command or socket timeout is shorter than the
   * budget + 10 s (it drops replies Redis still runs, so a late admission
   * cannot be given back). Default true.
   */
  readonly checkTimeouts?: boolean;
  /**
   * Apply the limits an admin sets at run time (`limiter.runtimeLimits.set(policy, {...})`,
   * from any client; `overrides.ts`). Default true.
   */
  readonly runtimeLimits?: boolean;
  /** How often the runtime limits are read again, ms (default and at most 250). */
  readonly refresh?: number;
  /**
   * The backend the `local` Redis-down mode (a policy's `failure: "local"`)
   * decides on. Default: a new `LocalBackend` on the system clock with its
   * default bounds (100,000 keys, 1,000,000 entries); give one for other
   * bounds (`new LocalBackend({ clock: Date, maxKeys, maxEntries })`).
   * Never the client to Redis.
   */
  readonly localBackend?: LocalBackend;
}


// Lease releases waiting for Redis to answer; past this many they expire by TTL.
const MAX_PENDING_RELEASES = 10_000;

/** One node's circuit: open while the node fails; its probe closes it. */
interface Circuit {
  readonly node: string;
  open: boolean;
  overruns: number;
  probing: NodeJS.Timeout | null;
}

// Budget overruns in a row on one node that open its circuit: one slow
// reply (a GC pause, a busy server) is not an outage.
const OVERRUNS = 3;

// Command timeouts shorter than the budget plus this drop replies Redis
// still runs (CLIENTS.md §3): refused at start.
const LATE_REPLY_MARGIN = 10_000;

/**
 * Refuses a client whose command timeout would drop replies Redis still
 * runs (shorter than the budget + 10 s): a 503'd request's admission could
 * not be given back (CLIENTS.md §3). ioredis `commandTimeout` (a Cluster's
 * `redisOptions.commandTimeout`); node-redis `socket.socketTimeout`.
 */
function checkClientTimeouts(client: unknown, budget: number): void {
  const c = client as any;
  if (!c || typeof c !== "object") return;
  // node-redis's default reconnect backs off to 2 s plus jitter: decisions
  // came back 2.4 s after Redis did (SERVICES.md allows 2 s). Said at start.
  if (typeof c.sendCommand === "function" && typeof c.multi === "function" && c.options?.socket && c.options.socket.reconnectStrategy === undefined) {
    console.warn(
      "redis-ratelimit: this node-redis client reconnects with its default back-off (up to 2 s plus jitter), so decisions " +
        "may use Redis again only ~2.4 s after it answers: give it socket: { reconnectStrategy: (n) => Math.min(50 * 2 ** n, 500) }",
    );
  }
  const found: Array<[string, unknown]> = [
    ["commandTimeout", c.options?.commandTimeout],
    ["redisOptions.commandTimeout", c.options?.redisOptions?.commandTimeout],
    ["socket.socketTimeout", c.options?.socket?.socketTimeout],
    ["defaults.socket.socketTimeout", c._options?.defaults?.socket?.socketTimeout],
  ];
  for (const [name, v] of found) {
    if (typeof v === "number" && v > 0 && v < budget + LATE_REPLY_MARGIN) {
      throw new RangeError(
        `the Redis client's ${name} (${v} ms) drops replies Redis still runs: give none (the budget bounds each decision) ` +
          `or at least the budget + ${LATE_REPLY_MARGIN} ms (${budget + LATE_REPLY_MARGIN} ms), so a late admission can be given back`,
      );
    }
  }
}

export class RateLimiter {
  readonly client: RateLimitClient;
  readonly timeout: number;
  readonly probeInterval: number;
  private readonly onError: (error: unknown) => void;
  private readonly circuits = new Map<string, Circuit>();
  readonly hooks: readonly DecisionHooks[];
  private readonly pending = new Set<Pending>();
  private readonly releases: Call[] = [];
  private sweeper: NodeJS.Timeout | null = null;
  private flusher: NodeJS.Timeout | null = null;
  /** Why the last decision found the module missing (it went away at run time), or null. */
  private moduleMissing: string | null = null;
  /** False once the server refused DETAILS (an older module build). */
  detailsSupported = true;
  /** The runtime overrides' store (null when turned off). */
  readonly runtimeLimits: RuntimeLimits | null;
  /** The `local` Redis-down mode: this limiter's own decision path on an in-process backend (made on first use). */
  private localLimiter: RateLimiter | null = null;
  private readonly localBackend: LocalBackend | undefined;

  constructor(redis: RedisLike | RateLimitClient, options: RateLimiterOptions = {}) {
    if (redis instanceof RateLimitClient && options.backend !== undefined) {
      throw new TypeError("backend is a RateLimitClient option when a RateLimitClient is given");
    }
    this.client = redis instanceof RateLimitClient ? redis : new RateLimitClient(redis, { backend: options.backend });
    // Checked here: a string ("500" from an env var) or NaN would not fail,
    // it would make every decision "unavailable" at once or never time out.
    this.timeout = a.int("timeout", options.timeout ?? 500, 1, 2 ** 31 - 1);
    this.probeInterval = a.int("probeInterval", options.probeInterval ?? 250, 1, 2 ** 31 - 1);
    if (options.onError !== undefined && typeof options.onError !== "function") throw new TypeError("onError must be a function");
    this.onError = options.onError ?? (() => {});
    this.hooks = checkHooks(options.hooks);
    if (options.checkTimeouts ?? true) checkClientTimeouts(redis instanceof RateLimitClient ? null : redis, this.timeout);
    this.runtimeLimits = options.runtimeLimits === false ? null : new RuntimeLimits(this.client, options.refresh ?? REFRESH_MS, (e) => this.report(e));
    if (options.localBackend !== undefined && !(options.localBackend instanceof LocalBackend)) throw new TypeError("localBackend must be a LocalBackend");
    this.localBackend = options.localBackend;
  }

  /**
   * The limiter of the `local` Redis-down mode: the same decision path (the
   * same commands, costs, estimates, leases, refunds) on the local backend,
   * so a decision there is the one Redis would make with this instance's
   * calls alone. Its permits settle there. (Runtime overrides live on the
   * policies: it sees them too.)
   */
  private local(): RateLimiter {
    if (!this.localLimiter) {
      const backend = this.localBackend ?? new LocalBackend({ clock: Date });
      this.localLimiter = new RateLimiter(backend, { runtimeLimits: false, checkTimeouts: false, timeout: this.timeout, onError: this.onError });
      LOCAL_LIMITERS.add(this.localLimiter);
    }
    return this.localLimiter;
  }

  /**
   * Redis could not decide (`e`): the `local` policies of `calls` decided on
   * the local backend by `run` — unless a policy fails closed or none is
   * local, when `e` passes on (the adapters answer 503 or let the call
   * through). A full backend refuses (`refused`), its retry-after until the
   * earliest key expires.
   */
  private orLocal<T>(e: unknown, calls: readonly PolicyCall[], run: (local: RateLimiter, calls: PolicyCall[]) => Promise<T>, refused: (local: RateLimiter, d: PolicyDecision) => T): Promise<T> {
    if (!(e instanceof RateLimitUnavailableError) || LOCAL_LIMITERS.has(this)) return Promise.reject(e);
    const modes = calls.map((c) => c.policy.options.failure);
    if (modes.includes("closed") || !modes.includes("local")) return Promise.reject(e);
    const local = calls.filter((c) => c.policy.options.failure === "local");
    const limiter = this.local();
    return run(limiter, local).catch((x) => {
      if (!(x instanceof LocalBackendFullError)) throw x;
      return refused(limiter, fullDecision(local[0].policy, x));
    });
  }

  /** The first decision of a prefix waits (a little) for its runtime limits' first read; null once read. */
  private overridesRead(policies: readonly (Policy | undefined)[]): Promise<void> | null {
    if (!this.runtimeLimits) return null;
    const known = policies.filter((p): p is Policy => typeof p?.compile === "function" && typeof p.options?.prefix === "string");
    return this.runtimeLimits.ready(known);
  }

  /** Whether some node's circuit is open (its keys decided without Redis; a probe is running). */
  get circuitOpen(): boolean {
    for (const c of this.circuits.values()) if (c.open) return true;
    return false;
  }

  /** The nodes (host:port) whose circuit is open. */
  get openNodes(): string[] {
    return [...this.circuits.values()].filter((c) => c.open).map((c) => c.node).sort();
  }

  private circuit(node: string): Circuit {
    let c = this.circuits.get(node);
    if (!c) this.circuits.set(node, (c = { node, open: false, overruns: 0, probing: null }));
    return c;
  }

  /** The circuits of the nodes that serve `keys` (one per standalone server). */
  private circuitsOf(keys: readonly string[]): Circuit[] {
    const nodeOf = this.client.transport.nodeOf;
    if (!nodeOf) return [this.circuit("*")];
    return [...new Set(keys.map((k) => nodeOf(k)))].map((n) => this.circuit(n));
  }

  /**
   * Runs `fn` within the budget; a failing node opens its circuit. Error
   * replies pass as RateLimitError. A call past its budget is not lost on
   * Redis (it runs what it has read): `late` gets a reply that lands after
   * the caller was answered, so what it took can be given back.
   * `always`: run even while the circuit is open (giving back what was taken).
   * `lost`: called when the call fails without a reply (a timeout of the
   * client's own, a broken connection), in time or late: Redis may still
   * have run it. `keys`: the keys it touches (their nodes' circuits).
   */
  guarded<T>(fn: () => Promise<T>, late?: (value: T) => void, always = false, lost?: () => void, keys: readonly string[] = []): Promise<T> {
    const circuits = this.circuitsOf(keys);
    if (!always && circuits.some((c) => c.open)) return Promise.reject(new RateLimitUnavailableError("Redis is unreachable (circuit open; probing)"));
    // No timer per decision (this runs on every request): pending decisions
    // sit in a set that one sweep, every tenth of the budget, expires.
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = { deadline: performance.now() + this.timeout, expire: () => undefined };
      const settle = () => {
        if (!this.pending.delete(entry)) return false;
        if (this.pending.size === 0 && this.sweeper) {
          clearInterval(this.sweeper);
          this.sweeper = null;
        }
        return true;
      };
      entry.expire = () => {
        if (!settle()) return;
        this.overrun(circuits);
        reject(new RateLimitUnavailableError(`Redis did not answer within ${this.timeout} ms`));
      };
      this.pending.add(entry);
      if (!this.sweeper) {
        this.sweeper = setInterval(() => this.sweep(), Math.max(5, Math.floor(this.timeout / 10)));
        this.sweeper.unref();
      }
      // A client that throws at once (instead of rejecting) must not leave
      // the entry pending: the sweep would take it for a timeout.
      let running: Promise<T>;
      try {
        running = fn();
      } catch (e) {
        running = Promise.reject(e);
      }
      running.then(
        (v) => {
          if (settle()) {
            for (const c of circuits) c.overruns = 0;
            this.moduleMissing = null;
            resolve(v);
          } else late?.(v);
        },
        (e) => {
          // Before the first call's check passed it is a misconfigured
          // server: it passes as it is (the adapters answer 500 misconfigured).
          if (e instanceof ModuleNotLoadedError && this.client.checked) {
            // The module gone at run time (a failover to a server without
            // it), or the library gone (a flush, a node that never had it)
            // with a user that may not load it again (LibraryNotLoadedError):
            // the Redis-down mode decides, as in Python; health() says why.
            if (this.moduleMissing === null) console.error(`redis-ratelimit: ${e.message}; deciding by each policy's Redis-down mode`);
            this.moduleMissing = e.message;
            if (settle()) reject(new RateLimitUnavailableError(e.message, e));
            return;
          }
          const replied = e instanceof RateLimitError || e instanceof d.ReplyShapeError || e instanceof RangeError || e instanceof TypeError;
          if (!replied) lost?.();
          if (!settle()) {
            if (!replied) this.trip(circuits);
            return;
          }
          // An error reply, a reply of an unexpected shape or a bad argument says
          // nothing about Redis being reachable: it passes as it is.
          if (replied) return reject(e);
          this.trip(circuits);
          reject(e instanceof RateLimitUnavailableError ? e : new RateLimitUnavailableError(`Redis is unreachable: ${(e as Error)?.message}`, e));
        },
      );
    });
  }

  private sweep(): void {
    const now = performance.now();
    // Expired after the poll phase (setImmediate), not in this timer: a
    // reply already in the socket (the app's own event loop stalled while
    // Redis answered in time) is read first, and used.
    const due = [...this.pending].filter((p) => p.deadline <= now);
    if (due.length > 0) setImmediate(() => due.forEach((p) => p.expire()));
  }

  private overrun(circuits: Circuit[]): void {
    // The client itself says its connection is down (reconnecting, the call
    // queued): a failure, not a slow reply.
    if (this.client.transport.connected?.() === false) return this.trip(circuits);
    const tripped = circuits.filter((c) => ++c.overruns >= OVERRUNS);
    if (tripped.length > 0) this.trip(tripped);
  }

  /** Opens these circuits; one probe per node until it answers a PING within the budget. */
  private trip(circuits: Circuit[]): void {
    for (const c of circuits) {
      if (c.open) continue;
      c.open = true;
      const probe = async () => {
        let timer: NodeJS.Timeout | undefined;
        try {
          const t = this.client.transport;
          await Promise.race([
            t.ping ? t.ping(c.node) : t.sendAny(["PING"]),
            new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("probe timeout")), this.timeout))),
          ]);
          // Leases whose reply was lost go back before decisions resume.
          if (!(await this.flushReleases())) throw new Error("releases not sent");
          c.open = false;
          c.overruns = 0;
          c.probing = null;
        } catch {
          if (c.probing !== null) {
            c.probing = setTimeout(probe, this.probeInterval);
            c.probing.unref();
          }
        } finally {
          clearTimeout(timer);
        }
      };
      c.probing = setTimeout(probe, this.probeInterval);
      c.probing.unref();
    }
  }

  /**
   * Queues RL.RELEASE calls of leases whose admission may have run while its
   * reply was lost; sent when Redis answers (by a probe, or by a flush every
   * probe interval while no circuit is open).
   */
  private releaseLater(calls: Call[]): void {
    const releases = calls.filter((c) => c.args[0] === "RL.RELEASE");
    if (releases.length === 0) return;
    this.releases.push(...releases.slice(0, Math.max(0, MAX_PENDING_RELEASES - this.releases.length)));
    if (this.flusher) return;
    const flush = () => {
      this.flusher = null;
      if (this.releases.length === 0) return;
      const again = () => {
        this.flusher = setTimeout(flush, this.probeInterval);
        this.flusher.unref();
      };
      if (this.circuitOpen) return again(); // the probes send them
      void this.flushReleases().then((sent) => (sent ? undefined : again()));
    };
    this.flusher = setTimeout(flush, 0);
    this.flusher.unref();
  }

  private async flushReleases(): Promise<boolean> {
    while (this.releases.length > 0) {
      const calls = this.releases.splice(0, this.releases.length);
      let timer: NodeJS.Timeout | undefined;
      try {
        const replies = await Promise.race([
          this.client.batch(calls),
          new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("release timeout")), this.timeout))),
        ]);
        for (const r of replies) if (r instanceof Error) this.report(r); // an error reply: that one cannot be released
      } catch {
        this.releases.unshift(...calls);
        return false;
      } finally {
        clearTimeout(timer);
      }
    }
    return true;
  }

  /**
   * Whether Redis can decide now and with which engine (`RateLimitClient.health`):
   * for an app's readiness endpoint. DOWN too while a node's circuit is open
   * (`detail` names the nodes) or the module went missing at run time. Never throws.
   */
  async health(): Promise<Health> {
    const h = await this.client.health();
    if (h.status !== "UP") return h;
    if (this.moduleMissing !== null) return { status: "DOWN", backend: h.backend, detail: this.moduleMissing };
    const open = this.openNodes;
    if (open.length > 0) return { status: "DOWN", backend: h.backend, detail: `Redis cannot be reached: circuit open for ${open.join(", ")}` };
    return h;
  }

  /** Stops the background probes (when closing the app). */
  close(): void {
    for (const c of this.circuits.values()) {
      if (c.probing) clearTimeout(c.probing);
      c.probing = null;
    }
    if (this.flusher) clearTimeout(this.flusher);
    this.flusher = null;
    this.runtimeLimits?.close();
  }

  /**
   * Decides one call of `policy` for `key`. For policies with an in-flight
   * limit or an estimate, use `acquire` (which gives them back).
   */
  /** Key administration (admin.ts): every limit's state for `key` now, by peeks that write nothing. */
  async state(policy: Policy, key: string, options: admin.AdminOptions = {}): Promise<PolicyDecision> {
    await this.overridesRead([policy]);
    return admin.state(this.client, policy, key, options);
  }

  /** Deletes `key`'s own counters and leases under `policy` (unlocks a caller); the number of keys deleted. */
  reset(policy: Policy, key: string, options: admin.AdminOptions = {}): Promise<number> {
    return admin.reset(this.client, policy, key, options);
  }

  /** Charges `n` units to `key`'s windows, buckets and quotas whether or not they fit (DEBIT); the state after. */
  async penalty(policy: Policy, key: string, n = 1, options: admin.AdminOptions = {}): Promise<PolicyDecision> {
    await this.overridesRead([policy]);
    await admin.adjust(this.client, policy, key, n, "DEBIT", options);
    return admin.state(this.client, policy, key, options);
  }

  /** Gives `n` units back to `key`'s windows, buckets and quotas (REFUND, never below empty); the state after. */
  async reward(policy: Policy, key: string, n = 1, options: admin.AdminOptions = {}): Promise<PolicyDecision> {
    await this.overridesRead([policy]);
    await admin.adjust(this.client, policy, key, n, "REFUND", options);
    return admin.state(this.client, policy, key, options);
  }

  decide(policy: Policy, key: string, options: DecideOptions = {}): Promise<PolicyDecision> {
    if (policy.needsPermit) return Promise.reject(new TypeError(`policy '${policy.name}' holds a lease or an estimate: use acquire() or withPermit()`));
    const read = this.overridesRead([policy]);
    if (read) return read.then(() => this.decide(policy, key, options));
    let held: Held;
    try {
      const cost = positive("cost", options.cost ?? 1);
      held = heldFor(policy, key, options, cost, estimateOf(policy, options, cost), null);
    } catch (e) {
      return Promise.reject(e); // bad input: refused before any Redis call
    }
    const parts = [{ policy, held, estimate: held.costs[0] ?? 1 }];
    return observed(this.hooks, [policy], performance.now(), this.guarded(() => this.send(policy, held), this.giveBackLate(parts), false, undefined, held.keys), (e) => this.report(e)).catch((e) =>
      this.orLocal(e, [policy.bind(key, options)], (l, c) => l.decideAll(c), (_, d) => d),
    );
  }

  /**
   * Decides, and when admitted takes the lease and the estimate: close the
   * permit (`await using`, `permit.close()`, or `withPermit`) to release
   * the lease and settle the estimate to `permit.used(n)`.
   */
  async acquire(policy: Policy, key: string, options: AcquireOptions = {}): Promise<Permit> {
    const read = this.overridesRead([policy]);
    if (read) await read;
    const token = policy.limits.some((l) => l.kind === "concurrency") ? randomUUID() : null;
    let ran: { decision: PolicyDecision; held: Held; estimate: number };
    try {
      ran = await this.run(policy, key, options, token);
    } catch (e) {
      return this.orLocal(e, [policy.bind(key, options)], (l, c) => l.acquireAll(c, { signal: options.signal, renew: options.renew }), (l, d) => new Permit(l, null, d, 0, null));
    }
    const { decision, held, estimate } = ran;
    return new Permit(this, decision.limited ? null : [{ policy, held, estimate }], decision, estimate, token, options.signal, options.renew ?? true);
  }

  /**
   * Runs `fn` under a permit and closes it whatever happens (return, throw,
   * abort). Refused: rejects with `RateLimitedError` (its `decision`).
   */
  async withPermit<T>(policy: Policy, key: string, options: AcquireOptions, fn: (permit: Permit) => Promise<T> | T): Promise<T> {
    const permit = await this.acquire(policy, key, options);
    if (permit.decision.limited) throw new RateLimitedError(permit.decision, `rate limited by '${permit.decision.binding.name}' of policy '${policy.name}'`);
    try {
      return await fn(permit);
    } catch (e) {
      if (!permit.outcomeKnown) permit.failed(); // a throw is a failure unless the work said otherwise
      throw e;
    } finally {
      await permit.close();
    }
  }

  /**
   * Decides several policies, each bound to its own key (`policy.bind(key,
   * { cost, estimate, ... })`), in ONE RL.ALL: admitted only if every limit
   * admits, nothing written otherwise; the binding limit across all and
   * every limit's state. Under Cluster, bindings whose keys hash to
   * different slots are decided slot by slot (sent together) and the
   * admitting slots refunded when one refuses. For policies with an
   * in-flight limit or an estimate, use `acquireAll`.
   */
  decideAll(calls: readonly PolicyCall[]): Promise<PolicyDecision> {
    if (calls.length === 1) return this.decide(calls[0].policy, calls[0].key, calls[0].options);
    const needs = calls.find((c) => c?.policy?.needsPermit);
    if (needs) return Promise.reject(new TypeError(`policy '${needs.policy.name}' holds a lease or an estimate: use acquireAll()`));
    const read = this.overridesRead(Array.isArray(calls) ? calls.map((c) => c?.policy) : []);
    if (read) return read.then(() => this.decideAll(calls));
    let parts: Part[];
    try {
      parts = partsOf(calls, null);
    } catch (e) {
      return Promise.reject(e);
    }
    return observed(this.hooks, parts.map((p) => p.policy), performance.now(), this.guarded(() => this.sendAll(parts), this.giveBackLate(parts), false, undefined, parts.flatMap((p) => p.held.keys)), (e) => this.report(e)).catch((e) =>
      this.orLocal(e, calls, (l, c) => l.decideAll(c), (_, d) => d),
    );
  }

  /**
   * `decideAll`, and when admitted one permit that holds every bound lease
   * (one token) and estimate: closing it releases and settles them all.
   */
  async acquireAll(calls: readonly PolicyCall[], options: { readonly signal?: AbortSignal; readonly renew?: boolean } = {}): Promise<Permit> {
    if (calls.length === 1) return this.acquire(calls[0].policy, calls[0].key, { ...calls[0].options, signal: options.signal, renew: options.renew });
    const read = this.overridesRead(Array.isArray(calls) ? calls.map((c) => c?.policy) : []);
    if (read) await read;
    const token = calls.some((c) => c?.policy?.limits.some((l) => l.kind === "concurrency")) ? randomUUID() : null;
    const parts = partsOf(calls, token);
    const policies = parts.map((p) => p.policy);
    const lost = () => this.releaseLater(parts.flatMap((p) => this.settlementCalls(p.policy, p.held, p.estimate, p.estimate)));
    let decision: PolicyDecision;
    try {
      decision = await observed(this.hooks, policies, performance.now(), this.guarded(() => this.sendAll(parts), this.giveBackLate(parts), false, lost, parts.flatMap((p) => p.held.keys)), (e) => this.report(e));
    } catch (e) {
      return this.orLocal(e, calls, (l, c) => l.acquireAll(c, options), (l, d) => new Permit(l, null, d, 0, null));
    }
    return new Permit(this, decision.limited ? null : parts, decision, Math.max(...parts.map((p) => p.estimate)), token, options.signal, options.renew ?? true);
  }

  /** `acquireAll`, then `fn` under the permit, closed whatever happens (as `withPermit`). */
  async withPermitAll<T>(calls: readonly PolicyCall[], options: { readonly signal?: AbortSignal }, fn: (permit: Permit) => Promise<T> | T): Promise<T> {
    const permit = await this.acquireAll(calls, options);
    if (permit.decision.limited) throw new RateLimitedError(permit.decision, `rate limited by '${permit.decision.binding.name}' of policy '${permit.decision.policy}'`);
    try {
      return await fn(permit);
    } finally {
      await permit.close();
    }
  }

  // One RL.ALL for every part's clauses; under Cluster one per slot.
  private sendAll(parts: readonly Part[]): Promise<PolicyDecision> {
    const clauses = clausesOf(parts);
    const details = this.detailsSupported && parts.some((p) => p.policy.options.details);
    const groups = this.client.transport.kind.endsWith("cluster") ? slotGroups(clauses) : [clauses.map((_, i) => i)];
    const one = (idx: number[], refund: boolean, withDetails: boolean): Promise<d.AllDecision> =>
      this.client.send(allCall(clauses, idx, refund, withDetails)).then((reply) => d.allDecision("RL.ALL", reply, withDetails));
    if (groups.length === 1) {
      return one(groups[0], false, details).then(
        (all) => decisionOf(parts, clauses, all, stateOf),
        (e) => {
          // A module build older than DETAILS: remember, and decide without it (as `send`).
          if (!(details && e instanceof RateLimitError && /unknown option 'DETAILS'/.test(e.message))) throw e;
          this.detailsSupported = false;
          return one(groups[0], false, false).then((all) => decisionOf(parts, clauses, all, stateOf));
        },
      );
    }
    return this.bySlot(parts, clauses, groups, details, one);
  }

  /**
   * Under Cluster: one RL.ALL per slot, sent together; when one refuses or
   * fails, the slots that admitted are given back (RL.ALL ... REFUND) before
   * answering, so a refusal writes nothing in the end. Between an admission
   * and its refund another request may find those units taken: a refusal
   * too many in a race, never an admission too many.
   */
  private async bySlot(parts: readonly Part[], clauses: readonly Clause[], groups: number[][], details: boolean, one: (idx: number[], refund: boolean, details: boolean) => Promise<d.AllDecision>): Promise<PolicyDecision> {
    const got = await Promise.allSettled(groups.map((g) => one(g, false, details)));
    const failed = got.find((r) => r.status === "rejected");
    const replies = got.map((r) => (r.status === "fulfilled" ? r.value : null));
    const after: (d.AllDecision | null)[] = groups.map(() => null);
    if (failed || replies.some((r) => r?.limited)) {
      const admitted = replies.flatMap((r, j) => (r && !r.limited ? [j] : []));
      const refunds = await Promise.allSettled(admitted.map((j) => one(groups[j], true, details)));
      refunds.forEach((r, k) => {
        if (r.status === "fulfilled") after[admitted[k]] = r.value;
        else this.report(r.reason);
      });
    }
    if (failed) throw (failed as PromiseRejectedResult).reason;
    return decisionOf(parts, clauses, merge(clauses, groups, replies as d.AllDecision[], after), stateOf);
  }

  private run(policy: Policy, key: string, o: DecideOptions, token: string | null): Promise<{ decision: PolicyDecision; held: Held; estimate: number }> {
    let held: Held;
    let estimate: number;
    try {
      const cost = positive("cost", o.cost ?? 1);
      estimate = estimateOf(policy, o, cost);
      held = heldFor(policy, key, o, cost, estimate, token);
    } catch (e) {
      return Promise.reject(e); // bad input: refused before any Redis call
    }
    // A reply lost (the client's commandTimeout, a broken connection): the
    // lease goes back by its token once Redis answers; the estimate cannot.
    const lost = () => this.releaseLater(this.settlementCalls(policy, held, estimate, estimate));
    const started = performance.now();
    return observed(this.hooks, [policy], started, this.guarded(() => this.send(policy, held), this.giveBackLate([{ policy, held, estimate }]), false, lost, held.keys), (e) => this.report(e)).then((decision) => ({ decision, held, estimate }));
  }

  /**
   * What an admission that lands after the request was answered (503, or
   * let through failing open) does: it is given back whole — windows,
   * buckets, quotas, the estimate and the lease — with one `RL.ALL ...
   * REFUND` of the same clauses (one per slot), so that request changes no
   * counter (CLIENTS.md §3). A lockout has no refund: a late call counts.
   */
  private giveBackLate(parts: readonly Part[]): (decision: PolicyDecision) => void {
    return (decision) => {
      if (decision.limited || parts.some((p) => p.policy.compile().lockout)) return;
      const clauses = clausesOf(parts);
      const calls = slotGroups(clauses).map((g) => allCall(clauses, g, true, false));
      const name = parts.map((p) => p.policy.name).join("+");
      void this.settle(calls).then(() => gaveBackLate(this.hooks, name, (e) => this.report(e)), (e) => this.report(e));
    };
  }

  // A promise chain, not async functions: this runs on every request, and
  // each async layer costs a promise and a microtask.
  private send(policy: Policy, h: Held): Promise<PolicyDecision> {
    const c = policy.compile();
    if (c.lockout) {
      const l = c.lockout;
      return this.client.lockcount(`${h.base}:${l.name}:lock`, `${h.base}:${l.name}:count`, { window: l.window!, max: l.limit, lockTime: l.lockTime! }).then((r) => {
        const state: LimitState = Object.freeze({
          name: l.name,
          kind: l.kind,
          limited: r.limited,
          limit: l.limit,
          window: l.window,
          remaining: r.limited ? 0 : Math.max(0, l.limit - r.count),
          retryAfter: r.limited ? r.ttl : null,
          resetAfter: r.ttl ?? 0,
        });
        return finish(policy, state, [state]);
      });
    }
    if (c.groups.length === 1 && c.rules === 1) {
      // One limit, one rule: its own command, whose reply is that limit's state.
      const g = c.groups[0];
      const args = [g.command, h.keys[0], "*"];
      if (g.kind === "quota") args.push(h.zones[0]!);
      for (const r of g.rules) args.push(r);
      // TOKEN before COST, as in RL.ALL's LEASE clause (the same argv in every client).
      if (g.kind === "lease") args.push("TOKEN", h.token!);
      if (h.costs[0] !== 1) args.push("COST", String(h.costs[0]));
      return this.client.send({ key: h.keys[0], readOnly: false, args }).then((reply) => {
        const state = stateOf(g.limits[0], d.decision(g.command, reply));
        return finish(policy, state, [state]);
      });
    }
    const details = policy.options.details && this.detailsSupported;
    const args = ["RL.ALL", String(c.groups.length)];
    for (const k of h.keys) args.push(k);
    args.push("*");
    for (let i = 0; i < c.groups.length; i++) {
      const g = c.groups[i];
      args.push(g.word, String(i + 1));
      if (g.kind === "quota") args.push(h.zones[i]!);
      for (const r of g.rules) args.push(r);
      if (g.kind === "lease") args.push("TOKEN", h.token!);
      if (h.costs[i] !== 1) args.push("COST", String(h.costs[i]));
    }
    if (details) args.push("DETAILS");
    return this.client.send({ key: h.keys[0], readOnly: false, args }).then(
      (reply) => fromAll(policy, d.allDecision("RL.ALL", reply, details)),
      (e) => {
        // A module build older than DETAILS: remember, and decide without it
        // (the decision then holds the binding limit's state only).
        if (!(details && e instanceof RateLimitError && /unknown option 'DETAILS'/.test(e.message))) throw e;
        this.detailsSupported = false;
        return this.client.send({ key: h.keys[0], readOnly: false, args: args.slice(0, -1) }).then((reply) => fromAll(policy, d.allDecision("RL.ALL", reply, false)));
      },
    );
  }

  /** The calls that give back a permit's lease and settle its estimate to `used`. */
  settlementCalls(policy: Policy, h: Held, estimate: number, used: number): Call[] {
    const calls: Call[] = [];
    policy.compile().groups.forEach((g, i) => {
      const key = h.keys[i];
      if (g.kind === "lease") {
        if (h.token) calls.push({ key, readOnly: false, args: ["RL.RELEASE", key, "*", h.token] });
        return;
      }
      // A usage above the clause's largest limit counts as that limit (CLIENTS.md §4).
      const u = Math.min(used, Math.max(...g.limits.map((l) => l.limit)));
      if (g.costKind !== "estimate" || u === estimate) return;
      const cost = Math.min(Math.abs(estimate - u), g.maxSettle);
      const args = [g.command, key, "*"];
      if (g.kind === "quota") args.push(h.zones[i]!);
      args.push(...g.rules, "COST", String(cost), u < estimate ? "REFUND" : "DEBIT");
      calls.push({ key, readOnly: false, args });
    });
    return calls;
  }

  /** Called by Permit.close: one round trip (a pipeline) for every settlement and the release. */
  async settle(calls: Call[]): Promise<void> {
    if (calls.length === 0) return;
    // Tried even while the circuit is open (another request's timeout must
    // not keep this lease held for its TTL); past the budget it still lands.
    const replies = await this.guarded(() => this.client.batch(calls), undefined, true, () => this.releaseLater(calls), calls.map((c) => c.key));
    const failed = replies.find((r) => r instanceof Error);
    if (failed) throw failed;
  }

  report(e: unknown): void {
    try {
      this.onError(e);
    } catch {
      /* a logger's failure is not ours to raise */
    }
  }
}

function positive(what: string, v: unknown): number {
  return a.int(what, v, 1, a.MAX);
}

/** A call's estimate: checked only when the policy has limits costed by it (else unused, as in Python and Java). */
function estimateOf(policy: Policy, o: DecideOptions, cost: number): number {
  return policy.limits.some((l) => l.options.cost === "estimate") ? positive("estimate", o.estimate ?? cost) : cost;
}

/** What one call of a policy names: its keys, zones and costs per group, and its lease token. */
export interface Held {
  readonly base: string;
  readonly keys: readonly string[];
  readonly zones: readonly (string | null)[];
  readonly costs: readonly number[];
  readonly token: string | null;
}

/** The bound policies' keys, zones and costs, checked before any Redis call; one lease token for all. */
function partsOf(calls: readonly PolicyCall[], token: string | null): Part[] {
  if (!Array.isArray(calls) || calls.length === 0) throw new TypeError("nothing to decide: bind at least one policy (policy.bind(key))");
  const seen = new Set<string>();
  const parts: Part[] = [];
  for (const c of calls) {
    if (!c || typeof c.policy?.compile !== "function" || typeof c.key !== "string") throw new TypeError("expected policy.bind(key, options)");
    if (c.policy.compile().lockout) throw a.invalid("limits", new TypeError(`policy '${c.policy.name}' is a lockout: RL.LOCKCOUNT is not an RL.ALL clause, decide it on its own`));
    const o = c.options ?? {};
    const cost = positive("cost", o.cost ?? 1);
    const estimate = estimateOf(c.policy, o, cost);
    const held = heldFor(c.policy, c.key, o, cost, estimate, token);
    // The same binding twice counts once (two keys named alike would be refused by RL.ALL).
    const id = `${held.keys.join("\n")}|${cost}|${estimate}`;
    if (seen.has(id)) continue;
    seen.add(id);
    parts.push({ policy: c.policy, held, estimate });
  }
  return parts;
}

/** Checks a call's arguments against the compiled policy, before any Redis call. */
export function heldFor(policy: Policy, key: string, o: DecideOptions, cost: number, estimate: number, token: string | null): Held {
  const c = policy.compile();
  const base = keyBase(policy, key);
  const keys: string[] = [];
  const zones: (string | null)[] = [];
  const costs: number[] = [];
  c.groups.forEach((g: Group) => {
    keys.push(groupKey(policy, base, g, o.subkeys));
    let zone: string | null = null;
    if (g.kind === "quota") {
      zone = g.zone ?? o.zone ?? null;
      if (zone === null) throw a.invalid("zone", new RangeError(`quota '${g.name}' takes its zone per call: pass zone`));
      a.zone(zone);
    }
    zones.push(zone);
    const n = g.costKind === "estimate" ? estimate : cost;
    const what = g.costKind === "estimate" ? "estimate" : "cost";
    if (n > g.maxCost) throw a.invalid(what, new RangeError(`invalid ${what} '${n}' for '${g.name}': at most ${g.maxCost}`));
    costs.push(n);
  });
  return { base, keys, zones, costs, token };
}

/** Every limit's state from RL.ALL's reply, in the policy's order; the binding one as the reply names it. */
export function fromAll(policy: Policy, all: d.AllDecision): PolicyDecision {
  const groups = policy.compile().groups;
  const bound = groups[all.clause - 1]?.limits[all.rule - 1];
  if (!bound) throw new d.ReplyShapeError("RL.ALL", [all.clause, all.rule]);
  if (!all.details) {
    const state = stateOf(bound, all);
    return finish(policy, state, [state]);
  }
  const states: LimitState[] = [];
  let binding: LimitState | undefined;
  for (let ci = 0; ci < groups.length; ci++) {
    const limits = groups[ci].limits;
    for (let ri = 0; ri < limits.length; ri++) {
      const rule = all.details[ci]?.[ri];
      if (!rule) throw new d.ReplyShapeError("RL.ALL", all.details);
      const st = stateOf(limits[ri], rule);
      states[policy.limits.indexOf(limits[ri])] = st;
      if (limits[ri] === bound) binding = st;
    }
  }
  return finish(policy, binding!, states);
}

export function stateOf(l: Limit, r: d.Decision, name: string = l.name): LimitState {
  return Object.freeze({
    name,
    kind: l.kind,
    limited: r.limited,
    limit: l.limit,
    window: l.window,
    remaining: r.remaining,
    retryAfter: r.retryAfter,
    resetAfter: r.resetAfter,
  });
}

/** The limiters of the `local` Redis-down mode (theirs never falls back again). */
const LOCAL_LIMITERS = new WeakSet<RateLimiter>();

/**
 * The refusal of a call the full local backend cannot hold: the policy's
 * first limit named, nothing left, the wait until the earliest key expires
 * (as the Java and Python clients).
 */
function fullDecision(policy: Policy, e: LocalBackendFullError): PolicyDecision {
  const l = policy.limits[0];
  const wait = Math.max(1, e.retryAfter);
  const state: LimitState = Object.freeze({ name: l.name, kind: l.kind, limited: true, limit: l.limit, window: l.window, remaining: 0, retryAfter: wait, resetAfter: wait });
  return finish(policy, state, [state]);
}

export function finish(policy: Policy, binding: LimitState, limits: LimitState[]): PolicyDecision {
  const limited = binding.limited;
  const special = limited ? policy.limits.find((l) => l.options.problem && limits.find((s) => s.name === l.name)?.limited) : undefined;
  const retryAfter = !limited ? null : binding.kind === "concurrency" ? policy.options.inFlightRetryAfter * 1000 : binding.retryAfter;
  return Object.freeze({
    policy: policy.name,
    limited,
    binding,
    limits: Object.freeze(limits),
    retryAfter,
    waitingCannotHelp: limited && retryAfter === null,
    problem: special?.options.problem ?? "rate-limited",
  });
}

/**
 * What an admitted call holds: a lease and/or an estimate. Close it once
 * (idempotent): the lease is released and the estimate settled to what
 * `used(n)` reported, 0 when nothing was reported — a call that threw or
 * was aborted used nothing. Never rejects: a failure goes to `onError`
 * (the lease then expires by its TTL). While open, its lease is renewed
 * (RL.RENEW) every third of its TTL (`renew: false` opts out), so a long
 * job keeps its slot.
 */
export class Permit implements AsyncDisposable {
  private usedUnits: number | null = null;
  /** A usage report was refused: what was taken up front stays charged. */
  private stands = false;
  private closing: Promise<void> | null = null;
  /** The outcome (null: a success unless `withPermit`'s work throws). */
  private outcome: boolean | null = null;
  private readonly abort = new AbortController();
  private readonly unlisten: () => void = () => {};
  private renewing: NodeJS.Timeout | null = null;

  constructor(
    private readonly limiter: RateLimiter,
    /** What each admitted policy holds (one for `acquire`, each bound policy's for `acquireAll`); null when refused. */
    private readonly held: readonly Part[] | null,
    readonly decision: PolicyDecision,
    /** Units taken up front on the estimate limits (of several bound policies: the largest). */
    readonly estimate: number,
    /** The lease's token (null without an in-flight limit or when refused). */
    readonly token: string | null,
    signal?: AbortSignal,
    renew = true,
  ) {
    if (signal && held) {
      // The work is told (`permit.signal`); the permit closes when the work
      // ends (`withPermit`, or the caller's `close()`), not at the abort:
      // the work still holds its slot until then (CLIENTS.md §4).
      const onAbort = () => this.abort.abort(signal.reason);
      if (signal.aborted) onAbort();
      else {
        signal.addEventListener("abort", onAbort, { once: true });
        this.unlisten = () => signal.removeEventListener("abort", onAbort);
      }
    }
    if (renew && held && token) this.startRenewing(held, token);
  }

  private startRenewing(held: readonly Part[], token: string): void {
    const renewals: Call[] = [];
    let ttl = Infinity;
    for (const p of held) {
      p.policy.compile().groups.forEach((g, i) => {
        if (g.kind !== "lease") return;
        const t = g.limits[0].ttl ?? 0;
        ttl = Math.min(ttl, t);
        renewals.push({ key: p.held.keys[i], readOnly: false, args: ["RL.RENEW", p.held.keys[i], "*", String(t), token] });
      });
    }
    if (renewals.length === 0 || !Number.isFinite(ttl) || ttl <= 0) return;
    this.renewing = setInterval(() => {
      void this.limiter.settle(renewals).catch((e) => this.limiter.report(e));
    }, Math.max(1, Math.floor(ttl / 3)));
    this.renewing.unref();
  }

  /** Admitted (holds what it took). */
  get admitted(): boolean {
    return !this.decision.limited;
  }

  /** Aborted when the caller's signal fires (a client that disconnected): stop the work, then close. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /**
   * Reports the real usage on the estimate limits (replaces an earlier
   * report): an integer from 0 to 2^53−1; above a limit it counts as that
   * limit. Anything else throws `RangeError` and the estimate stands (the
   * permit still closes normally); after close: `PermitClosedError`.
   */
  used(units: number): void {
    if (this.closing) throw new PermitClosedError(`used(${units}) after the permit of '${this.decision.policy}' closed`);
    if (!Number.isSafeInteger(units) || units < 0) {
      this.stands = true;
      throw new RangeError(`invalid used '${units}': expected an integer from 0 to 2^53-1`);
    }
    this.stands = false;
    this.usedUnits = units;
  }

  /** The call succeeded: under `counts: "failures"` it is given back when the permit closes. */
  succeeded(): void {
    this.outcome = true;
  }

  /** The call failed: under `counts: "successes"` it is given back when the permit closes. */
  failed(): void {
    this.outcome = false;
  }

  /** Whether the outcome was said (`succeeded`/`failed`). */
  get outcomeKnown(): boolean {
    return this.outcome !== null;
  }

  /** Releases the lease and settles the estimate, in one round trip. */
  close(): Promise<void> {
    if (!this.closing) {
      this.unlisten();
      if (this.renewing) clearInterval(this.renewing);
      this.renewing = null;
      this.closing = this.held
        ? this.limiter
            .settle(this.held.flatMap((p) =>
              // A policy counting the other outcome gets the whole admission back (outcome.ts).
              uncounted(p.policy, this.outcome) ? [refundCall(p.policy, p.held)] : this.limiter.settlementCalls(p.policy, p.held, p.estimate, this.stands ? p.estimate : (this.usedUnits ?? 0)),
            ))
            .catch((e) => this.limiter.report(e))
        : Promise.resolve();
    }
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** Usage reported to a permit that has closed: it can no longer be settled. */
export class PermitClosedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PermitClosedError";
  }
}
