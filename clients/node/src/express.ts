/**
 * express middleware: decides a policy for each request before its
 * handler, answers refusals (429 problem JSON, `Retry-After`, `RateLimit`
 * headers), holds the permit of a policy with an in-flight limit or an
 * estimate until the response is fully sent (a stream's last byte
 * included) — or, when the client went away, until the handler ends its
 * response (`res.end()`, which a handler does also when it stops early on
 * `req.rateLimit.signal`) — and fails open or closed (503) when Redis cannot
 * decide within the budget.
 *
 *   import { rateLimit, keys } from "redis-ratelimit/express";
 *   app.get("/api", rateLimit({ limiter, policy, key: keys.ip() }), handler);
 */
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { ModuleNotLoadedError, RateLimitError, RateLimitUnavailableError } from "./errors";
import type { PolicyCall } from "./combined";
import type { Permit, PolicyDecision, RateLimiter } from "./limiter";
import type { FailureMode, Policy } from "./policy";
import { closeWhenDone } from "./response";
import { clientIpKey, userKey } from "./identity";
import { exemption, type Exemptions } from "./exempt";
import { PROBLEM_JSON, ProblemError, misconfigured, problem, rateLimitHeaders, redisRefused, refusal, resolvedUnits, unavailable, type Problem } from "./problems";

export { ProblemError, PROBLEM_BASE, PROBLEM_JSON, misconfigured, problem, rateLimitHeaders, refusal, unavailable } from "./problems";
export type { Problem } from "./problems";

/** Turns a request into the policy's key; may throw `ProblemError` (401 for a missing user, 400 ...). */
export type KeyResolver = (req: Request) => string | Promise<string>;

/** A policy, the resolver of its key, and the request's cost, estimate, zone and subkeys for it. */
export interface PolicyRoute {
  readonly policy: Policy;
  readonly key: KeyResolver;
  /** Units of this request on the policy's `"request"` limits (default 1). */
  readonly cost?: (req: Request) => number;
  /** Units taken up front on `"estimate"` limits; settled to `req.rateLimit.used(n)` when the response ends. */
  readonly estimate?: (req: Request) => number;
  /** Zone of quotas declared with zone `null` (e.g. from a header). */
  readonly zone?: (req: Request) => string;
  /** Discriminators of `subkey` limits (e.g. a hash of the body for duplicates). */
  readonly subkeys?: (req: Request) => Record<string, string>;
}

interface CommonOptions {
  readonly limiter: RateLimiter;
  /** Also send `X-RateLimit-Limit/Remaining/Reset` (the binding limit). Default false. */
  readonly legacyHeaders?: boolean;
  /** Overrides the policy's failure mode (of several policies: closed if any is). */
  readonly failure?: Exclude<FailureMode, "local">;
  /** Requests never limited (express-rate-limit's `skip`): e.g. health checks. */
  readonly skip?: (req: Request) => boolean;
  /** Callers never limited: addresses/CIDR ranges (`req.ip`) and resolved keys (exempt.ts). */
  readonly exempt?: Exemptions;
  /**
   * A custom refusal (express-rate-limit's `handler`): given the decision and
   * the problem answer the middleware would send (status, body, headers), it
   * answers itself. Default: that answer (429 problem+json, Retry-After, RateLimit).
   */
  readonly onRefused?: (req: Request, res: Response, refusal: { decision: PolicyDecision; status: number; body: Problem; headers: Array<[string, string]> }) => void;
}

/**
 * One policy (`policy`, `key`, ...), or several on one route (`policies`:
 * a list of `{ policy, key, ... }`) decided in ONE RL.ALL — two
 * `rateLimit(...)` middlewares are two separate decisions.
 */
export type RateLimitOptions = (CommonOptions & PolicyRoute) | (CommonOptions & { readonly policies: readonly PolicyRoute[] });

/** What the middleware leaves on `req.rateLimit` for the handler. */
export interface RateLimitInfo {
  /** null when Redis could not decide and the policy failed open. */
  readonly decision: PolicyDecision | null;
  readonly permit: Permit | null;
  /** Reports the real usage of the estimate limits (tokens an LLM answer took). */
  used(units: number): void;
  /**
   * Aborted when the client disconnects before the response ends: stop the
   * work, then end the response (`res.end()`); the permit closes then
   * (CLIENTS.md §4), not at the disconnect.
   */
  readonly signal: AbortSignal;
}

declare module "express-serve-static-core" {
  interface Request {
    rateLimit?: RateLimitInfo;
  }
}

function send(res: Response, p: Problem, headers: Array<[string, string]> = []): void {
  for (const [k, v] of headers) res.setHeader(k, v);
  res.status(p.status).type(PROBLEM_JSON).send(JSON.stringify(p));
}

