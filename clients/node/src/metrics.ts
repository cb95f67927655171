/**
 * What the metric hooks share (`redis-ratelimit/opentelemetry`,
 * `redis-ratelimit/prometheus`): the same three instruments as the Spring
 * starter's Micrometer meters and the Python package's, labelled by policy
 * and limit names only (never keys):
 *
 * - `ratelimit.decisions` — each decision's latency in seconds (histogram),
 *   by `policy`, `outcome` (admitted, refused, unavailable) and `limit` (the
 *   refusal's binding limit; `none` otherwise);
 * - `ratelimit.fallbacks` — decisions answered by the Redis-down mode, by
 *   `policy` and `mode` (fail_open, fail_closed);
 * - `ratelimit.late_give_backs` — admissions whose reply landed after the
 *   budget and were given back, by `policy`.
 *
 * Prometheus names them `ratelimit_decisions_seconds`,
 * `ratelimit_fallbacks_total` and `ratelimit_late_give_backs_total`.
 */

/** Seconds: a decision is one Redis round trip (sub-millisecond to a few ms), bounded by its budget (500 ms by default). */
export const LATENCY_BUCKETS: readonly number[] = Object.freeze([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]);

export const DESCRIPTIONS = Object.freeze({
  decisions: "Rate-limit decisions and their latency (the Redis round trip included)",
  fallbacks: "Rate-limit decisions answered by the policy's Redis-down mode",
  lateGiveBacks: "Admissions whose reply landed after the budget, given back at once",
});
