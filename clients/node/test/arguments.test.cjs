// Arguments the module would refuse are refused before any Redis call
// (RangeError/TypeError; the transport below fails the test if reached),
// and the argument lists sent are the ones SPEC.md gives. CommonJS on
// purpose: the package loads with require() too.
"use strict";
const { test } = require("node:test");
const assert = require("node:assert/strict");
const { RateLimitClient, RateLimitError } = require("redis-ratelimit");

function spy() {
  const sent = [];
  const transport = {
    kind: "spy",
    send: async (call) => {
      sent.push(call);
      if (!call.args[0].startsWith("RL.ALL")) return [0, 1, 1, 0, -1, 1000, "tok"];
      const details = call.args.at(-1) === "DETAILS" ? Array.from({ length: Number(call.args[1]) }, () => [[0, 1, 1, 0, -1, 1000]]) : [];
      return [0, 1, 1, 1, 0, -1, 1000, ...details];
    },
    batch: async (calls) => calls.map(() => [0, 1, 1, 0, -1, 1000]),
    sendAny: async () => [[]],
  };
  return { rl: new RateLimitClient(transport), sent };
}

const refusals = [
  ["check count 0", (rl) => rl.check("k", { count: 0, window: 1000 }), /count for rule 1/],
  ["check window 1.5", (rl) => rl.check("k", { count: 1, window: 1.5 }), /window for rule 1/],
  ["check window above 2^53-1", (rl) => rl.check("k", { count: 1, window: 2 ** 53 }), /window/],
  ["check no rule", (rl) => rl.check("k", []), /at least one rule/],
  ["check 65 rules", (rl) => rl.check("k", Array.from({ length: 65 }, (_, i) => ({ count: 1, window: i + 1 }))), /too many rules/],
  ["check cost above the smallest count", (rl) => rl.check("k", [{ count: 5, window: 1000 }, { count: 2, window: 5000 }], { cost: 3 }), /cost/],
  ["check cost 0", (rl) => rl.check("k", { count: 5, window: 1000 }, { cost: 0 }), /cost/],
  ["check refund and debit", (rl) => rl.check("k", { count: 5, window: 1000 }, { refund: true, debit: true }), /exclude/],
  ["check debit cost 10001", (rl) => rl.check("k", { count: 5, window: 1000 }, { debit: true, cost: 10001 }), /cost/],
  ["now negative", (rl) => rl.check("k", { count: 1, window: 1000 }, { now: -1 }), /now/],
  ["now a string", (rl) => rl.check("k", { count: 1, window: 1000 }, { now: "1000" }), /now/],
  ["key not a string", (rl) => rl.check(42, { count: 1, window: 1000 }), /key/],
  ["peek cost above count", (rl) => rl.peek("k", { count: 2, window: 1000 }, { cost: 3 }), /cost/],
  ["throttle burst 0", (rl) => rl.throttle("k", { burst: 0, count: 1, window: 1000 }), /burst/],
  ["throttle same window twice", (rl) => rl.throttle("k", [{ burst: 1, count: 1, window: 1000 }, { burst: 2, count: 2, window: 1000 }]), /same window/],
  ["throttle faster than 1/ns", (rl) => rl.throttle("k", { burst: 1, count: 2_000_000, window: 1 }), /nanosecond/],
  ["throttle cost above burst", (rl) => rl.throttle("k", { burst: 2, count: 1, window: 1000 }, { cost: 3 }), /cost/],
  ["throttle reserve with refund", (rl) => rl.throttle("k", { burst: 2, count: 1, window: 1000 }, { refund: true, reserve: 10 }), /RESERVE/],
  ["throttle reserve -1", (rl) => rl.throttle("k", { burst: 2, count: 1, window: 1000 }, { reserve: -1 }), /RESERVE/],
  ["quota unknown zone", (rl) => rl.quota("k", "Mars/Olympus", { day: 1 }), /zone/],
  ["quota zone in the wrong case", (rl) => rl.quota("k", "asia/shanghai", { day: 1 }), /case-sensitive/],
  ["quota offset 24:00", (rl) => rl.quota("k", "+24:00", { day: 1 }), /zone/],
  ["quota unknown period", (rl) => rl.quota("k", "UTC", { fortnight: 1 }), /period/],
  ["quota limit -1", (rl) => rl.quota("k", "UTC", { day: -1 }), /limit for day/],
  ["quota now after 9999", (rl) => rl.quota("k", "UTC", { day: 1 }, { now: 253402300800000 }), /now/],
  ["lease ttl 0", (rl) => rl.lease("k", { limit: 1, ttl: 0 }), /ttl/],
  ["lease cost above limit", (rl) => rl.lease("k", { limit: 2, ttl: 1000, cost: 3 }), /cost/],
  ["lease token with #", (rl) => rl.lease("k", { limit: 2, ttl: 1000, token: "a#b" }), /token/],
  ["lease token of 65 bytes", (rl) => rl.lease("k", { limit: 2, ttl: 1000, token: "x".repeat(65) }), /token/],
  ["release no token", (rl) => rl.release("k", []), /at least one/],
  ["release token twice", (rl) => rl.release("k", ["a", "a"]), /twice/],
  ["renew 65 tokens", (rl) => rl.renew("k", 1000, Array.from({ length: 65 }, (_, i) => `t${i}`)), /too many tokens/],
  ["dayhour same keys", (rl) => rl.dayhour("k", "k", { dayLimit: 1, hourLimit: 1, dayTtl: 1, hourTtl: 1 }), /differ/],
  ["dayhour ttl 0", (rl) => rl.dayhour("d", "h", { dayLimit: 1, hourLimit: 1, dayTtl: 0, hourTtl: 1 }), /dayTtl/],
  ["lockcount same keys", (rl) => rl.lockcount("k", "k", { window: 1, max: 1, lockTime: 1 }), /differ/],
  ["all no clause", (rl) => rl.all([]), /at least one clause/],
  ["all key twice", (rl) => rl.all([{ kind: "check", key: "a", rules: { count: 1, window: 1 } }, { kind: "check", key: "a", rules: { count: 1, window: 1 } }]), /two clauses/],
  ["all lease without token", (rl) => rl.all([{ kind: "lease", key: "a", limit: 1, ttl: 1 }]), /needs a token/],
  ["all cost 0 outside a peek", (rl) => rl.all([{ kind: "check", key: "a", rules: { count: 1, window: 1 }, cost: 0 }]), /cost/],
  ["all unknown kind", (rl) => rl.all([{ kind: "bucket", key: "a" }]), /unknown kind/],
  ["all 65 rules", (rl) => rl.all([{ kind: "check", key: "a", rules: Array.from({ length: 33 }, (_, i) => ({ count: 1, window: i + 1 })) }, { kind: "check", key: "b", rules: Array.from({ length: 32 }, (_, i) => ({ count: 1, window: i + 1 })) }]), /too many rules/],
  ["allPeek with refund", (rl) => rl.allPeek([{ kind: "check", key: "a", rules: { count: 1, window: 1 } }], { refund: true }), /REFUND/],
];

