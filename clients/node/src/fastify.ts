/**
 * Fastify plugin: a route that says `config: { rateLimit: { policy, key } }`
 * is decided before its handler (a `preHandler` hook, so the body is parsed
 * and the route's own `preHandler`s — auth, validation — ran first), and
 * answered as every adapter answers (clients/DESIGN.md): 429 problem JSON
 * with `Retry-After` and `RateLimit` headers, 503 when Redis cannot decide
 * and the policy fails closed, 400/401 from key resolvers. A policy with an
 * in-flight limit or an estimate holds its permit until the response is
 * sent — a stream's last byte included — or the client goes away
 * (`request.rateLimit.signal` tells the handler to stop).
 *
 *   import { rateLimitPlugin, keys } from "redis-ratelimit/fastify";
 *   await app.register(rateLimitPlugin, { limiter });
 *   app.get("/api", { config: { rateLimit: { policy, key: keys.ip() } } }, handler);
 *
 * Wrapped with `fastify-plugin`, so its hook sees the routes of the context
 * that registered it; register it before those routes.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions, preHandlerAsyncHookHandler } from "fastify";
import fp from "fastify-plugin";
import { closeWhenDone } from "./response";
import { exemption, type Exemptions } from "./exempt";
import { clientIpKey, userKey } from "./identity";
import { ModuleNotLoadedError, RateLimitError, RateLimitUnavailableError } from "./errors";
import type { PolicyCall } from "./combined";
import type { Permit, PolicyDecision, RateLimiter } from "./limiter";
import type { FailureMode, Policy } from "./policy";
import { PROBLEM_JSON, ProblemError, misconfigured, problem, rateLimitHeaders, redisRefused, refusal, resolvedUnits, unavailable, type Problem } from "./problems";

export { ProblemError, PROBLEM_BASE, PROBLEM_JSON, misconfigured, problem, rateLimitHeaders, refusal, unavailable } from "./problems";
export type { Problem } from "./problems";

/** Turns a request into the policy's key; may throw `ProblemError` (401 for a missing user, 400 ...). */
export type KeyResolver = (request: FastifyRequest) => string | Promise<string>;

/** A policy, the resolver of its key, and the request's cost, estimate, zone and subkeys for it. */
export interface PolicyRoute {
  readonly policy: Policy;
  readonly key: KeyResolver;
  /** Units of this request on the policy's `"request"` limits (default 1). */
  readonly cost?: (request: FastifyRequest) => number;
  /** Units taken up front on `"estimate"` limits; settled to `request.rateLimit.used(n)` when the response ends. */
  readonly estimate?: (request: FastifyRequest) => number;
  /** Zone of quotas declared with zone `null` (e.g. from a header). */
  readonly zone?: (request: FastifyRequest) => string;
  /** Discriminators of `subkey` limits (e.g. a hash of the body for duplicates). */
  readonly subkeys?: (request: FastifyRequest) => Record<string, string>;
}

/** What a refusal handler is given: the decision and the answer the plugin would send. */
export interface Refusal {
  readonly decision: PolicyDecision;
  readonly status: number;
  readonly body: Problem;
  readonly headers: Array<[string, string]>;
}

/** Skip, exempt callers and the refusal handler: per route, or the plugin's for every route (express's same names). */
export interface Exceptions {
  /** Requests never limited (express-rate-limit's `skip`): e.g. health checks. */
  readonly skip?: (request: FastifyRequest) => boolean;
  /** Callers never limited: addresses/CIDR ranges (`request.ip`) and resolved keys (as express's `exempt`). */
  readonly exempt?: Exemptions;
  /** A custom answer to a refusal (status, body, headers): it must send the reply. */
  readonly onRefused?: (request: FastifyRequest, reply: FastifyReply, refusal: Refusal) => unknown;
}

interface CommonOptions extends Exceptions {
  /** Also send `X-RateLimit-Limit/Remaining/Reset` (the binding limit). Default: the plugin's, else false. */
  readonly legacyHeaders?: boolean;
  /** Overrides the policy's failure mode (of several policies: closed if any is). */
  readonly failure?: Exclude<FailureMode, "local">;
}

