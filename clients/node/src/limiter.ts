/**
 * Deciding policies: one call per decision within a time budget, a circuit
 * that stops sending while Redis is unreachable (a background probe closes
 * it as soon as Redis answers), and permits that hold a lease and an
 * estimate until they are closed.
 */
import { randomUUID } from "node:crypto";
import * as b from "./build";
import { RateLimitClient } from "./client";
import * as d from "./decisions";
import { RateLimitedError, RateLimitError, RateLimitUnavailableError } from "./errors";
import { plan, type Limit, type LimitKind, type Plan, type Policy } from "./policy";
import type { Call, RedisLike } from "./transport";

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
  readonly policy: string;
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
  /** Closes the permit (release + settle) when aborted: a client that disconnected. */
  readonly signal?: AbortSignal;
}

export interface RateLimiterOptions {
  /** The longest a decision waits for Redis, ms (default 500). */
  readonly timeout?: number;
  /** How often the open circuit probes Redis, ms (default 250). */
  readonly probeInterval?: number;
  /** Called with errors that cannot be thrown (a release or settlement that failed). */
  readonly onError?: (error: unknown) => void;
}

const ONE_RULE_COMMANDS = new Set(["check", "throttle", "quota", "lease"]);

export class RateLimiter {
  readonly client: RateLimitClient;
  readonly timeout: number;
  readonly probeInterval: number;
  private readonly onError: (error: unknown) => void;
  private open = false;
  /** False once the server refused DETAILS (an older module build). */
  detailsSupported = true;
  private probing: NodeJS.Timeout | null = null;

  constructor(redis: RedisLike | RateLimitClient, options: RateLimiterOptions = {}) {
    this.client = redis instanceof RateLimitClient ? redis : new RateLimitClient(redis);
    this.timeout = options.timeout ?? 500;
    this.probeInterval = options.probeInterval ?? 250;
    this.onError = options.onError ?? (() => {});
  }

  /** Whether decisions currently fail fast (Redis was unreachable; a probe is running). */
  get circuitOpen(): boolean {
    return this.open;
  }