for (const [name, call, message] of refusals) {
  test(`refused before any Redis call: ${name}`, async () => {
    const { rl, sent } = spy();
    await assert.rejects(
      async () => call(rl),
      (e) => {
        assert.ok(e instanceof RangeError || e instanceof TypeError, `${e.name}: ${e.message}`);
        assert.match(e.message, message);
        return true;
      },
    );
    assert.equal(sent.length, 0);
  });
}

test("argument lists as SPEC.md writes them", async () => {
  const { rl, sent } = spy();
  await rl.check("k", [{ count: 2, window: 10000 }, { count: 5, window: 3600000 }], { cost: 2 });
  await rl.throttle("k", { burst: 10, count: 60, window: 60000 }, { reserve: 0 });
  await rl.quota("k", "Asia/Shanghai", { day: 20, hour: 5 }, { cost: 3, refund: true, now: 1000 });
  await rl.lease("k", { limit: 2, ttl: 60000, token: "req-1" });
  await rl.all(
    [
      { kind: "throttle", key: "{a}:rate", rules: { burst: 10, count: 60, window: 60000 } },
      { kind: "lease", key: "{a}:inflight", limit: 2, ttl: 60000, token: "t" },
      { kind: "quota", key: "{a}:tokens", zone: "UTC", periods: { day: 100000 }, cost: 500 },
    ],
    { details: true },
  );
  assert.deepEqual(
    sent.map((c) => c.args.join(" ")),
    [
      "RL.CHECK k * 2 10000 5 3600000 COST 2",
      "RL.THROTTLE k * 10 60 60000 RESERVE 0",
      "RL.QUOTA k 1000 Asia/Shanghai DAY 20 HOUR 5 COST 3 REFUND",
      "RL.LEASE k * 2 60000 TOKEN req-1",
      "RL.ALL 3 {a}:rate {a}:inflight {a}:tokens * THROTTLE 1 10 60 60000 LEASE 2 2 60000 TOKEN t QUOTA 3 UTC DAY 100000 COST 500 DETAILS",
    ],
  );
  assert.deepEqual(sent.map((c) => [c.key, c.readOnly]).at(-1), ["{a}:rate", false]);
});

