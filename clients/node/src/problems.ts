/**
 * HTTP answers shared by every adapter (clients/DESIGN.md): RFC 9457
 * problem bodies, `Retry-After`, and the IETF `RateLimit-Policy` /
 * `RateLimit` fields (draft-ietf-httpapi-ratelimit-headers), built from a
 * policy decision. Framework-free so other adapters can use them.
 */
import type { LimitState, PolicyDecision } from "./limiter";
import type { Policy } from "./policy";
import { invalid } from "./args";

export const PROBLEM_BASE = "https://redis-ratelimit.dev/problems/";
export const PROBLEM_JSON = "application/problem+json";

export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
}

const TITLES: Record<number, string> = { 400: "Bad Request", 401: "Unauthorized", 429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable" };

export function problem(status: number, slug: string, detail: string): Problem {
  return { type: PROBLEM_BASE + slug, title: TITLES[status] ?? "Error", status, detail };
}

/**
 * A request's cost or estimate from its resolver. A resolver that gives
 * nothing (`undefined`/`null`: a missing header or JSON field) is the
 * client's bad input, a `RangeError` naming the field (400 in the adapters),
 * as the Spring starter answers a null cost expression and the Python
 * adapters a `None` — never a silent charge of 1 (CLIENTS.md §2, §5).
 * Without a resolver the policy's default stands (an estimate is the cost).
 */
export function resolvedUnits<Q>(field: "cost" | "estimate", resolve: ((req: Q) => number) | undefined, req: Q): number | undefined {
  if (resolve === undefined) return undefined;
  const units = resolve(req) as number | null | undefined;
  if (units === undefined || units === null) throw invalid(field, new RangeError(`the request gives no ${field}: its resolver returned ${units}`));
  return units;
}

/** An HTTP refusal raised by a key resolver or a validator (400, 401 ...): answered as problem JSON. */
export class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly slug: string,
    detail: string,
  ) {
    super(detail);
    this.name = "ProblemError";
  }
  get problem(): Problem {
    return problem(this.status, this.slug, this.message);
  }
}

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));
const sfString = (s: string) => `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

/** `"short";q=2;w=10` — a bucket of N per W s is `q=N;w=W`, an in-flight limit has no `w`. */
export const policyItem = (s: LimitState) => `${sfString(s.name)};q=${s.limit}` + (s.window === null ? "" : `;w=${seconds(s.window)}`);
/** `"short";r=1;t=10`. */
export const stateItem = (s: LimitState) => `${sfString(s.name)};r=${s.remaining};t=${seconds(s.resetAfter)}`;

/** The response headers of a decision, in order. `legacy`: also `X-RateLimit-Limit/Remaining/Reset` of the binding limit. */
export function rateLimitHeaders(d: PolicyDecision, legacy = false): Array<[string, string]> {
  const h: Array<[string, string]> = [
    ["RateLimit-Policy", d.limits.map(policyItem).join(", ")],
    ["RateLimit", d.limits.map(stateItem).join(", ")],
  ];
  if (legacy) {
    h.push(["X-RateLimit-Limit", String(d.binding.limit)], ["X-RateLimit-Remaining", String(d.binding.remaining)], ["X-RateLimit-Reset", String(seconds(d.binding.resetAfter))]);
  }
  return h;
}

/** 429: headers (Retry-After unless waiting cannot help) and the problem body. */
export function refusal(d: PolicyDecision): { headers: Array<[string, string]>; body: Problem } {
  let detail = `limit '${d.binding.name}' of '${d.policy}' exceeded`;
  const headers: Array<[string, string]> = [];
  if (d.retryAfter !== null) {
    headers.push(["Retry-After", String(seconds(d.retryAfter))]);
    detail += `; retry after ${seconds(d.retryAfter)} s`;
  } else {
    detail += "; waiting cannot help";
  }
  return { headers, body: problem(429, d.problem, detail) };
}

export function unavailable(policy: Pick<Policy, "name">): Problem {
  return problem(503, "unavailable", `rate limits of '${policy.name}' cannot be decided: Redis is unreachable`);
}

/**
 * 500 `…/problems/misconfigured` (as the Python adapters and the Spring
 * starter answer): the limits cannot be decided at all, e.g. the module is
 * not loaded on the server (`ModuleNotLoadedError`, its message the detail).
 */
export function misconfigured(detail: string): Problem {
  return problem(500, "misconfigured", detail);
}

/**
 * Redis answered the decision with an error reply that is not "Redis
 * unavailable" (OOM over maxmemory, NOPERM, WRONGTYPE at a key another app
 * wrote, ...): the deployment's mistake, which no Redis-down mode can hide.
 * The Spring starter's answer and detail: 500 `misconfigured` naming the
 * policy and the server's text (the adapters log it once at error level).
 */
export function redisRefused(policy: Pick<Policy, "name">, error: Error): Problem {
  return misconfigured(`Redis refused rate limit '${policy.name}': ${error.message}`);
}
