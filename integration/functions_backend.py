"""The test side of RL_BACKEND=functions: loads the Functions library into a
server and rewrites the module's commands into FCALLs, so one test suite
proves the library answers as the module does (SPEC.md, "The Functions
library").

`RL.X key arg...` becomes `FCALL rl_x 1 key arg...`; the keys are the ones
`COMMAND GETKEYS` reports for the module's command: one for most, two for
RL.DAYHOUR and RL.LOCKCOUNT, `numkeys key...` for RL.ALL and RL.ALLPEEK
(whose layout FCALL shares). A call the module would refuse before its keys
(too few arguments, a numkeys it refuses) is sent with no keys, so the
library answers the module's error. Peeks go through FCALL_RO.
"""

from __future__ import annotations

import re
from pathlib import Path

import redis
import redis.client

LIBRARY = Path(__file__).resolve().parent.parent / "functions" / "ratelimit.lua"

# Commands with two keys; RL.ALL and RL.ALLPEEK count theirs.
TWO_KEYS = {"RL.DAYHOUR", "RL.LOCKCOUNT"}
NUMKEYS = {"RL.ALL", "RL.ALLPEEK"}
PEEKS = {"RL.PEEK", "RL.THROTTLEPEEK", "RL.QUOTAPEEK", "RL.LEASEPEEK", "RL.ALLPEEK"}
INTEGER = re.compile(rb"^(0|[1-9][0-9]*)$")

# IANA zones that keep one offset all year (since 1992 at least), sent as
# their offset, as the clients do on the library (SPEC: the library computes
# UTC and fixed offsets; a zone with daylight saving is not covered).
FIXED_ZONES = {
    b"Asia/Shanghai": b"+08:00", b"Asia/Tokyo": b"+09:00", b"Asia/Kolkata": b"+05:30",
    b"Asia/Dubai": b"+04:00", b"Asia/Singapore": b"+08:00", b"Asia/Hong_Kong": b"+08:00",
    b"Asia/Seoul": b"+09:00", b"Etc/GMT": b"+00:00",
}


def _zones(args: list, kind_at: int | None) -> list:
    """The fixed-offset zones of RL.QUOTA (zone at kind_at) or of RL.ALL's
    QUOTA clauses as offsets."""
    out = list(args)
    if kind_at is not None:
        if kind_at < len(out) and _bytes(out[kind_at]) in FIXED_ZONES:
            out[kind_at] = FIXED_ZONES[_bytes(out[kind_at])]
        return out
    for i, a in enumerate(out[:-2]):
        if _bytes(a).upper() == b"QUOTA" and _bytes(out[i + 2]) in FIXED_ZONES:
            out[i + 2] = FIXED_ZONES[_bytes(out[i + 2])]
    return out


def source() -> str:
    return LIBRARY.read_text()


def load(client: redis.Redis) -> None:
    client.execute_command("FUNCTION", "LOAD", "REPLACE", source())


def _bytes(a) -> bytes:
    if isinstance(a, bytes):
        return a
    if isinstance(a, memoryview):
        return a.tobytes()
    return str(a).encode()


def rewrite(args: tuple) -> tuple:
    """`RL.X ...` as the FCALL the library takes; any other command as is."""
    if not args:
        return args
    head = _bytes(args[0]).upper()
    if head == b"COMMAND GETKEYS" and len(args) > 1:
        return (args[0], *rewrite(tuple(args[1:])))
    if head == b"COMMAND" and len(args) > 2 and _bytes(args[1]).upper() == b"GETKEYS":
        return (args[0], args[1], *rewrite(tuple(args[2:])))
    name = _bytes(args[0]).decode("latin-1").upper()
    if not name.startswith("RL."):
        return args
    fn = "rl_" + name[3:].lower()
    call = "FCALL_RO" if name in PEEKS else "FCALL"
    rest = list(args[1:])
    if name in ("RL.QUOTA", "RL.QUOTAPEEK"):
        rest = _zones(rest, 2)
    elif name in NUMKEYS:
        rest = _zones(rest, None)
    if name in NUMKEYS:
        n = _bytes(rest[0]) if rest else b""
        if INTEGER.match(n) and len(n) <= 2 and 1 <= int(n) <= 64 and int(n) <= len(rest) - 1:
            if is_refund(name, rest):
                k = int(n)
                return ("FCALL", "rl_refund", k, *rest[1:k + 1], "all", *rest[k + 1:])
            return (call, fn, *rest)
        return (call, fn, 0, *rest)
    keys = min(2 if name in TWO_KEYS else 1, len(rest))
    if keys == 1 and is_refund(name, rest):
        return ("FCALL", "rl_refund", 1, rest[0], name[3:].lower(), *rest[1:])
    return (call, fn, keys, *rest)


def is_refund(name: str, rest: list) -> bool:
    """A refund call, which goes through rl_refund (flagged allow-oom: SPEC
    "Memory", refunds run above maxmemory)."""
    words = [_bytes(a).upper() for a in rest]
    if name in ("RL.CHECK", "RL.THROTTLE", "RL.QUOTA"):
        return b"REFUND" in words[2:]
    if name == "RL.ALL":
        return words[-1:] == [b"REFUND"] or words[-2:] == [b"REFUND", b"DETAILS"]
    return False


class Pipeline(redis.client.Pipeline):
    def execute_command(self, *args, **options):
        return super().execute_command(*rewrite(args), **options)


class Redis(redis.Redis):
    """redis.Redis that sends the module's commands to the library."""

    def execute_command(self, *args, **options):
        return super().execute_command(*rewrite(args), **options)

    def pipeline(self, transaction=True, shard_hint=None):
        return Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def cluster_client_class():
    """redis.cluster.RedisCluster that sends the module's commands to the
    library (FCALL's keys route the call, as COMMAND GETKEYS reports them)."""
    from redis.cluster import RedisCluster

    class Cluster(RedisCluster):
        def execute_command(self, *args, **kwargs):
            return super().execute_command(*rewrite(args), **kwargs)

    return Cluster
