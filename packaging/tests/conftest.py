"""Fixtures of the release tests (make release-test): the repository, its one
version, dist/ as make release left it, and a server running the module from
the release archive."""
from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "integration"))

from servers import Server, server_binary  # noqa: E402


@pytest.fixture(scope="session")
def version() -> str:
    return (ROOT / "VERSION").read_text().strip()


@pytest.fixture(scope="session")
def dist(version) -> Path:
    d = ROOT / "dist"
    if not (d / "SHA256SUMS").is_file() or not list(d.glob(f"redis-ratelimit-{version}-linux-*.tar.gz")):
        pytest.fail(f"{d} holds no release of {version}: run make release (make release-test does)")
    return d


@pytest.fixture(scope="session")
def archive_server(dist, version, tmp_path_factory):
    """Redis 8 with the module from the release archive (not target/)."""
    [archive] = dist.glob(f"redis-ratelimit-{version}-linux-*.tar.gz")
    where = tmp_path_factory.mktemp("archive")
    with tarfile.open(archive) as t:
        t.extractall(where, filter="data")
    [so] = where.glob("*/libredis_ratelimit.so")
    with Server(module=False, binary=server_binary("redis8"), args=["--loadmodule", str(so)]) as s:
        mods = [m for m in s.client().module_list() if m[b"name"] == b"ratelimit"]
        assert mods and mods[0][b"path"].decode() == str(so), mods
        yield s
