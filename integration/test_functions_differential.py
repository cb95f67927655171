"""The Functions library against the module, call for call (SPEC.md, "The
Functions library"): one server with the module, one with the library, the
same random calls to both, and after each call every reply and every key's
type, scores, fields, values and expiry compared. Members the module names
itself (8 random characters) are compared by score and count, not by name.

`now` runs a day ahead of the servers' clocks, so the parts of a reply or
an expiry that read the server's clock (a late caller's lag, the reap bound)
are the same on both; RL.DAYHOUR and RL.LOCKCOUNT, whose TTLs count from the
server's clock, are compared within 1 s.
"""

from __future__ import annotations

import os
import random
import re

import pytest
import redis

import functions_backend
from servers import FUNCTIONS, Server

pytestmark = pytest.mark.skipif(FUNCTIONS, reason="compares the module with the library: runs once, in the module pass")

MODULE_NAMED = re.compile(rb"^[A-Za-z][0-9A-Za-z]{7}$")
# a member the module names: a unit of RL.CHECK, or a unit of a lease it named
NAMED_UNIT = re.compile(rb"^[A-Za-z][0-9A-Za-z]{7}(#[0-9]+)?$")
CALLS = int(os.environ.get("RL_DIFF_CALLS", "1000"))


def state(c: redis.Redis):
    out = {}
    for key in sorted(c.keys("*")):
        kind = c.type(key)
        if kind == b"none":
            continue  # expired between KEYS and TYPE
        at = c.execute_command("PEXPIRETIME", key)
        if kind == b"zset":
            named, others = [], []
            for member, score in c.zrange(key, 0, -1, withscores=True):
                m = NAMED_UNIT.match(member)
                if m:
                    named.append((m.group(1) or b"", score))
                else:
                    others.append((member, score))
            value = (sorted(named), sorted(others))
        elif kind == b"hash":
            value = sorted(c.hgetall(key).items())
        elif kind == b"string":
            value = c.get(key)
        else:
            value = kind
        out[key] = (kind, value, at)
    return out


def assert_same_state(got: dict, want: dict, where: str) -> None:
    """Equal keyspaces; a string's expiry (RL.DAYHOUR's and RL.LOCKCOUNT's
    counters count their TTL from each server's clock) within 1 s."""
    assert got.keys() == want.keys(), where
    for key, (kind, value, at) in want.items():
        g_kind, g_value, g_at = got[key]
        if kind == b"string" and at > 0 and g_at > 0 and abs(g_at - at) <= 1000:
            g_at = at
        assert (g_kind, g_value, g_at) == (kind, value, at), f"{where}: key {key!r}"


def send(c: redis.Redis, args):
    try:
        reply = c.execute_command(*args)
    except redis.ResponseError as e:
        return ("error", str(e))
    # A lease the module names itself: compared by its shape.
    if isinstance(reply, list) and len(reply) == 7 and isinstance(reply[6], bytes) and MODULE_NAMED.match(reply[6]):
        reply[6] = "<named>"
    return reply


