// The seed services (shared/SERVICES.md) with the redis-ratelimit package's
// ordinary API: policies, the express middleware and its permits — no RL
// command written by hand. Started by server.js (`make example-node`).
import { createHash } from "node:crypto";
import express from "express";
import { LosslessNumber, isInteger, parse } from "lossless-json";
import { Policy, RateLimiter, isZone, functionsZone } from "redis-ratelimit";
import { rateLimit, keys, ProblemError, problem, PROBLEM_JSON } from "redis-ratelimit/express";

const S = 1000;

/** The policies of SERVICES.md "Endpoints"; `prefix` is RL_PREFIX. */
export function policies(prefix) {
  return {
    sms: new Policy("sms", { prefix })
      .slidingWindow("short", 2, 10 * S)
      .slidingWindow("long", 5, 3600 * S)
      .slidingWindow("duplicate", 1, 5 * S, { subkey: true, problem: "duplicate" }),
    ocr: new Policy("ocr", { prefix }).quota("day", "Asia/Shanghai", "day", 20).quota("hour", "Asia/Shanghai", "hour", 5),
    apiDefault: new Policy("api-default", { prefix, failure: "open" }).slidingWindow("default", 10, 60 * S),
    apiCustom: new Policy("api-custom", { prefix }).slidingWindow("custom", 5, 30 * S),
    apiUser: new Policy("api-user", { prefix }).slidingWindow("user", 3, 60 * S),
    login: new Policy("login", { prefix }).lockout("login", 5, 10 * S, 30 * S),
    // One hash tag for every key: the global budget is decided with each key's limits.
    llm: new Policy("llm", { prefix, tag: "llm" })
      .tokenBucket("rate", 60, 60 * S, 10)
      .concurrency("inflight", 2, 60 * S)
      .quota("tokens", null, "day", 100_000, { cost: "estimate" })
      .slidingWindow("global", 1000, 60 * S, { shared: true }),
  };
}

const badRequest = (detail) => new ProblemError(400, "bad-request", detail);

// A number written with a fraction or an exponent (1e3, 100.0) stays a
// LosslessNumber, which no integer check takes: "an integer" (SERVICES.md) is
// one written as an integer, as Python's json and Java's Jackson read it.
const parseJson = (text) => parse(text, null, (n) => (isInteger(n) ? Number(n) : new LosslessNumber(n)));

/** JSON bodies of any content type, with the raw bytes kept (the duplicate rule hashes them). */
const json = [
  express.raw({ type: () => true }),
  (req, _res, next) => {
    req.rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    try {
      req.body = parseJson(req.rawBody.toString("utf8"));
    } catch {
      return next(badRequest("the body is not valid JSON"));
    }
    next();
  },
];

/** Checks run before any Redis call; a failure is 400/401 problem JSON. */
const validate = (check) => (req, res, next) => {
  try {
    check(req);
    next();
  } catch (e) {
    next(e);
  }
};

