"""The container files (packaging/docker), checked without a container engine:
each Dockerfile linted (dockerfile-utils, pinned in packaging/lint) and read
for what it must hold, compose.yaml validated against the Compose
Specification's schema, and each server line's config file loaded by this
machine's server binaries with the module from the release archive."""
from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import redis

from conftest import ROOT
from servers import free_port, server_binary

DOCKER = ROOT / "packaging" / "docker"
LINT = ROOT / "packaging" / "lint" / "node_modules" / ".bin" / "dockerfile-utils"
# server line -> (official base image, its non-root user, config file, where the image reads it)
LINES = {
    "redis8": ("redis:8.", "redis", "redis.conf", "/usr/local/etc/redis/"),
    "valkey9": ("valkey/valkey:9.", "valkey", "valkey.conf", "/usr/local/etc/valkey/"),
}


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", "\n".join(
        line for line in dockerfile.read_text().splitlines() if not line.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", text, re.M)]


@pytest.mark.parametrize("dockerfile", sorted(DOCKER.glob("*/Dockerfile")), ids=lambda p: p.parent.name)
def test_dockerfile_lints_clean(dockerfile):
    done = subprocess.run([str(LINT), "lint", str(dockerfile)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_file_follows_the_compose_spec():
    done = subprocess.run([str(ROOT / ".venv/bin/check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                           str(DOCKER / "compose.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (DOCKER / "compose.yaml").read_text()
    for ref in re.findall(r"^\s*dockerfile:\s*(\S+)$", text, re.M):
        assert (ROOT / ref).is_file(), ref


@pytest.mark.parametrize("line", sorted(LINES))
def test_dockerfile_takes_the_module_from_the_release_archive(line, version):
    base, user, conf, etc = LINES[line]
    steps = instructions(DOCKER / line / "Dockerfile")
    args = dict(a.split("=", 1) for i, a in steps if i == "ARG" and "=" in a)
    assert args["BASE"].startswith(base) and "alpine" not in args["BASE"], args["BASE"]  # glibc, not musl
    assert args["RL_VERSION"] == version  # stamped from VERSION
    assert [a for i, a in steps if i == "FROM"] == ["${BASE} AS archive", "${BASE}"]
    assert ("ADD", "dist/redis-ratelimit-${RL_VERSION}-linux-${ARCH}.tar.gz /unpacked/") in steps
    final = steps[[i for i, _ in steps].index("FROM", 1):]
    assert ("USER", user) in final and [a for i, a in final if i == "USER"][-1] == user
    copies = " ".join(a for i, a in final if i == "COPY")
    assert f"packaging/docker/{line}/{conf} {etc}{conf}" in copies
    assert f"ratelimit.conf {etc}ratelimit.conf" in copies
    assert [a for i, a in final if i == "CMD"][-1].endswith(f'"{etc}{conf}"]')
    assert f"include {etc}ratelimit.conf" in (DOCKER / line / conf).read_text()


@pytest.fixture(scope="module")
def unpacked(dist, version, tmp_path_factory):
    [archive] = dist.glob(f"redis-ratelimit-{version}-linux-*.tar.gz")
    where = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(archive) as t:
        t.extractall(where, filter="data")
    [top] = where.iterdir()
    return top


def test_module_runs_on_the_images_glibc(unpacked):
    """The images are Debian bookworm (glibc 2.36): the module needs no newer."""
    out = subprocess.run(["objdump", "-T", str(unpacked / "libredis_ratelimit.so")],
                         capture_output=True, text=True, check=True).stdout
    newest = max(tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", out))
    assert newest <= (2, 36), newest


@pytest.mark.parametrize("line,binary", [("redis8", "redis8"), ("valkey9", "valkey9"), ("redis8", "redis7")])
def test_config_file_loads_the_module(line, binary, unpacked, version, tmp_path):
    """The image's config, its paths moved under tmp_path and bound to
    loopback, started by a real server: the module loads from the archive's
    own snippet and the file's settings hold."""
    _, _, conf, etc = LINES[line]
    moved_etc = tmp_path / "etc"
    moved_etc.mkdir()
    modules = tmp_path / "modules"
    modules.mkdir()
    shutil.copy(unpacked / "libredis_ratelimit.so", modules)
    snippet = (unpacked / "ratelimit.conf").read_text()
    assert "loadmodule /usr/lib/redis/modules/libredis_ratelimit.so" in snippet
    (moved_etc / "ratelimit.conf").write_text(snippet.replace("/usr/lib/redis/modules/", f"{modules}/"))
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    text = (DOCKER / line / conf).read_text().replace(etc, f"{moved_etc}/")
    text = re.sub(r"^bind .*$", "bind 127.0.0.1", text, flags=re.M)  # the test listens on loopback only
    text = re.sub(r"^port .*$", f"port {port}", text, flags=re.M)
    text = re.sub(r"^dir .*$", f"dir {data}", text, flags=re.M)
    (moved_etc / conf).write_text(text + f"\nlogfile {tmp_path}/server.log\n")
    proc = subprocess.Popen([server_binary(binary), str(moved_etc / conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = redis.Redis(port=port, socket_timeout=5)
        deadline = time.monotonic() + 10
        while True:
            try:
                c.ping()
                break
            except redis.exceptions.ConnectionError:
                log = tmp_path / "server.log"
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text() if log.exists() else ""
                time.sleep(0.05)
        [mod] = [m for m in c.module_list() if m[b"name"] == b"ratelimit"]
        major, minor, patch = (int(x) for x in version.split("."))
        assert mod[b"ver"] == major * 10000 + minor * 100 + patch
        assert c.config_get("appendonly") == {"appendonly": "yes"}
        assert [c.execute_command("RL.CHECK", "docker", "*", 1, 60000)[0] for _ in range(2)] == [0, 1]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
