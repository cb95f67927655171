"""Arguments the module would refuse raise before any Redis call: the client
here has no server at all (port 1 refuses connections), so any call that
reached Redis would raise ConnectionError instead of ValueError/TypeError."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import redis

from redis_rl import Clause, RateLimiter

S = timedelta(seconds=1)


@pytest.fixture
def rl():
    return RateLimiter(redis.Redis(host="127.0.0.1", port=1), check_module=False)


@pytest.mark.parametrize("call, message", [
    (lambda rl: rl.check("k", [(1, timedelta(0))]), "window of rule 1"),
    (lambda rl: rl.check("k", [(1, 0)]), "window of rule 1"),
    (lambda rl: rl.check("k", [(0, S)]), "count of rule 1"),
    (lambda rl: rl.check("k", [(5, S)], cost=6), "cost"),
    (lambda rl: rl.check("k", [(20_000, S)], cost=10_001), "cost"),
    (lambda rl: rl.check("k", [(1, S)] * 65), "too many rules"),
    (lambda rl: rl.check("k", []), "at least one rule"),
    (lambda rl: rl.check("k", [(1, timedelta(microseconds=1500))]), "whole milliseconds"),
    (lambda rl: rl.check("k", [(1, S)], now=-1), "now"),
    (lambda rl: rl.check("k", [(1, S)], now=2**53), "now"),
    (lambda rl: rl.check("k", [(1, S)], now=datetime(2026, 1, 1)), "naive"),
    (lambda rl: rl.check("k", [(1, S)], mode="refnd"), "mode"),
    (lambda rl: rl.check("", [(1, S)]), "key"),
    (lambda rl: rl.peek("k", [(1, S)], cost=-1), "cost"),
    (lambda rl: rl.throttle("k", [(0, 1, S)]), "burst of rule 1"),
    (lambda rl: rl.throttle("k", [(5, 5, S)], cost=6), "cost"),
    (lambda rl: rl.throttle("k", [(5, 5, S), (6, 6, S)]), "two rules with the window"),
    (lambda rl: rl.throttle("k", [(1, 2_000_000, 1)]), "one per nanosecond"),
    (lambda rl: rl.throttle("k", [(1, 1, S)], mode="debit", reserve=S), "reserve"),
    (lambda rl: rl.quota("k", "Mars/Base", {"day": 1}), "invalid zone"),
    (lambda rl: rl.quota("k", "+24:00", {"day": 1}), "invalid zone"),
    # ZoneInfo opens these files of Debian's zoneinfo directory; the module refuses them.
    (lambda rl: rl.quota("k", "localtime", {"day": 1}), "invalid zone"),
    (lambda rl: rl.quota("k", "posixrules", {"day": 1}), "invalid zone"),
    (lambda rl: rl.quota("k", "posix/Europe/Paris", {"day": 1}), "invalid zone"),
    (lambda rl: rl.quota("k", "right/UTC", {"day": 1}), "invalid zone"),
    (lambda rl: rl.quota("k", "UTC", {"fortnight": 1}), "invalid period"),
    (lambda rl: rl.quota("k", "UTC", {"day": -1}), "limit of DAY"),
    (lambda rl: rl.quota("k", "UTC", {}), "at least one period"),
    (lambda rl: rl.quota("k", "UTC", {"day": 1, "DAY": 2}), "given twice"),
    (lambda rl: rl.quota("k", "UTC", {"day": 1}, now=253_402_300_800_000), "now"),
    (lambda rl: rl.lease("k", 0, S), "limit"),
    (lambda rl: rl.lease("k", 2, S, cost=3), "cost"),
    (lambda rl: rl.lease("k", 2, S, token="a b"), "token"),
    (lambda rl: rl.lease("k", 2, S, token="a#2"), "token"),
    (lambda rl: rl.lease("k", 2, S, token="x" * 65), "token"),
    (lambda rl: rl.lease("k", 2, S, now=2**53 - 10), "ttl"),
    (lambda rl: rl.release("k", ["a", "a"]), "twice"),
    (lambda rl: rl.release("k", []), "at least one token"),
    (lambda rl: rl.renew("k", 0, ["a"]), "ttl"),
    (lambda rl: rl.dayhour("d", "d", 1, 1, S, S), "must differ"),
    (lambda rl: rl.lockcount("l", "n", S, -1, S), "max"),
    (lambda rl: rl.all([]), "at least one clause"),
    (lambda rl: rl.all([Clause.check("a", [(1, S)]), Clause.check("a", [(1, S)])]), "same key"),
    (lambda rl: rl.all([Clause.lease("a", 1, S, token=None)]), "needs a token"),
    (lambda rl: rl.all([Clause.check("a", [(1, S)], cost=0)]), "cost 0"),
])
def test_refused_before_any_redis_call(rl, call, message):
    with pytest.raises(ValueError, match=message):
        call(rl)


@pytest.mark.parametrize("call", [
    lambda rl: rl.check("k", [(1.5, S)]),
    lambda rl: rl.check("k", [(True, S)]),
    lambda rl: rl.check("k", [(1, 1.0)]),
    lambda rl: rl.check("k", [1]),
    lambda rl: rl.quota("k", 8, {"day": 1}),
])
def test_wrong_types_raise_type_error(rl, call):
    with pytest.raises(TypeError):
        call(rl)


def test_the_fixture_really_has_no_server(rl):
    with pytest.raises(redis.exceptions.ConnectionError):
        rl.check("k", [(1, S)])
