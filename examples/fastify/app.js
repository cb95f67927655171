// The seed services (shared/SERVICES.md) with the redis-ratelimit package's
// Fastify plugin: each route names its limits in `config.rateLimit`; no RL
// command written by hand. The same policies, keys and answers as
// examples/node (express): the two apps are one service on one Redis.
// Started by server.js (`make example-fastify`).
import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import Fastify from "fastify";
import { LosslessNumber, isInteger, parse } from "lossless-json";
import { Policy, isZone, functionsZone } from "redis-ratelimit";
import { rateLimitPlugin, keys, ProblemError, problem, PROBLEM_JSON } from "redis-ratelimit/fastify";

const S = 1000;

/** The policies of SERVICES.md "Endpoints" (as examples/node declares them); `prefix` is RL_PREFIX. */
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
class ModelError extends Error {}

/** A body over the framework's limit: 413 (RFC 9110 "Content Too Large") as problem JSON. */
const tooLarge = (detail) => ({ type: "https://redis-ratelimit.dev/problems/too-large", title: "Content Too Large", status: 413, detail });

// A number written with a fraction or an exponent (1e3, 100.0) stays a
// LosslessNumber, which no integer check takes: "an integer" (SERVICES.md) is
// one written as an integer, as Python's json and Java's Jackson read it.
const parseJson = (text) => parse(text, null, (n) => (isInteger(n) ? Number(n) : new LosslessNumber(n)));

/** The body as JSON (any content type: the raw bytes are kept, the duplicate rule hashes them). */
function json(request) {
  if (request.json === undefined) {
    try {
      request.json = parseJson((request.body ?? Buffer.alloc(0)).toString("utf8"));
    } catch {
      throw badRequest("the body is not valid JSON");
    }
  }
  return request.json;
}

const header = (request, name) => {
  const v = request.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
};

/** The fake model's knobs: a non-negative integer header, else the default (as the other apps read them). */
function headerInt(request, name, fallback) {
  const v = header(request, name) ?? "";
  return /^[0-9]+$/.test(v) ? Number(v) : fallback;
}

/** The longest stream (/llm/stream) in lines of 100 ms: the Python apps' MAX_LINES. */
const MAX_LINES = 10_000;

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

