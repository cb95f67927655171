/**
 * Decision hooks: how a service sees its decisions without wrapping every
 * call. Give the limiter `hooks: [...]` (`new RateLimiter(redis, { hooks })`);
 * each hook is told, synchronously (keep it cheap), of
 *
 * - every decision (`decided`): `admitted`, `refused` (with the binding
 *   limit's name), or `unavailable` (Redis could not decide: the policy's
 *   Redis-down `mode`, `fail_open` or `fail_closed`), and how long it took
 *   (the Redis round trip included, seconds);
 * - every late give-back (`gaveBackLate`): an admission whose reply landed
 *   after its budget, whose lease and estimate were given back at once.
 *
 * Only names are passed — the policy's (`a+b` for several bound in one
 * call) and its limits' — never the caller's key, so a metric labelled by
 * them cannot grow a series per caller. `redis-ratelimit/opentelemetry` and
 * `redis-ratelimit/prometheus` make metrics from them. A hook that throws
 * is reported to `onError`, never fails the request. The same events as the
 * Python package's `redis_rl.hooks`.
 */
import { RateLimitUnavailableError } from "./errors";
import type { PolicyDecision } from "./limiter";
import type { Policy } from "./policy";

export type Outcome = "admitted" | "refused" | "unavailable";
export type RedisDownMode = "fail_open" | "fail_closed" | "local";

export interface DecisionEvent {
  readonly policy: string;
  readonly outcome: Outcome;
  /** The binding limit of a refusal (null otherwise). */
  readonly limit: string | null;
  /** The Redis-down answer of an `unavailable` decision (null otherwise). */
  readonly mode: RedisDownMode | null;
  readonly seconds: number;
}

export interface LateGiveBack {
  readonly policy: string;
}

export interface DecisionHooks {
  decided?(event: DecisionEvent): void;
  gaveBackLate?(event: LateGiveBack): void;
}

/** Checked when the limiter is made, not at the first decision. */
export function checkHooks(hooks: unknown): readonly DecisionHooks[] {
  if (hooks === undefined) return [];
  if (!Array.isArray(hooks)) throw new TypeError("hooks must be an array of { decided?(event), gaveBackLate?(event) }");
  for (const h of hooks) {
    const ok = h !== null && typeof h === "object" && ["decided", "gaveBackLate"].every((m) => h[m] === undefined || typeof h[m] === "function");
    if (!ok || (h.decided === undefined && h.gaveBackLate === undefined)) throw new TypeError("a hook needs decided(event) and/or gaveBackLate(event)");
  }
  return Object.freeze([...hooks]);
}

/**
 * Passes `deciding` through, telling the hooks its outcome: a decision, or
 * "unavailable" when Redis could not decide (bad input and error replies
 * are no decision and tell nothing).
 */
export function observed<T extends object>(
  hooks: readonly DecisionHooks[],
  policies: readonly Pick<Policy, "name" | "options">[],
  started: number,
  deciding: Promise<T>,
  report: (e: unknown) => void,
): Promise<T> {
  if (hooks.length === 0) return deciding;
  // Several bound in one call: "a+b" (the Python package's name for them too).
  const policy = policies.map((p) => p.name).join("+");
  const tell = (outcome: Outcome, limit: string | null, mode: RedisDownMode | null) => {
    const event: DecisionEvent = Object.freeze({ policy, outcome, limit, mode, seconds: (performance.now() - started) / 1000 });
    for (const h of hooks) {
      try {
        h.decided?.(event);
      } catch (e) {
        report(e);
      }
    }
  };
  return deciding.then(
    (v) => {
      const d = ("decision" in v ? v.decision : v) as PolicyDecision;
      tell(d.limited ? "refused" : "admitted", d.limited ? d.binding.name : null, null);
      return v;
    },
    (e) => {
      if (e instanceof RateLimitUnavailableError) {
        // Fails closed if any bound policy does (as the adapters answer).
        // Fails closed if any bound policy does (as the adapters answer); else a local policy decides locally.
        const mode = policies.some((p) => p.options.failure === "closed") ? "fail_closed" : policies.some((p) => p.options.failure === "local") ? "local" : "fail_open";
        tell("unavailable", null, mode);
      }
      throw e;
    },
  );
}

export function gaveBackLate(hooks: readonly DecisionHooks[], policy: string, report: (e: unknown) => void): void {
  for (const h of hooks) {
    try {
      h.gaveBackLate?.({ policy });
    } catch (e) {
      report(e);
    }
  }
}