export function rateLimit(options: RateLimitOptions): RequestHandler {
  const { limiter } = options;
  const routes: readonly PolicyRoute[] = "policies" in options ? options.policies : [options];
  if (!Array.isArray(routes) || routes.length === 0) throw new TypeError("rateLimit: give policy and key, or policies: [{ policy, key }, ...]");
  for (const r of routes) {
    if (!r || typeof r.policy?.compile !== "function" || typeof r.key !== "function") throw new TypeError("rateLimit: each of policies needs a policy and a key resolver");
  }
  const single = routes.length === 1;
  const policy = routes[0].policy;
  const needsPermit = routes.some((r) => r.policy.needsPermit);
  // Named in the 503 of several policies.
  const named = single ? policy : { name: routes.map((r) => r.policy.name).join("+") };
  const failure = options.failure ?? (routes.some((r) => r.policy.options.failure === "closed") ? "closed" : "open");
  const exempt = exemption(options.exempt);
  return async function rateLimitMiddleware(req: Request, res: Response, next: NextFunction) {
    if (options.skip?.(req) || exempt(req.ip, [])) return next();
    // Aborted when the client goes away before the response ends; made only
    // when someone needs it (a permit, or a handler reading the signal).
    let aborted: AbortController | null = null;
    const abortSignal = () => {
      if (!aborted) {
        const controller = (aborted = new AbortController());
        if (res.writableFinished) return controller.signal;
        if (res.destroyed) controller.abort(new Error("client disconnected"));
        else
          res.once("close", () => {
            if (!res.writableFinished) controller.abort(new Error("client disconnected"));
          });
      }
      return aborted.signal;
    };
    const calls: PolicyCall[] = [];
    let signal: AbortSignal | undefined;
    try {
      for (const r of routes) {
        const key = await r.key(req);
        calls.push(r.policy.bind(key, { cost: resolvedUnits("cost", r.cost, req), estimate: resolvedUnits("estimate", r.estimate, req), zone: r.zone?.(req), subkeys: r.subkeys?.(req) }));
      }
      if (exempt(undefined, calls.map((c) => c.key))) return next();
      signal = needsPermit ? abortSignal() : undefined;
    } catch (e) {
      if (e instanceof ProblemError) return send(res, e.problem);
      if (e instanceof RangeError || e instanceof TypeError) return send(res, problem(400, "bad-request", e.message));
      return next(e);
    }
    let decision: PolicyDecision;
    let permit: Permit | null = null;
    try {
      if (needsPermit) {
        permit = single ? await limiter.acquire(policy, calls[0].key, calls[0].options) : await limiter.acquireAll(calls);
        // The client left while the decision was in flight: nobody to
        // answer, so the work does not start and the permit closes now.
        if (signal?.aborted) {
          void permit.close();
          return;
        }
        decision = permit.decision;
      } else {
        decision = single ? await limiter.decide(policy, calls[0].key, calls[0].options) : await limiter.decideAll(calls);
      }
    } catch (e) {
      if (e instanceof RateLimitUnavailableError) {
        if (failure === "closed") return send(res, unavailable(named));
        req.rateLimit = info(null, null, abortSignal);
        return next();
      }
      if (e instanceof RangeError) return send(res, problem(400, "bad-request", e.message));
      // The module (or the Functions library) missing at the first call's
      // check: a 500 problem naming it (as the Python adapters), not the
      // framework's plain error page, nor a Redis-down 503.
      if (e instanceof ModuleNotLoadedError) {
        console.error(`redis-ratelimit: ${e.message}`);
        return send(res, misconfigured(e.message));
      }
      // Any other error reply (OOM, NOPERM, WRONGTYPE, ...) is not Redis
      // down either: a 500 naming it, as the Spring starter and Python answer.
      if (e instanceof RateLimitError) {
        const p = redisRefused(named, e);
        console.error(`redis-ratelimit: ${p.detail}`);
        return send(res, p);
      }
      return next(e);
    }
    const headers = rateLimitHeaders(decision, options.legacyHeaders);
    if (decision.limited) {
      const r = refusal(decision);
      if (options.onRefused) return options.onRefused(req, res, { decision, status: r.body.status, body: r.body, headers: [...headers, ...r.headers] });
      return send(res, r.body, [...headers, ...r.headers]);
    }
    for (const [k, v] of headers) res.setHeader(k, v);
    if (permit) closeWhenDone(res, permit);
    req.rateLimit = info(decision, permit, abortSignal);
    next();
  };
}

function info(decision: PolicyDecision | null, permit: Permit | null, signal: () => AbortSignal): RateLimitInfo {
  return Object.freeze({
    decision,
    permit,
    used: (n: number) => permit?.used(n),
    get signal() {
      return signal();
    },
  });
}

/** Key resolvers for the common identities. */
export const keys = {
  /** The client's IP as express computes it (`req.ip`), honouring the app's `trust proxy` setting. */
  ip(): KeyResolver {
    return (req) => clientIpKey(req.ip ?? req.socket.remoteAddress);
  },
  /** The authenticated user: `req.user.id` by default; 401 when there is none. */
  user(resolve: (req: Request) => unknown = (req) => (req as Request & { user?: { id?: unknown } }).user?.id): KeyResolver {
    return (req) => userKey(resolve(req));
  },
  /** A request header; `status` 401 (default) or 400 when it is missing. */
  header(name: string, status: 400 | 401 = 401): KeyResolver {
    return (req) => {
      const v = req.get(name);
      if (!v) throw new ProblemError(status, status === 401 ? "unauthorized" : "bad-request", `missing ${name} header`);
      return v;
    };
  },
  /** A route parameter (`/user/:userId`). */
  param(name: string): KeyResolver {
    return (req) => {
      const v = req.params?.[name];
      if (typeof v !== "string" || v === "") throw new ProblemError(400, "bad-request", `missing route parameter ${name}`);
      return v;
    };
  },
};