/**
 * A route's `config.rateLimit`: one policy (`policy`, `key`, ...), or
 * several (`policies: [{ policy, key, ... }]`) decided in ONE RL.ALL.
 */
export type RouteRateLimit = (CommonOptions & PolicyRoute) | (CommonOptions & { readonly policies: readonly PolicyRoute[] });

export interface RateLimitPluginOptions extends Exceptions {
  readonly limiter: RateLimiter;
  /** The default of every route's `legacyHeaders`. */
  readonly legacyHeaders?: boolean;
  /**
   * The limit of every route that has no `config.rateLimit` of its own (a
   * route's own replaces it; `config: { rateLimit: false }` opts a route out).
   * `skip`, `exempt` and `onRefused` here are every route's defaults.
   */
  readonly default?: RouteRateLimit;
}

/** What the plugin leaves on `request.rateLimit` for the handler (null on routes without a limit). */
export interface RateLimitInfo {
  /** null when Redis could not decide and the policy failed open. */
  readonly decision: PolicyDecision | null;
  readonly permit: Permit | null;
  /** Reports the real usage of the estimate limits (tokens an LLM answer took). */
  used(units: number): void;
  /** Aborted when the client disconnects before the response ends: stop the work. */
  readonly signal: AbortSignal;
}

declare module "fastify" {
  interface FastifyContextConfig {
    rateLimit?: RouteRateLimit | false;
  }
  interface FastifyRequest {
    rateLimit: RateLimitInfo | null;
  }
}

function send(reply: FastifyReply, p: Problem, headers: Array<[string, string]> = []): FastifyReply {
  for (const [k, v] of headers) reply.header(k, v);
  return reply.code(p.status).type(PROBLEM_JSON).send(JSON.stringify(p));
}

/** The route's preHandler for its `config.rateLimit`. */
function handlerFor(limiter: RateLimiter, options: RouteRateLimit, legacyDefault: boolean, defaults: Exceptions = {}): preHandlerAsyncHookHandler {
  const routes: readonly PolicyRoute[] = "policies" in options ? options.policies : [options];
  if (!Array.isArray(routes) || routes.length === 0) throw new TypeError("rateLimit: give policy and key, or policies: [{ policy, key }, ...]");
  for (const r of routes) {
    if (!r || typeof r.policy?.compile !== "function" || typeof r.key !== "function") throw new TypeError("rateLimit: each of policies needs a policy and a key resolver");
  }
  const single = routes.length === 1;
  const policy = routes[0].policy;
  const needsPermit = routes.some((r) => r.policy.needsPermit);
  const legacy = options.legacyHeaders ?? legacyDefault;
  // Named in the 503 of several policies.
  const named = single ? policy : { name: routes.map((r) => r.policy.name).join("+") };
  const failure = options.failure ?? (routes.some((r) => r.policy.options.failure === "closed") ? "closed" : "open");
  const skip = options.skip ?? defaults.skip;
  const exempt = exemption(options.exempt ?? defaults.exempt); // a bad address or range fails at start
  const onRefused = options.onRefused ?? defaults.onRefused;

  return async function rateLimitPreHandler(request: FastifyRequest, reply: FastifyReply) {
    if (skip?.(request) || exempt(request.ip, [])) return;
    const res = reply.raw;
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
        const key = await r.key(request);
        calls.push(r.policy.bind(key, { cost: resolvedUnits("cost", r.cost, request), estimate: resolvedUnits("estimate", r.estimate, request), zone: r.zone?.(request), subkeys: r.subkeys?.(request) }));
      }
      if (exempt(undefined, calls.map((c) => c.key))) return;
      signal = needsPermit ? abortSignal() : undefined;
    } catch (e) {
      if (e instanceof ProblemError) return send(reply, e.problem);
      if (e instanceof RangeError || e instanceof TypeError) return send(reply, problem(400, "bad-request", e.message));
      throw e;
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
          return reply;
        }
        decision = permit.decision;
      } else {
        decision = single ? await limiter.decide(policy, calls[0].key, calls[0].options) : await limiter.decideAll(calls);
      }
    } catch (e) {
      if (e instanceof RateLimitUnavailableError) {
        if (failure === "closed") return send(reply, unavailable(named));
        request.rateLimit = info(null, null, abortSignal);
        return;
      }
      if (e instanceof RangeError) return send(reply, problem(400, "bad-request", e.message));
      // The module (or the Functions library) missing at the first call's
      // check: a 500 problem naming it (as the Python adapters), not the
      // framework's plain error page, nor a Redis-down 503.
      if (e instanceof ModuleNotLoadedError) {
        request.log.error(`redis-ratelimit: ${e.message}`);
        return send(reply, misconfigured(e.message));
      }
      // Any other error reply (OOM, NOPERM, WRONGTYPE, ...) is not Redis
      // down either: a 500 naming it, as the Spring starter and Python answer.
      if (e instanceof RateLimitError) {
        const p = redisRefused(named, e);
        request.log.error(`redis-ratelimit: ${p.detail}`);
        return send(reply, p);
      }
      throw e;
    }
    const headers = rateLimitHeaders(decision, legacy);
    if (decision.limited) {
      const r = refusal(decision);
      if (onRefused) {
        await onRefused(request, reply, { decision, status: r.body.status, body: r.body, headers: [...headers, ...r.headers] });
        return reply;
      }
      return send(reply, r.body, [...headers, ...r.headers]);
    }
    for (const [k, v] of headers) reply.header(k, v);
    // The response's last byte closes the permit; a disconnect only once the
    // handler's work ended (its body handed over: a stream the disconnect
    // destroyed), never while the handler still runs (CLIENTS.md §4).
    if (permit) closeWhenDone(res, permit, () => reply.sent || res.headersSent);
    request.rateLimit = info(decision, permit, abortSignal);
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

