"""Real redis-server (or valkey-server) processes for the integration tests.

Each server gets a free loopback port chosen at run time and its own temporary
directory, and is stopped (only the processes started here) when the test ends.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
MODULE = os.environ.get("RL_MODULE", str(ROOT / "target" / "release" / "libredis_ratelimit.so"))


def server_binary() -> str:
    """The server under test: $RL_SERVER, else redis-server from PATH."""
    return os.environ.get("RL_SERVER") or shutil.which("redis-server") or "redis-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process. `with Server() as s: s.client().ping()`."""

    def __init__(self, *, module: bool = True, args: list[str] | None = None, binary: str | None = None,
                 directory: str | None = None):
        self.binary = binary or server_binary()
        self.module = module
        self.extra = list(args or [])
        self._own_dir = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="rl-it-")
        self.port = 0
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Server":
        last_error = ""
        for _ in range(5):  # another process may take the free port first
            self.port = free_port()
            cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                   "--save", "", "--appendonly", "no", "--logfile", "server.log"]
            if self.module:
                cmd += ["--loadmodule", MODULE]
            cmd += self.extra
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.time() + 10
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if self.client().ping():
                        return self
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
            last_error = self.log_tail()
            self.stop(keep_dir=True)
        raise RuntimeError(f"server did not start: {last_error}")

    def client(self, **kw) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, **kw)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(Path(self.dir, "server.log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, keep_dir: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._own_dir and not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
