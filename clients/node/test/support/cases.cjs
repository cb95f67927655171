// Every RL command, called through the package and as the raw command with
// the same arguments on a twin key, at a fixed `now` so both replies are
// deterministic; the tests compare the decision's fields with the raw reply.
"use strict";

const NOW = 1_800_000_000_000;

const six = (d) => [d.limited ? 1 : 0, d.rule, d.limit, d.remaining, d.retryAfter ?? -1, d.resetAfter];

/** k(name) gives a key; calls on one case share a hash tag so two-key commands work under Cluster. */
function cases(k) {
  return [
    { name: "check", pkg: (rl, key) => rl.check(key, [{ count: 2, window: 10000 }, { count: 5, window: 60000 }], { now: NOW }), raw: (key) => ["RL.CHECK", key, NOW, 2, 10000, 5, 60000], fields: six, repeat: 3 },
    { name: "check cost", pkg: (rl, key) => rl.check(key, { count: 5, window: 10000 }, { now: NOW, cost: 2 }), raw: (key) => ["RL.CHECK", key, NOW, 5, 10000, "COST", 2], fields: six, repeat: 3 },
    { name: "check debit", pkg: (rl, key) => rl.check(key, { count: 5, window: 10000 }, { now: NOW, cost: 7, debit: true }), raw: (key) => ["RL.CHECK", key, NOW, 5, 10000, "COST", 7, "DEBIT"], fields: six, repeat: 2 },
    { name: "peek", pkg: (rl, key) => rl.peek(key, { count: 2, window: 10000 }, { now: NOW, cost: 0 }), raw: (key) => ["RL.PEEK", key, NOW, 2, 10000, "COST", 0], fields: six, repeat: 1 },
    { name: "throttle", pkg: (rl, key) => rl.throttle(key, { burst: 2, count: 2, window: 1000 }, { now: NOW }), raw: (key) => ["RL.THROTTLE", key, NOW, 2, 2, 1000], fields: six, repeat: 3 },
    { name: "throttle reserve", pkg: (rl, key) => rl.throttle(key, { burst: 1, count: 1, window: 1000 }, { now: NOW, reserve: 1500 }), raw: (key) => ["RL.THROTTLE", key, NOW, 1, 1, 1000, "RESERVE", 1500], fields: six, repeat: 3 },
    { name: "throttlePeek", pkg: (rl, key) => rl.throttlePeek(key, { burst: 3, count: 1, window: 1000 }, { now: NOW }), raw: (key) => ["RL.THROTTLEPEEK", key, NOW, 3, 1, 1000], fields: six, repeat: 1 },
    { name: "quota", pkg: (rl, key) => rl.quota(key, "Asia/Shanghai", { day: 3, hour: 2 }, { now: NOW }), raw: (key) => ["RL.QUOTA", key, NOW, "Asia/Shanghai", "DAY", 3, "HOUR", 2], fields: six, repeat: 3 },
    { name: "quota zero", pkg: (rl, key) => rl.quota(key, "+05:30", { day: 0 }, { now: NOW }), raw: (key) => ["RL.QUOTA", key, NOW, "+05:30", "DAY", 0], fields: six, repeat: 1 },
    { name: "quotaPeek", pkg: (rl, key) => rl.quotaPeek(key, "UTC", { month: 10 }, { now: NOW, cost: 4 }), raw: (key) => ["RL.QUOTAPEEK", key, NOW, "UTC", "MONTH", 10, "COST", 4], fields: six, repeat: 1 },
    { name: "lease", pkg: (rl, key) => rl.lease(key, { limit: 2, ttl: 30000, token: "job-1", now: NOW }), raw: (key) => ["RL.LEASE", key, NOW, 2, 30000, "TOKEN", "job-1"], fields: (d) => [...six(d), d.token], repeat: 2 },
    { name: "leasePeek", pkg: (rl, key) => rl.leasePeek(key, { limit: 2, cost: 0, now: NOW }), raw: (key) => ["RL.LEASEPEEK", key, NOW, 2, "COST", 0], fields: six, repeat: 1 },
    {
      name: "release",
      setup: (key) => ["RL.LEASE", key, NOW, 3, 30000, "TOKEN", "a", "COST", 2],
      pkg: (rl, key) => rl.release(key, ["a", "b"], { now: NOW }),
      raw: (key) => ["RL.RELEASE", key, NOW, "a", "b"],
      fields: (r) => [...r],
      repeat: 2,
    },
    {
      name: "renew",
      setup: (key) => ["RL.LEASE", key, NOW, 3, 30000, "TOKEN", "a"],
      pkg: (rl, key) => rl.renew(key, 50000, ["a", "b"], { now: NOW }),
      raw: (key) => ["RL.RENEW", key, NOW, 50000, "a", "b"],
      fields: (r) => [...r],
      repeat: 1,
    },
    {
      name: "dayhour",
      pkg: (rl, key) => rl.dayhour(`${key}:d`, `${key}:h`, { dayLimit: 3, hourLimit: 2, dayTtl: 86400000, hourTtl: 3600000 }),
      raw: (key) => ["RL.DAYHOUR", `${key}:d`, `${key}:h`, 3, 2, 86400000, 3600000],
      fields: (d) => [d.day, d.hour],
      repeat: 3,
    },
    {
      name: "lockcount",
      pkg: (rl, key) => rl.lockcount(`${key}:l`, `${key}:c`, { window: 60000, max: 2, lockTime: 120000 }),
      raw: (key) => ["RL.LOCKCOUNT", `${key}:l`, `${key}:c`, 60000, 2, 120000],
      // TTLs count down between the two calls: compared within a second.
      fields: (d) => [d.limited ? 1 : 0, d.count, Math.round((d.ttl ?? -1) / 1000)],
      rawFields: (r) => [r[0], r[1], Math.round(r[2] / 1000)],
      repeat: 4,
    },
    {
      name: "all",
      pkg: (rl, key) =>
        rl.all(
          [
            { kind: "check", key: `${key}:c`, rules: { count: 3, window: 60000 } },
            { kind: "throttle", key: `${key}:t`, rules: { burst: 2, count: 2, window: 1000 } },
            { kind: "quota", key: `${key}:q`, zone: "UTC", periods: { day: 10 }, cost: 2 },
            { kind: "lease", key: `${key}:l`, limit: 5, ttl: 10000, token: "t1" },
          ],
          { now: NOW },
        ),
      raw: (key) => ["RL.ALL", 4, `${key}:c`, `${key}:t`, `${key}:q`, `${key}:l`, NOW, "CHECK", 1, 3, 60000, "THROTTLE", 2, 2, 2, 1000, "QUOTA", 3, "UTC", "DAY", 10, "COST", 2, "LEASE", 4, 5, 10000, "TOKEN", "t1"],
      fields: (d) => [d.limited ? 1 : 0, d.clause, d.rule, d.limit, d.remaining, d.retryAfter ?? -1, d.resetAfter],
      repeat: 3,
    },
    {
      name: "allPeek",
      pkg: (rl, key) => rl.allPeek([{ kind: "check", key: `${key}:c`, rules: { count: 3, window: 60000 }, cost: 0 }, { kind: "lease", key: `${key}:l`, limit: 5, ttl: 10000 }], { now: NOW }),
      raw: (key) => ["RL.ALLPEEK", 2, `${key}:c`, `${key}:l`, NOW, "CHECK", 1, 3, 60000, "COST", 0, "LEASE", 2, 5, 10000],
      fields: (d) => [d.limited ? 1 : 0, d.clause, d.rule, d.limit, d.remaining, d.retryAfter ?? -1, d.resetAfter],
      repeat: 1,
    },
  ].map((c) => ({ ...c, keyA: k(`${c.name}:pkg`), keyB: k(`${c.name}:raw`) }));
}

const toInts = (reply) => (Array.isArray(reply) ? reply.map((v) => (typeof v === "string" && /^-?\d+$/.test(v) ? Number(v) : v)) : reply);

module.exports = { NOW, cases, six, toInts };
