// Every golden case of clients/conformance/ (the three clients run the same
// files; its README is the schema): what this package sends, decides,
// answers and refuses, against a fake transport that records each command
// and answers the case's replies.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Policy, RateLimiter } from "redis-ratelimit";
import { rateLimitHeaders, refusal } from "redis-ratelimit/express";

const DIR = fileURLToPath(new URL("../../conformance/cases/", import.meta.url));
const CASES = readdirSync(DIR)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .flatMap((f) => JSON.parse(readFileSync(DIR + f, "utf8")).cases.map((c) => ({ ...c, file: f })));
const TOKEN = /^[\x21-\x22\x24-\x7e]{1,64}$/;
const DEFAULT_REPLIES = {
  "RL.CHECK": [0, 1, 1, 0, -1, 0],
  "RL.THROTTLE": [0, 1, 1, 0, -1, 0],
  "RL.QUOTA": [0, 1, 1, 0, -1, 0],
  "RL.LEASE": [0, 1, 1, 0, -1, 0, "t"],
  "RL.LOCKCOUNT": [0, 1, 0],
  "RL.ALL": [0, 1, 1, 1, 0, -1, 0],
};
const snake = (s) => s?.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function limitOf(policy, d) {
  const o = {};
  if (d.shared !== undefined) o.shared = d.shared;
  if (d.subkey !== undefined) o.subkey = d.subkey;
  if (d.problem !== undefined) o.problem = d.problem;
  if (d.cost !== undefined) o.cost = d.cost;
  switch (d.kind) {
    case "window":
      return policy.slidingWindow(d.name, d.count, d.window, o);
    case "bucket":
      return policy.tokenBucket(d.name, d.rate, d.per, d.burst, o);
    case "quota":
      return policy.quota(d.name, d.zone, d.period, d.limit, o);
    case "concurrency":
      return policy.concurrency(d.name, d.limit, d.ttl, o);
    case "lockout":
      return policy.lockout(d.name, d.max, d.window, d.lock_time);
    default:
      throw new Error(`unknown kind ${d.kind}`);
  }
}

function policyOf(d) {
  const o = {};
  if (d.prefix !== undefined) o.prefix = d.prefix;
  if (d.tag !== undefined) o.tag = d.tag;
  if (d.inflight_retry_after !== undefined) o.inFlightRetryAfter = d.inflight_retry_after / 1000;
  // limits as text ("5/minute;100/hour", limits-text.json) go to the Policy as they are
  if (!Array.isArray(d.limits)) o.limits = d.limits;
  const p = new Policy(d.name, o);
  if (Array.isArray(d.limits)) for (const l of d.limits) limitOf(p, l);
  p.compile(); // a definition's own refusals come here at the latest
  return p;
}

/** The argv with every lease token as `<token>` (each a valid lease token). */
function masked(args, tokens) {
  return args.map((a, i) => {
    if (i > 0 && (args[i - 1] === "TOKEN" || (args[0] === "RL.RELEASE" && i >= 3))) {
      assert.match(a, TOKEN, `invalid lease token ${a}`);
      tokens.push(a);
      return "<token>";
    }
    return a;
  });
}

/** An admitting RL.ALL reply with a DETAILS state per rule of `argv`'s clauses (a case about argv only). */
function admitAll(argv) {
  const details = [];
  let i = 3 + Number(argv[1]);
  while (i < argv.length) {
    const word = argv[i];
    if (!["CHECK", "THROTTLE", "QUOTA", "LEASE"].includes(word)) {
      i += 1;
      continue;
    }
    i += word === "QUOTA" ? 3 : 2; // word, index (, zone)
    let rules = 0;
    if (word === "QUOTA") for (; ["MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR"].includes(argv[i]) && /^\d+$/.test(argv[i + 1] ?? ""); i += 2) rules += 1;
    else {
      let n = 0;
      for (; /^\d+$/.test(argv[i] ?? ""); i += 1) n += 1;
      rules = word === "CHECK" ? n / 2 : word === "THROTTLE" ? n / 3 : 1;
    }
    details.push(Array.from({ length: rules }, (_, r) => [0, r + 1, 1, 0, -1, 0]));
  }
  return [0, 1, 1, 1, 0, -1, 0, ...(argv.at(-1) === "DETAILS" ? details : [])];
}

