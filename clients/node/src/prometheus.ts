/**
 * Prometheus metrics from the decision hooks (see `metrics.ts` for the
 * instruments): `new RateLimiter(redis, { hooks: [new PrometheusHooks()] })`.
 * Registers in prom-client's default registry unless given one (prom-client
 * is an optional peer dependency): make it once per process, since a
 * registry refuses a second metric of the same name.
 */
import { Counter, Histogram, register as defaultRegistry, type Registry } from "prom-client";
import type { DecisionEvent, DecisionHooks, LateGiveBack } from "./hooks";
import { DESCRIPTIONS, LATENCY_BUCKETS } from "./metrics";

export class PrometheusHooks implements DecisionHooks {
  readonly decisions: Histogram<"policy" | "outcome" | "limit">;
  readonly fallbacks: Counter<"policy" | "mode">;
  readonly lateGiveBacks: Counter<"policy">;

  constructor(registry: Registry = defaultRegistry) {
    const registers = [registry];
    this.decisions = new Histogram({ name: "ratelimit_decisions_seconds", help: DESCRIPTIONS.decisions, labelNames: ["policy", "outcome", "limit"], buckets: [...LATENCY_BUCKETS], registers });
    this.fallbacks = new Counter({ name: "ratelimit_fallbacks_total", help: DESCRIPTIONS.fallbacks, labelNames: ["policy", "mode"], registers });
    this.lateGiveBacks = new Counter({ name: "ratelimit_late_give_backs_total", help: DESCRIPTIONS.lateGiveBacks, labelNames: ["policy"], registers });
  }

  decided(e: DecisionEvent): void {
    this.decisions.observe({ policy: e.policy, outcome: e.outcome, limit: e.limit ?? "none" }, e.seconds);
    if (e.mode !== null) this.fallbacks.inc({ policy: e.policy, mode: e.mode });
  }

  gaveBackLate(e: LateGiveBack): void {
    this.lateGiveBacks.inc({ policy: e.policy });
  }
}
