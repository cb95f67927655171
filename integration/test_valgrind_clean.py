"""The module under valgrind's memcheck: RL.CHECK and RL.PEEK on missing
and present keys, RL.THROTTLE and RL.QUOTA, raise no "depends on
uninitialised value" report in the module's frames (there was one in
`window::decide`: `Option::map_or` compiled branchless read a `None`'s
unused payload). On every server of the matrix (RL_SERVER)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis

from servers import MODULE, free_port, server_binary

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")

CALLS = [
    ("RL.CHECK", "a", "*", 10, 60000),
    ("RL.CHECK", "b", 1000, 10, 60000, 5, 1000),
    ("RL.PEEK", "missing", "*", 10, 60000),
    ("RL.CHECK", "a", "*", 10, 60000),
    ("RL.PEEK", "a", "*", 1, 60000),
    ("RL.THROTTLE", "t", "*", 5, 5, 1000),
    ("RL.THROTTLEPEEK", "u", "*", 5, 5, 1000),
    ("RL.QUOTA", "q", "*", "Asia/Shanghai", "DAY", 5, "HOUR", 2),
    ("RL.QUOTAPEEK", "r", "*", "UTC", "DAY", 5),
]


def module_reports(log: str) -> list[str]:
    """valgrind's error reports whose stack passes through the module."""
    blocks = re.split(r"\n==\d+== \n", log)
    return [b for b in blocks if "uninitialised" in b and "redis_ratelimit" in b]


def test_no_uninitialised_reads_in_the_module():
    workdir = Path(tempfile.mkdtemp(prefix="rl-vg-"))
    port = free_port()
    log = workdir / "valgrind.log"
    proc = subprocess.Popen(["valgrind", f"--log-file={log}", server_binary(), "--port", str(port),
                             "--bind", "127.0.0.1", "--dir", str(workdir), "--save", "", "--appendonly", "no",
                             "--loadmodule", MODULE],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = redis.Redis(port=port, socket_timeout=30)
        deadline = time.time() + 120
        while True:
            try:
                c.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail(f"server under valgrind did not start: {log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.5)
        for call in CALLS:
            c.execute_command(*call)
        try:
            c.shutdown(nosave=True)
        except redis.exceptions.ConnectionError:
            pass
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    shutil.rmtree(workdir, ignore_errors=True)
    assert module_reports(text) == []
