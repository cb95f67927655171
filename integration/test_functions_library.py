"""The Functions library's source itself (functions/ratelimit.lua): it
compiles as Lua 5.1, writes no global (Redis refuses a global write at run
time, in whichever call first reaches it), reads only the standard names the
server provides, and registers every function with the flags SPEC.md gives."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import functions_backend
from servers import FUNCTIONS, Server

pytestmark = pytest.mark.skipif(FUNCTIONS, reason="checks the source once, in the module pass")

STANDARD = {"bit", "error", "ipairs", "math", "pcall", "redis", "string", "table", "tonumber", "tostring",
            "type", "unpack"}


def listing() -> str:
    luac = shutil.which("luac5.1")
    assert luac, "luac5.1 is needed (scripts/deps.sh system installs lua5.1)"
    done = subprocess.run([luac, "-p", "-l", str(functions_backend.LIBRARY)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_no_global_is_written_and_only_standard_ones_are_read():
    out = listing()
    assert "SETGLOBAL" not in out
    read = set(re.findall(r"GETGLOBAL\s.*; (\S+)", out))
    assert read <= STANDARD, read - STANDARD


def test_every_function_is_registered_with_its_flags():
    with Server(module=False) as s:
        c = s.raw_client()
        functions_backend.load(c)
        lib = c.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "ratelimit")[0]
        info = dict(zip(lib[::2], lib[1::2]))
        flags = {}
        for f in info[b"functions"]:
            d = dict(zip(f[::2], f[1::2]))
            flags[d[b"name"].decode()] = sorted(x.decode() for x in d[b"flags"])
    peeks = ["rl_peek", "rl_throttlepeek", "rl_quotapeek", "rl_leasepeek", "rl_allpeek", "rl_version"]
    writes = ["rl_check", "rl_throttle", "rl_quota", "rl_lease", "rl_dayhour", "rl_lockcount", "rl_all"]
    assert flags == {**{f: ["no-writes"] for f in peeks}, **{f: [] for f in writes},
                     **{f: ["allow-oom"] for f in ["rl_release", "rl_renew", "rl_refund"]}}
