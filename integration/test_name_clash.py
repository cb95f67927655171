"""A command name taken by the server: when a core command or another
module already has one of the module's names (Valkey has proposed a core
`RL.THROTTLE`), the load fails with one log line naming the command, no RL
command is left registered, and the server keeps running. The other name
holder is a tiny C module (integration/modules/clash.c) built here with `cc`.
On every server of the matrix (RL_SERVER)."""

import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from servers import MODULE, Server

SOURCE = Path(__file__).resolve().parent / "modules" / "clash.c"
LOG_LINE = "the server already has a command named 'rl.throttle'"

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="a C compiler builds the clashing module")


@pytest.fixture(scope="module")
def clash_module(tmp_path_factory):
    out = tmp_path_factory.mktemp("clash") / "clash.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(out), str(SOURCE)], check=True)
    return str(out)


def test_load_at_startup_fails_naming_the_command(clash_module):
    s = Server(module=False, args=["--loadmodule", clash_module, "--loadmodule", MODULE])
    try:
        with pytest.raises(RuntimeError):
            s.start()
        log = Path(s.dir, "server.log").read_text(errors="replace")
        assert [line for line in log.splitlines() if LOG_LINE in line], log[-2000:]
    finally:
        s.stop()


def test_module_load_fails_and_registers_nothing(clash_module):
    with Server(module=False, args=["--loadmodule", clash_module, "--enable-module-command", "yes"]) as s:
        r = s.client()
        with pytest.raises(redis.ResponseError, match="(?i)error loading the extension|module"):
            r.execute_command("MODULE", "LOAD", MODULE)
        names = {dict(zip(m[::2], m[1::2])).get(b"name") for m in r.execute_command("MODULE", "LIST")}
        assert b"clash" in names and b"ratelimit" not in names
        # Only the other module's RL.THROTTLE: none of ours, not even the
        # ones registered before it in the module's table.
        names = r.execute_command("COMMAND LIST", "FILTERBY", "PATTERN", "rl.*")
        assert [n.lower() for n in names] == [b"rl.throttle"]
        assert r.execute_command("RL.THROTTLE", "k", "*", 1, 1, 1000) in (b"CLASH", "CLASH")
        lines = [line for line in s.log_tail(200).splitlines() if LOG_LINE in line]
        assert len(lines) == 1, s.log_tail(30)
        assert r.ping()
