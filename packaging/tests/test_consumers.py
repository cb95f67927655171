"""Consumers of dist/ alone, outside the repository, each deciding against a
server that runs the module from the release archive (conftest.archive_server):
a Spring Boot app resolving the starter from dist/maven with a Maven local
repository that holds no dev.redisratelimit artifact, a fresh venv with the
wheel, a fresh npm project with the tarball."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import ROOT

CONSUMERS = ROOT / "packaging" / "consumers"


def run(cmd: list[str], **kw) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def redis_url(server) -> str:
    return f"redis://127.0.0.1:{server.port}"


def test_python_wheel_in_a_fresh_venv(dist, version, archive_server, tmp_path):
    [wheel] = (dist / "python").glob("*.whl")
    venv = tmp_path / "venv"
    run(["python3", "-m", "venv", str(venv)])
    # redis-py from PyPI, pinned as make test pins it; the package from dist/ only
    run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", str(wheel), "redis==5.2.1"])
    out = run([str(venv / "bin/python"), str(CONSUMERS / "python/consumer.py")], cwd=tmp_path,
              env={**os.environ, "REDIS_URL": redis_url(archive_server), "PYTHONPATH": ""})
    got = json.loads(out)
    assert got["version"] == version
    assert got["file"].startswith(str(venv)), got["file"]  # not the checkout's copy
    assert got["allowed"] == [True, False]


def test_npm_tarball_in_a_fresh_project(dist, version, archive_server, tmp_path):
    [tgz] = (dist / "npm").glob("*.tgz")
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "consumer", "private": True, "type": "module"}))
    shutil.copy(CONSUMERS / "node/consumer.mjs", app)
    run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", str(tgz), "ioredis@6.0.0"], cwd=app)
    got = json.loads(run(["node", "consumer.mjs"], cwd=app, env={**os.environ, "REDIS_URL": redis_url(archive_server)}))
    assert got["version"] == version
    assert got["file"].startswith(str(app / "node_modules" / "redis-ratelimit")), got["file"]
    assert got["limited"] == [False, True]


def local_repository_without_ours(tmp: Path) -> Path:
    """The user's Maven local repository minus dev/redisratelimit, as hard
    links (seconds, no second download of Spring Boot): the starter can then
    only come from dist/maven."""
    mine = Path(os.environ.get("RL_M2_REPO", Path.home() / ".m2" / "repository"))
    repo = tmp / "m2"
    if mine.is_dir():
        run(["cp", "-al", str(mine), str(repo)])
    repo.mkdir(exist_ok=True)
    shutil.rmtree(repo / "dev" / "redisratelimit", ignore_errors=True)
    return repo


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def test_spring_boot_app_resolves_the_starter_from_dist(dist, version, archive_server, tmp_path):
    app = tmp_path / "spring"
    shutil.copytree(CONSUMERS / "spring", app)
    repo = local_repository_without_ours(tmp_path)
    run(["mvn", "-B", "-q", "-ntp", "-Dstyle.color=never", f"-Dmaven.repo.local={repo}",
         f"-Drl.version={version}", f"-Drl.repo={(dist / 'maven').as_uri()}", "package"], cwd=app)
    # resolved from dist/maven (the repository id the consumer's pom gives it)
    starter = repo / "dev/redisratelimit/ratelimit-spring-boot-starter" / version
    assert "rl-dist" in (starter / "_remote.repositories").read_text()
    port = free_port()
    proc = subprocess.Popen(["java", "-Xmx256m", "-jar", str(app / "target/consumer.jar"), f"--server.port={port}",
                             "--server.address=127.0.0.1", f"--spring.data.redis.url={redis_url(archive_server)}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stdout.read()[-4000:]
            assert time.monotonic() < deadline, "the consumer app did not answer within 90 s"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        first, _ = get(f"http://127.0.0.1:{port}/hello")
        second, headers = get(f"http://127.0.0.1:{port}/hello")
        assert (first, second) == (200, 429)
        assert int(headers["Retry-After"]) > 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