class Calls:
    """Random calls over a few keys of each kind, now and then a wrong one."""

    def __init__(self, rng: random.Random, t0: int, lease_costs: int):
        self.rng = rng
        self.t = t0
        self.lease_costs = lease_costs
        self.tokens = [f"tok{i}" for i in range(6)]

    def now(self):
        r = self.rng.random()
        if r < 0.7:
            self.t += self.rng.choice([0, 0, 1, 7, 50, 300, 1000, 20000])
        return str(self.t - (self.rng.choice([0, 0, 0, 400]) if r > 0.9 else 0))

    def key(self, kind):
        if self.rng.random() < 0.03:
            return self.rng.choice(["{d}c1", "{d}t1", "{d}l1", "{d}s1"])  # maybe the wrong type
        return "{d}" + kind + str(self.rng.randint(1, 2))

    def cost(self, hi=3, zero=False):
        lo = 0 if zero else 1
        return ["COST", str(self.rng.randint(lo, hi))] if self.rng.random() < 0.5 else []

    def check_rules(self):
        rules = []
        for _ in range(self.rng.randint(1, 3)):
            rules += [str(self.rng.randint(1, 8)), str(self.rng.choice([1000, 5000, 60000]))]
        return rules

    def throttle_rules(self):
        rules = []
        for w in self.rng.sample([1000, 7000, 60000], self.rng.randint(1, 2)):
            rules += [str(self.rng.randint(1, 6)), str(self.rng.randint(1, 7)), str(w)]
        return rules

    def quota_tail(self):
        zone = self.rng.choice(["UTC", "+08:00", "-05:30", "+00:00"])
        periods = self.rng.sample(["MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "YEAR"], self.rng.randint(1, 3))
        tail = [zone]
        for p in periods:
            tail += [p, str(self.rng.randint(0, 9))]
        return tail

    def lease_tail(self, peek=False):
        tail = [str(self.rng.randint(1, 5))]
        if not peek:
            tail.append(str(self.rng.choice([500, 3000, 60000])))
        if self.rng.random() < 0.5:
            tail += ["COST", str(self.rng.randint(0 if peek else 1, self.lease_costs))]
        if self.rng.random() < 0.85:
            tail += ["TOKEN", self.rng.choice(self.tokens)]
        return tail

    def clause(self, kind, i, peek):
        if kind == "CHECK":
            return ["CHECK", str(i)] + self.check_rules() + self.cost(2, peek)
        if kind == "THROTTLE":
            return ["THROTTLE", str(i)] + self.throttle_rules() + self.cost(2, peek)
        if kind == "QUOTA":
            return ["QUOTA", str(i)] + self.quota_tail() + self.cost(2, peek)
        tail = [str(self.rng.randint(1, 5)), str(self.rng.choice([500, 3000, 60000])), "TOKEN", self.rng.choice(self.tokens)]
        if self.rng.random() < 0.4:
            tail += ["COST", str(self.rng.randint(0 if peek else 1, self.lease_costs))]
        return ["LEASE", str(i)] + tail

    def next(self):
        rng = self.rng
        op = rng.choice(["check", "check", "peek", "throttle", "throttle", "throttlepeek", "quota", "quotapeek",
                         "lease", "lease", "leasepeek", "release", "renew", "all", "all", "allpeek",
                         "dayhour", "lockcount", "junk"])
        now = self.now()
        if op in ("check", "peek"):
            args = ["RL." + op.upper(), self.key("c"), now] + self.check_rules() + self.cost(3, op == "peek")
            if op == "check" and rng.random() < 0.25:
                args.append(rng.choice(["REFUND", "DEBIT"]))
            return args
        if op in ("throttle", "throttlepeek"):
            args = ["RL." + op.upper(), self.key("t"), now] + self.throttle_rules() + self.cost(2, op != "throttle")
            r = rng.random()
            if r < 0.15:
                args += ["RESERVE", str(rng.choice([0, 100, 2000]))]
            elif op == "throttle" and r < 0.35:
                args.append(rng.choice(["REFUND", "DEBIT"]))
            return args
        if op in ("quota", "quotapeek"):
            args = ["RL." + op.upper(), self.key("q"), now] + self.quota_tail() + self.cost(4, op == "quotapeek")
            if op == "quota" and rng.random() < 0.25:
                args.append(rng.choice(["REFUND", "DEBIT"]))
            return args
        if op in ("lease", "leasepeek"):
            return ["RL." + op.upper(), self.key("l"), now] + self.lease_tail(op == "leasepeek")
        if op == "release":
            return ["RL.RELEASE", self.key("l"), now] + rng.sample(self.tokens, rng.randint(1, 3))
        if op == "renew":
            return ["RL.RENEW", self.key("l"), now, str(rng.choice([500, 5000]))] + rng.sample(self.tokens, rng.randint(1, 2))
        if op in ("all", "allpeek"):
            kinds = rng.sample(["CHECK", "THROTTLE", "QUOTA", "LEASE"], rng.randint(1, 3))
            keys = {"CHECK": "{d}c", "THROTTLE": "{d}t", "QUOTA": "{d}q", "LEASE": "{d}l"}
            names = [keys[k] + str(rng.randint(1, 2)) for k in kinds]
            args = ["RL." + op.upper(), str(len(kinds))] + names + [now]
            for i, k in enumerate(kinds):
                args += self.clause(k, i + 1, op == "allpeek")
            if op == "all" and rng.random() < 0.25:
                args.append("REFUND")
            if rng.random() < 0.4:
                args.append("DETAILS")
            return args
        if op == "dayhour":
            return ["RL.DAYHOUR", "{d}s1", "{d}s2", str(rng.randint(0, 5)), str(rng.randint(0, 3)), "86400000", "3600000"]
        if op == "lockcount":
            # (TTLs that outlast the run: they count on the servers' clocks)
            return ["RL.LOCKCOUNT", "{d}lock", "{d}s3", "6000000", str(rng.randint(0, 3)), "3000000"]
        # junk: a valid call with one argument replaced
        args = self.next()
        while args[0] == "RL.ALL" and len(args) < 4:
            args = self.next()
        i = rng.randrange(2, len(args)) if len(args) > 2 else 1
        args[i] = rng.choice(["05", "-0", "+1", "x", "", "9007199254740992", "COST", "REFUND", "DETAILS", "#"])
        return args


def test_library_answers_and_writes_as_the_module(tmp_path):
    seed = int(os.environ.get("RL_DIFF_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    with Server() as mod, Server(module=False) as lib:
        mc, lc = mod.client(), lib.client()
        functions_backend.load(lc)
        # The lease marker (SPEC: the first unit of a lease of 2 or more
        # scored half a ms early): leases of 2 or more are compared once the
        # module writes it.
        mc.execute_command("RL.LEASE", "probe", "*", "5", "1000", "COST", "2", "TOKEN", "p")
        marker = mc.zscore("probe", "p") % 1 == 0.5
        mc.delete("probe")
        lease_costs = 3 if marker else 1
        t0 = int(mc.execute_command("TIME")[0]) * 1000 + 86_400_000
        calls = Calls(rng, t0, lease_costs)
        for n in range(CALLS):
            args = calls.next()
            want = send(mc, args)
            got = send(lc, functions_backend.rewrite(tuple(args)))
            where = f"seed {seed}, call {n}: {' '.join(args)}"
            if args[0] == "RL.LOCKCOUNT" and isinstance(want, list) and isinstance(got, list) and want[2] > 0:
                # ms until the lock or the count expires, from each server's clock
                assert abs(got[2] - want[2]) <= 1000, where
                got[2] = want[2]
            assert got == want, where
            assert_same_state(state(lc), state(mc), where)
        print(f"{CALLS} calls compared (seed {seed}, leases up to cost {lease_costs})")
