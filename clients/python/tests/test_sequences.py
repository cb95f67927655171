"""The golden sequence cases (clients/conformance/sequences/) against the
local backend and against the real module: the same decisions, call by call."""

from __future__ import annotations

import itertools

import pytest

from redis_rl.local import LocalRedis, ManualClock
from sequences import START_MS, ClockedRedis, load, run

CASES = load()
_runs = itertools.count()


def test_there_are_sequences_of_every_kind():
    kinds = {lim["kind"] for c in CASES for p in c["policies"] for lim in p["limits"]}
    assert kinds == {"window", "bucket", "quota", "concurrency", "lockout"}
    assert len({c["id"] for c in CASES}) == len(CASES) >= 9


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_local_backend(case):
    clock = ManualClock(START_MS)
    assert run(case, LocalRedis(clock), clock) == []


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_module(case, server):
    clock = ManualClock(START_MS)
    client = ClockedRedis(clock, host="127.0.0.1", port=server.port, decode_responses=True)
    try:
        assert run(case, client, clock, prefix=f"seq{next(_runs)}:") == []
    finally:
        client.close()
