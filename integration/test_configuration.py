"""The module configuration `ratelimit.max-future-ms` and its mirror
`ratelimit.max-past-ms` (SPEC "A clock guard"): load-time arguments, CONFIG
GET / SET, and the guards themselves."""

from __future__ import annotations

import pytest
import redis

from replay_workload import rl, server_ms
from servers import MODULE, Server


def test_load_time_argument_and_config_set():
    with Server(module=False, args=["--loadmodule", MODULE, "max-future-ms", "5000"]) as s:
        c = s.client()
        assert c.config_get("ratelimit.max-future-ms") == {"ratelimit.max-future-ms": "5000"}
        t = server_ms(c)
        with pytest.raises(redis.ResponseError, match="invalid now .* ahead of the server clock"):
            rl(c, "RL.CHECK", "k", t * 1000, 5, 1000)  # microseconds
        assert not c.exists("k")
        assert rl(c, "RL.CHECK", "k", t + 1000, 5, 1000)[0] == 0
        c.config_set("ratelimit.max-future-ms", 0)
        assert rl(c, "RL.THROTTLE", "k2", t * 1000, 5, 1, 1000)[0] == 0


def test_max_past_ms_as_a_load_time_argument():
    with Server(module=False, args=["--loadmodule", MODULE, "max-past-ms", "60000",
                                    "max-future-ms", "5000"]) as s:
        c = s.client()
        assert c.config_get("ratelimit.max-past-ms") == {"ratelimit.max-past-ms": "60000"}
        t = server_ms(c)
        # A now in seconds reads as January 1970: refused, nothing written.
        with pytest.raises(redis.ResponseError, match="invalid now .* behind the server clock"):
            rl(c, "RL.CHECK", "k", t // 1000, 5, 1000)
        with pytest.raises(redis.ResponseError, match="ratelimit.max-past-ms"):
            rl(c, "RL.QUOTA", "k", t - 120_000, "UTC", "DAY", 5)
        assert not c.exists("k")
        assert rl(c, "RL.CHECK", "k", t - 30_000, 5, 1000)[0] == 0
        c.config_set("ratelimit.max-past-ms", 0)
        assert rl(c, "RL.THROTTLE", "k2", t // 1000, 5, 1, 1000)[0] == 0


@pytest.mark.parametrize("args, reason", [
    (["max-future-ms", "-5"], "max-future-ms: '-5' is not an integer from 0 to 9007199254740991"),
    (["max-future-ms", "05"], "max-future-ms: '05' is not an integer"),
    (["max-future-ms", "abc"], "max-future-ms: 'abc' is not an integer from 0 to 9007199254740991"),
    (["max-past-ms", "1.5"], "max-past-ms: '1.5' is not an integer from 0 to 9007199254740991"),
    (["max-future-ms"], "max-future-ms needs a value"),
    (["max-past-ms", "-1"], "max-past-ms: '-1' is not an integer from 0 to 9007199254740991"),
    (["max-past-ms", "1", "max-past-ms", "1"], "max-past-ms given twice"),
    (["max-past-ms"], "max-past-ms needs a value"),
    (["foo", "1"], "unknown load argument 'foo'"),
    (["max-future-ms", "1", "max-future-ms", "2"], "max-future-ms given twice"),
])
def test_bad_load_arguments_fail_the_load_with_a_reason(args, reason):
    s = Server(module=False, args=["--loadmodule", MODULE, *args])
    with pytest.raises(RuntimeError, match="server did not start"):
        s.start()
    try:
        assert reason in s.log_tail(50)
    finally:
        s.stop()