export function createApp({ redis, prefix = "", limiter = new RateLimiter(redis) }) {
  const p = policies(prefix);
  const app = express();
  // The tests stand in for a proxy on loopback: req.ip is then the right-most
  // X-Forwarded-For address that is not loopback (express's own rule).
  app.set("trust proxy", "loopback");
  app.disable("x-powered-by");

  // The limits set at run time (PUT /admin/limits/ocr, on any instance of any
  // example app) are the client's runtime limits (<prefix>ratelimit:limits,
  // re-read every 250 ms): read once before serving, so an instance started
  // later uses them from its first request.
  app.locals.ready = limiter.runtimeLimits.load(p.ocr);
  app.locals.stop = () => limiter.close();

  app.get("/health", (_req, res) => res.json({ status: "up" }));

  // 1. Multi-rule sliding window + duplicate submissions, one atomic decision.
  app.post(
    "/seed000/sms",
    json,
    validate((req) => {
      const phone = req.body?.phone;
      if (typeof phone !== "string" || !/^[0-9]{1,20}$/.test(phone)) throw badRequest("phone must be 1 to 20 digits");
    }),
    rateLimit({
      limiter,
      policy: p.sms,
      key: (req) => req.body.phone,
      subkeys: (req) => ({ duplicate: createHash("sha256").update(req.rawBody ?? "").digest("hex").slice(0, 32) }),
    }),
    (_req, res) => res.json({ sent: true }),
  );

  // 2. Natural day and hour in Asia/Shanghai; limits changed at run time (above).
  app.post("/seed001/ocr", rateLimit({ limiter, policy: p.ocr, key: keys.header("X-User") }), (_req, res) => res.json({ done: true }));
  app.put("/admin/limits/ocr", json, async (req, res, next) => {
    const body = req.body;
    const ok =
      body && typeof body === "object" && !Array.isArray(body) &&
      Object.keys(body).sort().join() === "day,hour" &&
      Object.values(body).every((v) => Number.isSafeInteger(v) && v >= 0);
    if (!ok) return next(badRequest('expected {"day": D, "hour": H} with integers >= 0'));
    try {
      await limiter.runtimeLimits.set(p.ocr, body);
    } catch (e) {
      return next(e);
    }
    res.status(204).end();
  });
  app.get("/admin/limits/ocr", async (_req, res, next) => {
    try {
      res.json(await limiter.runtimeLimits.get(p.ocr));
    } catch (e) {
      next(e);
    }
  });

  // 3. Per IP and per path variable, with X-RateLimit-* too.
  app.get("/seed002/api/default", rateLimit({ limiter, policy: p.apiDefault, key: keys.ip(), legacyHeaders: true }), (_req, res) => res.json({ endpoint: "default" }));
  app.get("/seed002/api/custom", rateLimit({ limiter, policy: p.apiCustom, key: keys.ip(), legacyHeaders: true }), (_req, res) => res.json({ endpoint: "custom" }));
  app.get("/seed002/api/user/:userId", rateLimit({ limiter, policy: p.apiUser, key: keys.param("userId"), legacyHeaders: true }), (req, res) =>
    res.json({ user: req.params.userId }),
  );

  // 4. Count, then lock out, per (client IP, path).
  app.post("/seed004/login", rateLimit({ limiter, policy: p.login, key: (req) => `${req.ip}:${req.path}` }), (_req, res) => res.json({ ok: true }));

  // 5. LLM gateway: bucket + in-flight lease + daily token budget + global window, one call up front.
  const llmInput = validate((req) => {
    if (!req.get("X-Api-Key")) throw new ProblemError(401, "unauthorized", "missing X-Api-Key header");
    const zone = req.get("X-Zone") ?? "";
    // isZone also takes a fixed offset (RL.QUOTA does): no IANA zone.
    if (/^[+-]/.test(zone) || !isZone(zone)) throw badRequest("X-Zone must be an IANA time zone");
    if (limiter.client.backend === "functions") {
      try {
        functionsZone(zone); // the library takes fixed-offset zones only: a zone with daylight saving is refused
      } catch (e) {
        throw badRequest(e.message);
      }
    }
    const n = req.body?.max_tokens;
    if (!Number.isSafeInteger(n) || n < 1 || n > 100_000) throw badRequest("max_tokens must be an integer from 1 to 100000");
  });
  const llmLimit = rateLimit({
    limiter,
    policy: p.llm,
    key: keys.header("X-Api-Key"),
    estimate: (req) => req.body.max_tokens,
    zone: (req) => req.get("X-Zone"),
  });
  app.post("/llm/complete", json, llmInput, llmLimit, async (req, res, next) => {
    const n = req.body.max_tokens;
    const { signal } = req.rateLimit;
    try {
      await fakeModel(headerInt(req, "X-Sleep-Ms", 100), req.get("X-Fail") === "1", signal);
    } catch (e) {
      return next(e); // the permit settles to 0 when the response ends
    }
    const used = Math.min(n, headerInt(req, "X-Used-Tokens", Math.floor(n / 2)));
    req.rateLimit.used(used);
    res.json({ used_tokens: used });
  });

  // 6. Endpoint 5 streamed (ndjson): the same limits and keys, counted
  // together. The permit closes after the last byte (the lease held until
  // then), settled to the tokens of the lines sent; a client that leaves
  // mid-stream stops it (req.rateLimit.signal) and frees its slot.
  app.post("/llm/stream", json, llmInput, llmLimit, async (req, res, next) => {
    if (req.get("X-Fail") === "1") return next(new ModelError("the model failed")); // 500 before the first byte
    const n = req.body.max_tokens;
    const used = Math.min(n, headerInt(req, "X-Used-Tokens", Math.floor(n / 2)));
    // At most 10,000 lines (1,000 s), as the Python apps: a huge X-Sleep-Ms is
    // not a stream that never ends.
    const lines = Math.min(MAX_LINES, Math.max(1, Math.floor(headerInt(req, "X-Sleep-Ms", 100) / 100)));
    const each = Math.floor(used / lines);
    const { signal } = req.rateLimit;
    res.status(200).type("application/x-ndjson");
    res.flushHeaders();
    let sent = 0;
    for (let i = 0; i < lines; i++) {
      if (!(await pause(100, signal))) return res.end(); // the client left: settled to what was sent
      const k = i === lines - 1 ? used - sent : each;
      res.write(`${JSON.stringify({ tokens: k })}\n`);
      sent += k;
      req.rateLimit.used(sent);
    }
    res.end(`${JSON.stringify({ used_tokens: used })}\n`);
  });

  // Problems raised above, body parsing errors, and the model's failure.
  app.use((err, _req, res, _next) => {
    let body;
    if (err instanceof ProblemError) body = err.problem;
    else if (err?.type === "entity.parse.failed") body = problem(400, "bad-request", "the body is not valid JSON");
    // express.raw()'s limit (100 kB): RFC 9110's 413, not a 500.
    else if (err?.type === "entity.too.large") body = tooLarge(`the body is larger than ${err.limit} bytes`);
    else if (err instanceof ModelError) body = { type: "https://redis-ratelimit.dev/problems/model-failed", title: "Internal Server Error", status: 500, detail: err.message };
    else body = { type: "about:blank", title: "Internal Server Error", status: 500, detail: String(err?.message ?? err) };
    if (res.headersSent) return res.end();
    res.status(body.status).type(PROBLEM_JSON).send(JSON.stringify(body));
  });
  return app;
}