class FakeTransport {
  constructor(c) {
    this.kind = c.cluster ? "fake-cluster" : "fake";
    this.store = c.store ?? {};
    this.expected = (c.expect?.commands ?? []).map((x) => JSON.stringify(x));
    this.replies = c.replies ?? [];
    this.sent = [];
    this.settled = [];
    this.tokens = [];
  }
  answer(args) {
    if (args[0] === "HGETALL") return Object.entries(this.store[args[1]] ?? {}).flat();
    if (args[0] === "COMMAND") return [["rl.all"]]; // the first call's module check: a server with the module
    const argv = masked(args.map(String), this.tokens);
    this.sent.push(argv);
    if (this.replies.length === 0) return argv[0] === "RL.ALL" ? admitAll(argv) : DEFAULT_REPLIES[argv[0]];
    const i = this.expected.indexOf(JSON.stringify(argv));
    const reply = this.replies[i >= 0 ? i : this.sent.length - 1];
    if (reply === undefined) throw new Error(`no reply for ${JSON.stringify(argv)}`);
    return reply;
  }
  async send(call) {
    return this.answer(call.args);
  }
  async sendAny(args) {
    return this.answer(args);
  }
  async batch(calls) {
    return calls.map((c) => {
      this.settled.push(masked(c.args.map(String), this.tokens));
      return c.args[0] === "RL.RELEASE" ? [1] : [0, 1, 1, 1, -1, 1];
    });
  }
}

function options(c) {
  const o = {};
  for (const k of ["cost", "estimate", "zone", "subkeys"]) if (c[k] !== undefined) o[k] = c[k];
  return o;
}

/** What the package does with the case (the Python runner's shape: clients/python/tests/conformance.py). */
async function run(c) {
  const fake = new FakeTransport(c);
  let limiter;
  let decision;
  let permit = null;
  try {
    const policies = Object.fromEntries(c.policies.map((d) => [d.name, policyOf(d)]));
    limiter = new RateLimiter(fake, { timeout: 10_000 });
    await limiter.runtimeLimits?.load(...Object.values(policies)); // the store read before the first decision
    const calls = c.calls.map((x) => policies[x.policy].bind(x.key, options(x)));
    const permits = calls.some((x) => x.policy.needsPermit);
    if (calls.length === 1) {
      const x = calls[0];
      if (permits) permit = await limiter.acquire(x.policy, x.key, x.options);
      else decision = await limiter.decide(x.policy, x.key, x.options);
    } else if (permits) permit = await limiter.acquireAll(calls);
    else decision = await limiter.decideAll(calls);
    decision = permit?.decision ?? decision;
  } catch (e) {
    if (e instanceof RangeError || e instanceof TypeError) return { refused: { field: snake(e.field) ?? null, error: `${e.name}: ${e.message}` } };
    throw e;
  } finally {
    limiter?.close();
  }
  const out = { commands: fake.sent };
  if (new Set(fake.tokens).size > 1) out.tokens = "several lease tokens in one decision";
  if (!c.replies) return out;
  const headers = Object.fromEntries(rateLimitHeaders(decision));
  if (decision.limited) for (const [k, v] of refusal(decision).headers) headers[k] = v;
  out.decision = {
    limited: decision.limited,
    binding: decision.binding.name,
    problem: decision.limited ? decision.problem : null,
    retry_after_ms: decision.retryAfter,
    headers,
  };
  if ("used" in c && !decision.limited) {
    const p = permit ?? { used() {}, close: async () => {} };
    if (c.used !== null) p.used(c.used);
    await p.close();
    out.settlement = fake.settled;
  }
  return out;
}

test("the golden file has every category", () => {
  assert.ok(CASES.length >= 150, String(CASES.length));
  const files = new Set(CASES.map((c) => c.file));
  for (const f of ["argv-kinds.json", "argv-several.json", "decisions.json", "overrides.json", "refused.json", "settlement.json", "limits-text.json"]) assert.ok(files.has(f), f);
  assert.equal(new Set(CASES.map((c) => c.id)).size, CASES.length, "case ids are unique");
});

for (const c of CASES) {
  test(`${c.file.slice(0, -5)}/${c.id}: ${c.about}`, async () => {
    const got = await run(c);
    const want = c.expect;
    if (want.refused) {
      assert.ok(got.refused, `accepted: ${JSON.stringify(got)}`);
      assert.equal(got.refused.field, want.refused.field, got.refused.error);
      return;
    }
    assert.equal(got.refused, undefined, got.refused?.error);
    assert.equal(got.tokens, undefined);
    assert.deepEqual(got.commands, want.commands);
    if (want.decision) assert.deepEqual(got.decision, want.decision);
    if (want.settlement) assert.deepEqual(got.settlement, want.settlement);
  });
}
