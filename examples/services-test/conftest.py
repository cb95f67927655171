"""Two example apps of different stacks as one service (SERVICES.md, "Any two
example apps are one service"): instance 1 from one app, instance 2 from the
other, on one redis-server with the module and one RL_PREFIX, driven over
HTTP. The apps are started as `make example-*` starts them:

- python: examples/python/app.py with the client's venv (make python-venv);
- node: examples/node/server.js (make node-build, the example's npm ci);
- java: examples/spring's jar (built by `make example-java`'s Maven command);
- kotlin: examples/spring-kotlin's jar (`make example-kotlin`), which serves
  the endpoints of the next round's checks (test_next_round.py) only;
- webflux: examples/spring-webflux's jar (`make example-webflux`), the same
  endpoints on Spring WebFlux.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "integration"))

from servers import Server, free_port  # noqa: E402

PYTHON = ROOT / "clients" / "python" / ".venv" / "bin" / "python"
JAR = ROOT / "examples" / "spring" / "target" / "ratelimit-example-spring.jar"
KOTLIN_JAR = ROOT / "examples" / "spring-kotlin" / "target" / "ratelimit-example-spring-kotlin.jar"
WEBFLUX_JAR = ROOT / "examples" / "spring-webflux" / "target" / "ratelimit-example-spring-webflux.jar"
COMMANDS = {
    "python": ([str(PYTHON), "app.py"], ROOT / "examples" / "python"),
    "node": (["node", "server.js"], ROOT / "examples" / "node"),
    "java": (["java", "-jar", str(JAR)], ROOT),
    "kotlin": (["java", "-jar", str(KOTLIN_JAR)], ROOT),
    "webflux": (["java", "-jar", str(WEBFLUX_JAR)], ROOT),
}


class App:
    """One example app as a process, listening on a free port."""

    def __init__(self, kind: str, redis_url: str | None, prefix: str, *, cluster: str | None = None,
                 backend: str | None = None) -> None:
        cmd, cwd = COMMANDS[kind]
        self.kind = kind
        self.port = free_port()
        env = dict(os.environ, PORT=str(self.port), RL_PREFIX=prefix)
        for name in ("REDIS_URL", "REDIS_CLUSTER", "RL_BACKEND"):
            env.pop(name, None)
        if cluster:
            env["REDIS_CLUSTER"] = cluster
        else:
            env["REDIS_URL"] = redis_url
        if backend:
            env["RL_BACKEND"] = backend
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 180  # a JVM on a loaded 2-core machine (load 30: over 90 s seen)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"example-{kind} exited: {self.proc.stderr.read().decode()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"example-{kind} did not answer /health within 180 s")
            time.sleep(0.1)
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def __repr__(self) -> str:
        return f"example-{self.kind}"

    def stop(self) -> None:
        if getattr(self, "http", None) is not None:
            self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def redis_server():
    with Server() as s:
        yield s


PAIRS = [("python", "node"), ("node", "java"), ("java", "python")]


@pytest.fixture(scope="module", params=[pytest.param(p, id="+".join(p)) for p in PAIRS])
def pair(request, redis_server):
    """Instance 1 of one app, instance 2 of the other: one Redis, one prefix."""
    first, second = request.param
    prefix = f"pair-{first}-{second}-{time.time_ns()}:"
    url = f"redis://127.0.0.1:{redis_server.port}"
    a = App(first, url, prefix)
    try:
        b = App(second, url, prefix)
    except BaseException:
        a.stop()
        raise
    yield a, b
    a.stop()
    b.stop()
