"""RL.PEEK and RL.CHECK against the SPEC's formulas on sets of every shape.

The module counts a window in one of four ways: from the set's extremes,
stepping down from the newest members, stepping up from the oldest, or by
rank with ZCOUNT/ZRANGE once more than a few dozen members would be stepped
through; and listpack and skiplist sets differ inside Redis. Random sets of
sizes on both sides of each threshold, random windows, costs and times, with
fractional and future scores, must all give the SPEC's reply — RL.PEEK's,
and RL.ALLPEEK's with DETAILS (each rule alone), which reuses the counts its
decision made.
"""

import os
import random

import pytest

from test_seed_interop import spec_reply

SIZES = [1, 7, 30, 127, 129, 400, 3000]


@pytest.mark.parametrize("size", SIZES)
def test_every_counting_path_gives_the_spec_reply(r, size):
    seed = int(os.environ.get("RL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed * 31 + size)
    t0 = 10_000_000
    for trial in range(6):
        key = f"paths:{size}:{trial}"
        spread = rng.choice([1_000, 60_000, 3_600_000])
        scores = [t0 - rng.randrange(spread) + rng.choice([0, 0, 0, 0.5]) for _ in range(size)]
        scores += [t0 + rng.randrange(1, 5_000) for _ in range(rng.choice([0, 0, 2]))]  # future
        r.zadd(key, {f"m{i}": s for i, s in enumerate(scores)})
        for _ in range(25):
            t = t0 + rng.randrange(-2_000, 2_000)
            rules = []
            for _ in range(rng.choice([1, 2, 3])):
                window = rng.choice([1, 500, 5_000, 30_000, 600_000, 7_200_000])
                rules.append((rng.randrange(1, 2 * len(scores) + 3), window))
            cost = rng.randrange(1, min(c for c, _ in rules) + 1)
            args = [x for rule in rules for x in rule]
            got = r.execute_command("RL.PEEK", key, t, *args, "COST", cost)
            want = spec_reply(scores, t, rules, cost)
            assert got == want, f"seed {seed}: size {size} t {t} rules {rules} cost {cost}"
            # RL.ALL's DETAILS answers each rule from the counts the decision
            # made (one count per window and call): the same as counting anew.
            got = r.execute_command("RL.ALLPEEK", 1, key, t, "CHECK", 1, *args, "COST", cost, "DETAILS")
            assert got[:7] == want[:1] + [1] + want[1:], f"seed {seed}: size {size} t {t} rules {rules}"
            admitted = want[0] == 0
            state, each_cost = (scores + [t] * cost, 0) if admitted else (scores, cost)
            details = [spec_reply(state, t, [rule], each_cost) for rule in rules]
            for i, d in enumerate(details):
                d[1] = i + 1
            assert got[7] == details, f"seed {seed}: size {size} t {t} rules {rules} cost {cost}"
        # One admitted RL.CHECK gives the same reply and writes what the SPEC says.
        rules = [(len(scores) + 50, 10_000_000)]
        got = r.execute_command("RL.CHECK", key, t0, *rules[0])
        assert got == spec_reply(scores, t0, rules), f"seed {seed}"
        assert r.zcard(key) == len(scores) + 1
