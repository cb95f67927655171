"""The example app as a real process (app.py under uvicorn; EXAMPLE_APP picks another) against real
redis-server processes (integration/servers.py), driven over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "integration"))

import servers  # noqa: E402
from servers import free_port, redis_cli  # noqa: E402,F401 (re-exported to the tests)

from redis_rl.backend import fcall  # noqa: E402

# RL_BACKEND=functions runs every test on servers without the module, the app
# deciding with the Functions library (SERVICES.md "On a Redis without the
# module"); the app inherits the variable.
BACKEND = os.environ.get("RL_BACKEND") or "module"
WITH_MODULE = BACKEND != "functions"


def Server(**kw):  # noqa: N802 (stands in for the class)
    kw.setdefault("module", WITH_MODULE)
    return servers.Server(**kw)


def Cluster(n=3, **kw):  # noqa: N802
    kw.setdefault("module", WITH_MODULE)
    return servers.Cluster(n, **kw)


def rl(client, *args):
    """An RL command sent as the app's backend sends it (a FCALL on the library)."""
    return client.execute_command(*(fcall(args) if BACKEND == "functions" else args))

# The app under test: this directory's FastAPI app, or another example app
# that serves the same contract (EXAMPLE_APP=../django/app.py: the Django
# one; mk/django.mk runs these tests against it).
APP = (Path(__file__).resolve().parents[1] / os.environ.get("EXAMPLE_APP", "app.py")).resolve()


class App:
    def __init__(self, *, redis_url: str | None = None, cluster: str | None = None, prefix: str = "t:",
                 backend: str | None = None):
        self.port = free_port()
        env = dict(os.environ, PORT=str(self.port), RL_PREFIX=prefix)
        if backend is not None:
            env["RL_BACKEND"] = backend
        if cluster:
            env["REDIS_CLUSTER"] = cluster
        else:
            env["REDIS_URL"] = redis_url
        self.proc = subprocess.Popen([sys.executable, str(APP)], env=env, cwd=APP.parent,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app exited: {self.proc.stderr.read().decode()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise RuntimeError("app did not start")
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def overhead(self, n: int = 1) -> float:
        """Seconds the slowest of n GET /health at once (no Redis call) takes
        now: what this machine adds to any answer. SERVICES.md's "within
        1,000 ms" checks allow 1 s plus this, so a loaded 2-core machine (where
        scheduling alone can take 100s of ms) does not fail a correct app, and
        an app that waits on Redis past its budget still fails."""
        def one(_):
            t0 = time.monotonic()
            self.http.get("/health")
            return time.monotonic() - t0
        if n == 1:
            return one(0)
        with ThreadPoolExecutor(n) as pool:
            return max(pool.map(one, range(n)))

    def stop(self):
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="session")
def redis_server():
    with Server() as s:
        yield s


@pytest.fixture(scope="session")
def app(redis_server):
    a = App(redis_url=f"redis://127.0.0.1:{redis_server.port}", prefix="one:")
    yield a
    a.stop()


@pytest.fixture(scope="session")
def details(redis_server):
    """True: this tree's engine has RL.ALL DETAILS, so the tests' `if details:`
    checks always run; a module without it fails here instead of skipping them."""
    c = redis_server.client()
    try:
        reply = rl(c, "RL.ALLPEEK", 1, "p", "*", "CHECK", 1, 1, 1, "COST", 0, "DETAILS")
    finally:
        c.close()
    assert len(reply) > 7, f"the module at $RL_MODULE answers no RL.ALL DETAILS: {reply!r}"
    return True