test("DETAILS replies parse per clause and rule; -1 reads as null", async () => {
  const transport = {
    kind: "fixed",
    send: async () => [1, 2, 1, 2, 0, -1, 4000, [[0, 1, 5, 3, -1, 10000]], [[1, 1, 2, 0, -1, 4000]]],
    batch: async () => [],
    sendAny: async () => [[]],
  };
  const d = await new RateLimitClient(transport).all(
    [
      { kind: "check", key: "a", rules: { count: 5, window: 10000 } },
      { kind: "lease", key: "b", limit: 2, ttl: 1000, token: "t" },
    ],
    { details: true },
  );
  assert.equal(d.limited, true);
  assert.equal(d.clause, 2);
  assert.equal(d.retryAfter, null);
  assert.equal(d.waitingCannotHelp, true);
  assert.deepEqual(d.details[0][0], { limited: false, rule: 1, limit: 5, remaining: 3, retryAfter: null, resetAfter: 10000, waitingCannotHelp: false });
  assert.equal(d.details[1][0].limited, true);
});

test("a server error keeps its text, and the class is the package's", async () => {
  const { ReplyError } = require("redis-errors");
  const transport = {
    kind: "failing",
    send: async () => {
      throw new ReplyError("ERR invalid window '0' for rule 2: expected an integer from 1 to 9007199254740991");
    },
    batch: async () => [],
    sendAny: async () => [[]],
  };
  await assert.rejects(new RateLimitClient(transport).check("k", { count: 1, window: 1 }), (e) => {
    assert.ok(e instanceof RateLimitError);
    assert.equal(e.message, "ERR invalid window '0' for rule 2: expected an integer from 1 to 9007199254740991");
    return true;
  });
});

test("RateLimiter options: a timeout or probe interval that is not a positive integer ms is refused", () => {
  const { RateLimiter } = require("redis-ratelimit");
  const { rl } = spy();
  // "500" (an env var passed as is) made every decision time out at once;
  // NaN made decisions wait without any budget while Redis stalled.
  for (const timeout of ["500", NaN, -5, 0, 1.5, Infinity]) {
    assert.throws(() => new RateLimiter(rl, { timeout }), (e) => e instanceof RangeError && /invalid timeout/.test(e.message), String(timeout));
  }
  for (const probeInterval of ["250", NaN, 0]) {
    assert.throws(() => new RateLimiter(rl, { probeInterval }), /invalid probeInterval/);
  }
  assert.throws(() => new RateLimiter(rl, { onError: "log" }), TypeError);
  assert.equal(new RateLimiter(rl).timeout, 500);
  assert.equal(new RateLimiter(rl, { timeout: 200, probeInterval: 50 }).probeInterval, 50);
});