  /** Runs `fn` within the budget; unreachable Redis opens the circuit. Error replies pass as RateLimitError. */
  async guarded<T>(fn: () => Promise<T>): Promise<T> {
    if (this.open) throw new RateLimitUnavailableError("Redis is unreachable (circuit open; probing)");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RateLimitUnavailableError(`Redis did not answer within ${this.timeout} ms`)), this.timeout);
    });
    try {
      return await Promise.race([fn(), timeout]);
    } catch (e) {
      if (e instanceof RateLimitError) throw e;
      this.trip();
      throw e instanceof RateLimitUnavailableError ? e : new RateLimitUnavailableError(`Redis is unreachable: ${(e as Error)?.message}`, e);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Opens the circuit and probes until Redis answers a PING within the budget. */
  private trip(): void {
    if (this.open) return;
    this.open = true;
    const probe = async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          this.client.transport.sendAny(["PING"]),
          new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("probe timeout")), this.timeout))),
        ]);
        this.open = false;
        this.probing = null;
      } catch {
        this.probing = setTimeout(probe, this.probeInterval);
        this.probing.unref();
      } finally {
        clearTimeout(timer);
      }
    };
    this.probing = setTimeout(probe, this.probeInterval);
    this.probing.unref();
  }

  /** Stops the background probe (when closing the app). */
  close(): void {
    if (this.probing) clearTimeout(this.probing);
    this.probing = null;
  }

  /**
   * Decides one call of `policy` for `key`. For policies with an in-flight
   * limit or an estimate, use `acquire` (which gives them back).
   */
  async decide(policy: Policy, key: string, options: DecideOptions = {}): Promise<PolicyDecision> {
    if (policy.needsPermit) throw new TypeError(`policy '${policy.name}' holds a lease or an estimate: use acquire() or withPermit()`);
    return (await this.run(policy, key, options, null)).decision;
  }

  /**
   * Decides, and when admitted takes the lease and the estimate: close the
   * permit (`await using`, `permit.close()`, or `withPermit`) to release
   * the lease and settle the estimate to `permit.used(n)`.
   */
  async acquire(policy: Policy, key: string, options: AcquireOptions = {}): Promise<Permit> {
    const token = policy.limits.some((l) => l.kind === "concurrency") ? randomUUID() : null;
    const { decision, planned, estimate } = await this.run(policy, key, options, token);
    return new Permit(this, decision, decision.limited ? null : planned, estimate, token, options.signal);
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
    } finally {
      await permit.close();
    }
  }

  private async run(policy: Policy, key: string, o: DecideOptions, token: string | null) {
    const cost = b_int("cost", o.cost ?? 1);
    const estimate = b_int("estimate", o.estimate ?? cost);
    const planned = plan(policy, key, { cost, estimate, zone: o.zone, subkeys: o.subkeys }, token);
    const decision = await this.guarded(() => this.send(policy, planned));
    return { decision, planned, estimate };
  }

  private async send(policy: Policy, p: Plan): Promise<PolicyDecision> {
    if (p.lockout) {
      const l = p.lockout.limit;
      const r = await this.client.lockcount(p.lockout.lockKey, p.lockout.countKey, { window: l.window!, max: l.limit, lockTime: l.lockTime! });
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
    }
    const rules = p.clauses.reduce((n, c) => n + c.limits.length, 0);
    if (p.clauses.length === 1 && rules === 1 && ONE_RULE_COMMANDS.has(p.clauses[0].clause.kind)) {
      const only = p.clauses[0];
      const r = await this.one(only.clause);
      const state = stateOf(only.limits[0], r);
      return finish(policy, state, [state]);
    }
    const clauses = p.clauses.map((c) => c.clause);
    let all: d.AllDecision;
    try {
      all = await this.client.all(clauses, { details: policy.options.details && this.detailsSupported });
    } catch (e) {
      // A module build older than DETAILS: remember, and decide without it
      // (the decision then holds the binding limit's state only).
      if (!(e instanceof RateLimitError && /unknown option 'DETAILS'/.test(e.message))) throw e;
      this.detailsSupported = false;
      all = await this.client.all(clauses);
    }
    if (!all.details) {
      const state = stateOf(p.clauses[all.clause - 1].limits[all.rule - 1], all);
      return finish(policy, state, [state]);
    }
    const byLimit = new Map<Limit, LimitState>();
    p.clauses.forEach((c, ci) => c.limits.forEach((l, ri) => byLimit.set(l, stateOf(l, all.details![ci][ri]))));
    const binding = byLimit.get(p.clauses[all.clause - 1].limits[all.rule - 1])!;
    return finish(
      policy,
      binding,
      policy.limits.map((l) => byLimit.get(l)!),
    );
  }

  private one(c: b.Clause): Promise<d.Decision> {
    switch (c.kind) {
      case "check":
        return this.client.check(c.key, c.rules, { cost: c.cost });
      case "throttle":
        return this.client.throttle(c.key, c.rules, { cost: c.cost });
      case "quota":
        return this.client.quota(c.key, c.zone, c.periods, { cost: c.cost });
      case "lease":
        return this.client.lease(c.key, { limit: c.limit, ttl: c.ttl, token: c.token, cost: c.cost });
    }
  }

  /** The calls that give back a permit's lease and settle its estimate to `used`. */
  settlementCalls(p: Plan, estimate: number, used: number, token: string | null): Call[] {
    const calls: Call[] = [];
    for (const { clause: c, costKind } of p.clauses) {
      if (c.kind === "lease") {
        if (token) calls.push(b.release(c.key, token));
        continue;
      }
      if (costKind !== "estimate" || used === estimate) continue;
      const mode = used < estimate ? { refund: true } : { debit: true };
      let cost = Math.abs(estimate - used);
      if (c.kind === "check") cost = Math.min(cost, 10000); // RL.CHECK's cap (one member per unit)
      if (c.kind === "check") calls.push(b.check("RL.CHECK", c.key, c.rules, { ...mode, cost }));
      if (c.kind === "throttle") calls.push(b.throttle("RL.THROTTLE", c.key, c.rules, { ...mode, cost }));
      if (c.kind === "quota") calls.push(b.quota("RL.QUOTA", c.key, c.zone, c.periods, { ...mode, cost }));
    }
    return calls;
  }

  /** Called by Permit.close: one round trip (a pipeline) for every settlement and the release. */
  async settle(calls: Call[]): Promise<void> {
    if (calls.length === 0) return;
    const replies = await this.guarded(() => this.client.batch(calls));
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

function b_int(what: string, v: number): number {
  if (!Number.isInteger(v) || v < 1 || v > Number.MAX_SAFE_INTEGER) throw new RangeError(`invalid ${what} '${v}': expected an integer from 1 to ${Number.MAX_SAFE_INTEGER}`);
  return v;
}

function stateOf(l: Limit, r: d.Decision): LimitState {
  return Object.freeze({
    name: l.name,
    kind: l.kind,
    limited: r.limited,
    limit: l.limit,
    window: l.window,
    remaining: r.remaining,
    retryAfter: r.retryAfter,
    resetAfter: r.resetAfter,
  });
}

function finish(policy: Policy, binding: LimitState, limits: LimitState[]): PolicyDecision {
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
 * (the lease then expires by its TTL).
 */
export class Permit implements AsyncDisposable {
  private usedUnits: number | null = null;
  private closing: Promise<void> | null = null;
  private readonly abort = new AbortController();
  private readonly unlisten: () => void = () => {};

  constructor(
    private readonly limiter: RateLimiter,
    readonly decision: PolicyDecision,
    private readonly planned: Plan | null,
    /** Units taken up front on the estimate limits. */
    readonly estimate: number,
    /** The lease's token (null without an in-flight limit or when refused). */
    readonly token: string | null,
    signal?: AbortSignal,
  ) {
    if (signal && planned) {
      const onAbort = () => {
        this.abort.abort(signal.reason);
        void this.close();
      };
      if (signal.aborted) onAbort();
      else {
        signal.addEventListener("abort", onAbort, { once: true });
        this.unlisten = () => signal.removeEventListener("abort", onAbort);
      }
    }
  }

  /** Admitted (holds what it took). */
  get admitted(): boolean {
    return !this.decision.limited;
  }

  /** Aborted when the permit closes early (its caller's signal fired): stop the work. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Reports the real usage on the estimate limits (replaces an earlier report). */
  used(units: number): void {
    if (!Number.isInteger(units) || units < 0) throw new RangeError(`invalid used '${units}': expected an integer >= 0`);
    this.usedUnits = units;
  }

  /** Releases the lease and settles the estimate, in one round trip. */
  close(): Promise<void> {
    if (!this.closing) {
      this.unlisten();
      this.closing = this.planned
        ? this.limiter.settle(this.limiter.settlementCalls(this.planned, this.estimate, this.usedUnits ?? 0, this.token)).catch((e) => this.limiter.report(e))
        : Promise.resolve();
    }
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
