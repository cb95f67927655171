"""`make run` (README "Start", docs/guides/development.md "make run"): when the port is taken it
names a free one to use instead (not always 6380), and `RUN_ARGS` adds
persistence to a server that otherwise forgets every limit on restart.
`-o build` skips the build step: `make test` has just built the module."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest
import redis

from servers import ROOT, Server, free_port, wait_until

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("redis-server") is None,
                                reason="make run needs make and Debian's redis-server")


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_taken_port_suggests_a_free_one():
    with Server() as s:
        # Hold the next port too, when it is free, so "port + 1" is no answer.
        holder = socket.socket()
        holding = False
        try:
            try:
                holder.bind(("127.0.0.1", s.port + 1))
                holder.listen()
                holding = True
            except OSError:
                # In use, though maybe not listening (a client's ephemeral
                # port): then it may rightly be suggested.
                pass
            done = subprocess.run(["make", "-s", "-o", "build", "run", f"PORT={s.port}"], cwd=ROOT,
                                  capture_output=True, text=True, timeout=60)
        finally:
            holder.close()
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert f"something already listens on port {s.port}" in out, out
    suggested = int(re.search(r"use PORT=(\d+) make run", out).group(1))
    assert suggested >= s.port + (2 if holding else 1), out
    assert not listening(suggested)


def test_taken_port_is_said_before_the_build():
    """On a fresh machine the build takes minutes: a taken port is said
    first, without building (cargo never runs)."""
    with Server() as s:
        done = subprocess.run(["make", "run", f"PORT={s.port}"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"something already listens on port {s.port}" in out, out
    assert "cargo" not in out and "deps.sh" not in out, out


def test_run_args_add_persistence():
    port = free_port()
    data = tempfile.mkdtemp(prefix="rl-run-")
    proc = subprocess.Popen(["make", "-s", "-o", "build", "run", f"PORT={port}",
                             f"RUN_ARGS=--appendonly yes --dir {data} --bind 127.0.0.1"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        c = redis.Redis(port=port, socket_timeout=5)

        def up():
            try:
                return c.ping()
            except redis.exceptions.ConnectionError:
                return False
        wait_until(up, 15, what="make run to answer")
        assert c.config_get("appendonly") == {"appendonly": "yes"}
        assert c.execute_command("RL.CHECK", "k", "*", 1, 60000)[0] == 0
        c.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
        shutil.rmtree(data, ignore_errors=True)
    assert "a restart forgets every limit" in out