export async function createApp({ redis, prefix = "", limiter }) {
  const p = policies(prefix);
  // The tests stand in for a proxy on loopback: request.ip is then the
  // right-most X-Forwarded-For address that is not loopback.
  const app = Fastify({ trustProxy: ["127.0.0.1", "::1"] });
  await app.register(rateLimitPlugin, { limiter });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
  app.decorateRequest("json", undefined);

  // The limits set at run time (PUT /admin/limits/ocr, on any instance of any
  // example app) are the client's runtime limits (<prefix>ratelimit:limits,
  // re-read every 250 ms): read once before serving.
  await limiter.runtimeLimits.load(p.ocr);
  app.addHook("onClose", async () => limiter.close());

  // Problems raised by checks and key resolvers, and the model's failure.
  app.setErrorHandler((err, _request, reply) => {
    let body;
    if (err instanceof ProblemError) body = err.problem;
    // Fastify's bodyLimit (1 MiB): RFC 9110's 413, not a 500.
    else if (err?.code === "FST_ERR_CTP_BODY_TOO_LARGE") body = tooLarge("the body is larger than 1048576 bytes");
    else if (err instanceof ModelError) body = { type: "https://redis-ratelimit.dev/problems/model-failed", title: "Internal Server Error", status: 500, detail: err.message };
    else body = { type: "about:blank", title: "Internal Server Error", status: 500, detail: String(err?.message ?? err) };
    return reply.code(body.status).type(PROBLEM_JSON).send(JSON.stringify(body));
  });

  app.get("/health", async () => ({ status: "up" }));

  // 1. Multi-rule sliding window + duplicate submissions, one atomic decision.
  const phone = (request) => {
    const v = json(request)?.phone;
    if (typeof v !== "string" || !/^[0-9]{1,20}$/.test(v)) throw badRequest("phone must be 1 to 20 digits");
    return v;
  };
  app.post("/seed000/sms", {
    config: { rateLimit: { policy: p.sms, key: phone, subkeys: (request) => ({ duplicate: createHash("sha256").update(request.body ?? "").digest("hex").slice(0, 32) }) } },
  }, async () => ({ sent: true }));

  // 2. Natural day and hour in Asia/Shanghai; limits changed at run time (above).
  app.post("/seed001/ocr", { config: { rateLimit: { policy: p.ocr, key: keys.header("X-User") } } }, async () => ({ done: true }));
  app.put("/admin/limits/ocr", async (request, reply) => {
    const body = json(request);
    const ok =
      body && typeof body === "object" && !Array.isArray(body) &&
      Object.keys(body).sort().join() === "day,hour" &&
      Object.values(body).every((v) => Number.isSafeInteger(v) && v >= 0);
    if (!ok) throw badRequest('expected {"day": D, "hour": H} with integers >= 0');
    await limiter.runtimeLimits.set(p.ocr, body);
    return reply.code(204).send();
  });
  app.get("/admin/limits/ocr", async () => limiter.runtimeLimits.get(p.ocr));

  // 3. Per IP and per path variable, with X-RateLimit-* too.
  const legacyHeaders = true;
  app.get("/seed002/api/default", { config: { rateLimit: { policy: p.apiDefault, key: keys.ip(), legacyHeaders } } }, async () => ({ endpoint: "default" }));
  app.get("/seed002/api/custom", { config: { rateLimit: { policy: p.apiCustom, key: keys.ip(), legacyHeaders } } }, async () => ({ endpoint: "custom" }));
  app.get("/seed002/api/user/:userId", { config: { rateLimit: { policy: p.apiUser, key: keys.param("userId"), legacyHeaders } } }, async (request) => ({ user: request.params.userId }));

  // 4. Count, then lock out, per (client IP, path).
  app.post("/seed004/login", { config: { rateLimit: { policy: p.login, key: (request) => `${keys.ip()(request)}:${request.url.split("?")[0]}` } } }, async () => ({ ok: true }));

  // 5 and 6. LLM gateway: bucket + in-flight lease + daily token budget + global window, one call up front.
  // Checked before any Redis call (preValidation runs before the plugin's preHandler).
  const checkLlm = async (request) => {
    if (!header(request, "X-Api-Key")) throw new ProblemError(401, "unauthorized", "missing X-Api-Key header");
    const zone = header(request, "X-Zone") ?? "";
    // isZone also takes a fixed offset (RL.QUOTA does): no IANA zone.
    if (/^[+-]/.test(zone) || !isZone(zone)) throw badRequest("X-Zone must be an IANA time zone");
    if (limiter.client.backend === "functions") {
      try {
        functionsZone(zone); // the library takes fixed-offset zones only: a zone with daylight saving is refused
      } catch (e) {
        throw badRequest(e.message);
      }
    }
    const n = json(request)?.max_tokens;
    if (!Number.isSafeInteger(n) || n < 1 || n > 100_000) throw badRequest("max_tokens must be an integer from 1 to 100000");
  };
  const llm = { config: { rateLimit: { policy: p.llm, key: keys.header("X-Api-Key"), estimate: (request) => json(request).max_tokens, zone: (request) => header(request, "X-Zone") } }, preValidation: checkLlm };

  app.post("/llm/complete", llm, async (request) => {
    const n = request.json.max_tokens;
    // A failure or a disconnect: nothing reported, the permit settles to 0 after the answer.
    await fakeModel(headerInt(request, "X-Sleep-Ms", 100), header(request, "X-Fail") === "1", request.rateLimit.signal);
    const used = Math.min(n, headerInt(request, "X-Used-Tokens", Math.floor(n / 2)));
    request.rateLimit.used(used);
    return { used_tokens: used };
  });

  // 6. Streamed: the permit closes after the last byte (or the client gone),
  // settled to the tokens of the lines sent.
  app.post("/llm/stream", llm, async (request, reply) => {
    if (header(request, "X-Fail") === "1") throw new ModelError("the model failed");
    const n = request.json.max_tokens;
    const used = Math.min(n, headerInt(request, "X-Used-Tokens", Math.floor(n / 2)));
    // At most 10,000 lines (1,000 s), as the Python apps: a huge X-Sleep-Ms is
    // not a stream that never ends.
    const lines = Math.min(MAX_LINES, Math.max(1, Math.floor(headerInt(request, "X-Sleep-Ms", 100) / 100)));
    const { signal } = request.rateLimit;
    async function* body() {
      let sent = 0;
      for (let i = 0; i < lines; i++) {
        await new Promise((r) => setTimeout(r, 100));
        if (signal.aborted) return;
        const k = Math.floor(used / lines) + (i === lines - 1 ? used % lines : 0);
        sent += k;
        request.rateLimit.used(sent);
        yield JSON.stringify({ tokens: k }) + "\n";
      }
      yield JSON.stringify({ used_tokens: used }) + "\n";
    }
    return reply.type("application/x-ndjson").send(Readable.from(body()));
  });

  return app;
}

export { problem };
