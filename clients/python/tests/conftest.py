"""Real redis-server processes (the project's integration/servers.py): one
standalone server and one three-primary Cluster for the whole run, each with
the module ($RL_MODULE), stopped at the end. Tests use distinct keys."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "integration"))

from servers import Cluster, Server, redis_cli  # noqa: E402

_ids = itertools.count()


@pytest.fixture(scope="session")
def server():
    with Server() as s:
        yield s


@pytest.fixture(scope="session")
def cluster():
    if redis_cli() is None:
        pytest.skip("redis-cli is needed to create a cluster")
    with Cluster(3) as cl:
        yield cl


@pytest.fixture
def raw(server):
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def key(request):
    """A key no other test uses."""
    return f"t{next(_ids)}:{request.node.name[:40]}"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def server_ms(client) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def details_supported(client) -> bool:
    try:
        return len(client.execute_command("RL.ALLPEEK", 1, "probe", "*", "CHECK", 1, 1, 1, "COST", 0, "DETAILS")) > 7
    except Exception:
        return False