function plugin(fastify: FastifyInstance, options: RateLimitPluginOptions, done: (err?: Error) => void): void {
  const { limiter } = options ?? {};
  if (!limiter || typeof limiter.decide !== "function") return done(new TypeError("rateLimitPlugin: give { limiter: new RateLimiter(redis) }"));
  const legacy = options.legacyHeaders ?? false;
  fastify.decorateRequest("rateLimit", null);
  fastify.addHook("onRoute", (route: RouteOptions) => {
    const own = (route.config as { rateLimit?: RouteRateLimit | false } | undefined)?.rateLimit;
    const config = own === false ? undefined : own ?? options.default;
    if (!config) return;
    const hook = handlerFor(limiter, config, legacy, options); // a bad config fails at start, naming the route
    const pre = route.preHandler;
    route.preHandler = pre === undefined ? [hook] : [...(Array.isArray(pre) ? pre : [pre]), hook];
  });
  done();
}

/** The plugin: `await app.register(rateLimitPlugin, { limiter })`. */
export const rateLimitPlugin = fp(plugin, { fastify: ">=4", name: "redis-ratelimit" });
export default rateLimitPlugin;

/** Key resolvers for the common identities (the same as `redis-ratelimit/express`'s). */
export const keys = {
  /** The client's IP as Fastify computes it (`request.ip`), honouring the app's `trustProxy` option. */
  ip(): KeyResolver {
    return (request) => clientIpKey(request.ip ?? request.socket.remoteAddress);
  },
  /** The authenticated user: `request.user.id` by default; 401 when there is none. */
  user(resolve: (request: FastifyRequest) => unknown = (request) => (request as FastifyRequest & { user?: { id?: unknown } }).user?.id): KeyResolver {
    return (request) => userKey(resolve(request));
  },
  /** A request header; `status` 401 (default) or 400 when it is missing. */
  header(name: string, status: 400 | 401 = 401): KeyResolver {
    const lower = name.toLowerCase();
    return (request) => {
      const raw = request.headers[lower];
      const v = Array.isArray(raw) ? raw[0] : raw;
      if (!v) throw new ProblemError(status, status === 401 ? "unauthorized" : "bad-request", `missing ${name} header`);
      return v;
    };
  },
  /** A route parameter (`/user/:userId`). */
  param(name: string): KeyResolver {
    return (request) => {
      const v = (request.params as Record<string, unknown> | undefined)?.[name];
      if (typeof v !== "string" || v === "") throw new ProblemError(400, "bad-request", `missing route parameter ${name}`);
      return v;
    };
  },
};
