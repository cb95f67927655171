/**
 * express middleware: decides a policy for each request before its
 * handler, answers refusals (429 problem JSON, `Retry-After`, `RateLimit`
 * headers), holds the permit of a policy with an in-flight limit or an
 * estimate until the response ends or the client goes away, and fails
 * open or closed (503) when Redis cannot decide within the budget.
 *
 *   import { rateLimit, keys } from "redis-ratelimit/express";
 *   app.get("/api", rateLimit({ limiter, policy, key: keys.ip() }), handler);
 */
import type { NextFunction, Request, RequestHandler, Response } from "express";
import { RateLimitUnavailableError } from "./errors";
import type { AcquireOptions, Permit, PolicyDecision, RateLimiter } from "./limiter";
import type { FailureMode, Policy } from "./policy";
import { PROBLEM_JSON, ProblemError, problem, rateLimitHeaders, refusal, unavailable, type Problem } from "./problems";

export { ProblemError, PROBLEM_BASE, PROBLEM_JSON, problem, rateLimitHeaders, refusal, unavailable } from "./problems";
export type { Problem } from "./problems";

/** Turns a request into the policy's key; may throw `ProblemError` (401 for a missing user, 400 ...). */
export type KeyResolver = (req: Request) => string | Promise<string>;

export interface RateLimitOptions {
  readonly limiter: RateLimiter;
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
  /** Also send `X-RateLimit-Limit/Remaining/Reset` (the binding limit). Default false. */
  readonly legacyHeaders?: boolean;
  /** Overrides the policy's failure mode. */
  readonly failure?: FailureMode;
}

/** What the middleware leaves on `req.rateLimit` for the handler. */
export interface RateLimitInfo {
  /** null when Redis could not decide and the policy failed open. */
  readonly decision: PolicyDecision | null;
  readonly permit: Permit | null;
  /** Reports the real usage of the estimate limits (tokens an LLM answer took). */
  used(units: number): void;
  /** Aborted when the client disconnects before the response ends: stop the work. */
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
  const { limiter, policy } = options;
  const failure = options.failure ?? policy.options.failure;
  return async function rateLimitMiddleware(req: Request, res: Response, next: NextFunction) {
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
    let opts: AcquireOptions;
    let key: string;
    try {
      key = await options.key(req);
      opts = {
        cost: options.cost?.(req),
        estimate: options.estimate?.(req),
        zone: options.zone?.(req),
        subkeys: options.subkeys?.(req),
        signal: policy.needsPermit ? abortSignal() : undefined,
      };
    } catch (e) {
      if (e instanceof ProblemError) return send(res, e.problem);
      if (e instanceof RangeError || e instanceof TypeError) return send(res, problem(400, "bad-request", e.message));
      return next(e);
    }
    let decision: PolicyDecision;
    let permit: Permit | null = null;
    try {
      if (policy.needsPermit) {
        permit = await limiter.acquire(policy, key, opts);
        // The client left while the decision was in flight: the permit has
        // already given its lease back, so the work must not start.
        if (permit.signal.aborted) return;
        decision = permit.decision;
      } else {
        decision = await limiter.decide(policy, key, opts);
      }
    } catch (e) {
      if (e instanceof RateLimitUnavailableError) {
        if (failure === "closed") return send(res, unavailable(policy));
        req.rateLimit = info(null, null, abortSignal);
        return next();
      }
      if (e instanceof RangeError) return send(res, problem(400, "bad-request", e.message));
      return next(e);
    }
    const headers = rateLimitHeaders(decision, options.legacyHeaders);
    if (decision.limited) {
      const r = refusal(decision);
      return send(res, r.body, [...headers, ...r.headers]);
    }
    for (const [k, v] of headers) res.setHeader(k, v);
    if (permit) {
      const held = permit;
      // The response's end, or the client's disconnect, closes the permit:
      // the lease is released and the estimate settled to what was reported.
      res.once("finish", () => void held.close());
      res.once("close", () => void held.close());
    }
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
    return (req) => {
      const ip = req.ip ?? req.socket.remoteAddress;
      if (!ip) throw new ProblemError(400, "bad-request", "the client address is unknown");
      return ip;
    };
  },
  /** The authenticated user: `req.user.id` by default; 401 when there is none. */
  user(resolve: (req: Request) => unknown = (req) => (req as Request & { user?: { id?: unknown } }).user?.id): KeyResolver {
    return (req) => {
      const id = resolve(req);
      if (id === undefined || id === null || id === "") throw new ProblemError(401, "unauthorized", "authentication required");
      return String(id);
    };
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