class ModelError extends Error {}

/** A body over the framework's limit: 413 (RFC 9110 "Content Too Large") as problem JSON. */
const tooLarge = (detail) => ({ type: "https://redis-ratelimit.dev/problems/too-large", title: "Content Too Large", status: 413, detail });

/** The fake model's knobs: a non-negative integer header, else the default (as the Python app reads them). */
function headerInt(req, name, fallback) {
  const v = req.get(name) ?? "";
  return /^[0-9]+$/.test(v) ? Number(v) : fallback;
}

/** The longest stream (/llm/stream) in lines of 100 ms: the Python apps' MAX_LINES. */
const MAX_LINES = 10_000;

/** Waits `ms`; false when `signal` aborts first (the client went away). */
function pause(ms, signal) {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** The fake model: sleeps (stopped early when the client goes away), then answers or fails. */
function fakeModel(ms, fail, signal) {
  return new Promise((resolve, reject) => {
    // setTimeout fires after 1 ms beyond 2^31-1 ms: a longer sleep (X-Sleep-Ms
    // beyond a long included) waits the longest a timer can (24.8 days), as
    // the other apps sleep on.
    const t = setTimeout(() => (fail ? reject(new ModelError("the model failed")) : resolve()), Math.min(ms, 2 ** 31 - 1));
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new ModelError("cancelled: the client went away"));
    }, { once: true });
  });
}
