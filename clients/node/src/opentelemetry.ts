/**
 * OpenTelemetry metrics from the decision hooks (see `metrics.ts` for the
 * instruments): `new RateLimiter(redis, { hooks: [new OpenTelemetryHooks()] })`.
 * Uses the global MeterProvider unless given a `meter`; only
 * `@opentelemetry/api` is imported (an optional peer dependency: the SDK
 * and its exporters are the application's choice).
 */
import { metrics, type Counter, type Histogram, type Meter } from "@opentelemetry/api";
import type { DecisionEvent, DecisionHooks, LateGiveBack } from "./hooks";
import { DESCRIPTIONS, LATENCY_BUCKETS } from "./metrics";

export class OpenTelemetryHooks implements DecisionHooks {
  readonly decisions: Histogram;
  readonly fallbacks: Counter;
  readonly lateGiveBacks: Counter;

  constructor(meter: Meter = metrics.getMeter("redis-ratelimit")) {
    this.decisions = meter.createHistogram("ratelimit.decisions", { unit: "s", description: DESCRIPTIONS.decisions, advice: { explicitBucketBoundaries: [...LATENCY_BUCKETS] } });
    this.fallbacks = meter.createCounter("ratelimit.fallbacks", { description: DESCRIPTIONS.fallbacks });
    this.lateGiveBacks = meter.createCounter("ratelimit.late_give_backs", { description: DESCRIPTIONS.lateGiveBacks });
  }

  decided(e: DecisionEvent): void {
    this.decisions.record(e.seconds, { policy: e.policy, outcome: e.outcome, limit: e.limit ?? "none" });
    if (e.mode !== null) this.fallbacks.add(1, { policy: e.policy, mode: e.mode });
  }

  gaveBackLate(e: LateGiveBack): void {
    this.lateGiveBacks.add(1, { policy: e.policy });
  }
}
