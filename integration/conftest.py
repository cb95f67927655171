import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from servers import Server  # noqa: E402


@pytest.fixture
def server():
    with Server() as s:
        yield s


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()
