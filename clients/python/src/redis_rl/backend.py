"""Which engine decides: the module's RL commands, or the project's Redis
Functions library (SPEC.md "The Functions library") on a Redis that loads
no module (ElastiCache, Memorystore, Azure, Upstash, Redis Cloud).

``module`` (the default) sends ``RL.X key ... args``; ``functions`` sends the
same call as ``FCALL rl_x numkeys key ... args`` (``FCALL_RO`` for a peek,
``rl_refund`` for a refund so it runs above maxmemory as the module's
refunds do); ``auto`` uses the module where every primary has it, else the
library — and switches to the library when the module goes missing at run
time (a failover to a server without it).

The library is this package's resource ``ratelimit.lua``, copied at build
time from the repository's one source (functions/ratelimit.lua), loaded with
``FUNCTION LOAD REPLACE`` when a primary has none or one older than it
(``rl_version``). Everything here is pure: the limiters do the I/O.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from datetime import datetime, timedelta, timezone
from importlib import resources
from typing import Any, Literal

Backend = Literal["module", "functions", "auto"]
BACKENDS: tuple[str, ...] = ("module", "functions", "auto")

LIBRARY_NAME = "ratelimit"
RESOURCE = "ratelimit.lua"

# Commands whose peek Redis may run on FCALL_RO (the library declares them no-writes).
_PEEKS = frozenset({"RL.PEEK", "RL.THROTTLEPEEK", "RL.QUOTAPEEK", "RL.LEASEPEEK", "RL.ALLPEEK"})
# Commands with two fixed keys; every other single-key command names one, RL.ALL/ALLPEEK numkeys.
_TWO_KEYS = frozenset({"RL.DAYHOUR", "RL.LOCKCOUNT"})
_OFFSET = re.compile(r"[+-]\d\d:\d\d")


def backend_arg(value: object) -> str:
    """``value`` as a backend name (case-insensitive), or ValueError naming the setting."""
    if isinstance(value, str) and value.strip().lower() in BACKENDS:
        return value.strip().lower()
    raise ValueError(f"invalid backend {value!r}: 'module', 'functions' or 'auto'")


@functools.cache
def library() -> str:
    """The library's Lua source, as this package carries it."""
    try:
        return resources.files(__package__).joinpath(RESOURCE).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"redis_rl/{RESOURCE} is missing from this installation: the package build copies it from the "
            "repository's functions/ratelimit.lua (make python-venv, or pip install ./clients/python)") from None


def library_path() -> str:
    """Where the installed package keeps the library (for loading it by hand)."""
    return str(resources.files(__package__).joinpath(RESOURCE))


def version_of(source: str) -> int:
    """The ``RL_VERSION`` a library source declares (what its ``rl_version`` answers)."""
    m = re.search(r"^local\s+(?:RL_)?VERSION\s*=\s*(\d+)", source, flags=re.M)
    if m is None:
        raise ValueError("the Functions library has no `local RL_VERSION = <number>` line")
    return int(m.group(1))


def load_command(where: str = "") -> str:
    """The command an operator runs once when the app's user may not run FUNCTION LOAD."""
    target = f"-h {where.rsplit(':', 1)[0]} -p {where.rsplit(':', 1)[1]} " if ":" in where else ""
    return f"redis-cli {target}-x FUNCTION LOAD REPLACE < {library_path()}"


def is_function_missing(text: str) -> bool:
    """An FCALL refused because the library is not loaded on that node."""
    return "function not found" in text.lower()


def is_module_missing(text: str) -> bool:
    """An RL command refused because the module is not loaded on that node."""
    lowered = text.lower()
    return lowered.startswith("err unknown command") and "rl." in lowered


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def fcall(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``RL.X key ... args`` as the library's ``FCALL``: the command's keys (as
    COMMAND GETKEYS reports them), then its other arguments in their order;
    zones passed as SPEC.md allows (see ``functions_zone``)."""
    name = _text(args[0]).upper()
    if not name.startswith("RL."):
        return args  # a plain Redis command (DEL, PTTL): the same on both engines
    if name in ("RL.ALL", "RL.ALLPEEK"):
        n = int(args[1])
        keys, rest = args[2:2 + n], list(args[2 + n:])
        refund = _all_clauses(rest)
    else:
        n = 2 if name in _TWO_KEYS else 1
        keys, rest = args[1:1 + n], list(args[1 + n:])
        if name in ("RL.QUOTA", "RL.QUOTAPEEK") and len(rest) > 1:
            rest[1] = functions_zone(_text(rest[1]))
        refund = name in ("RL.CHECK", "RL.THROTTLE", "RL.QUOTA") and "REFUND" in rest
    fn = "rl_" + name[3:].lower()
    if refund:
        return ("FCALL", "rl_refund", len(keys), *keys, fn[3:], *rest)  # rl_refund ... check|throttle|quota|all
    return ("FCALL_RO" if name in _PEEKS else "FCALL", fn, len(keys), *keys, *rest)


def _all_clauses(rest: list[Any]) -> bool:
    """Maps RL.ALL's QUOTA clauses' zones (``QUOTA i zone ...``) in place and
    says whether the call ends with ``REFUND``; the values after TOKEN and
    COST are skipped (a token may be spelled like a kind or an option)."""
    i, refund = 1, False  # rest[0] is now
    while i < len(rest):
        word = _text(rest[i]).upper()
        if word in ("TOKEN", "COST"):
            i += 2
            continue
        if word == "QUOTA" and i + 2 < len(rest):
            rest[i + 2] = functions_zone(_text(rest[i + 2]))
            i += 3
            continue
        refund = refund or word == "REFUND"
        i += 1
    return refund


@functools.lru_cache(maxsize=1024)  # zones come from requests: bounded
def functions_zone(zone: str) -> str:
    """A zone as the library takes it: ``UTC`` and ``+HH:MM`` as they are; an
    IANA zone that keeps one offset for the coming year (``Asia/Shanghai``) as
    that offset (``+08:00``). A zone with daylight saving (or any offset change
    ahead) is refused: the library has no time-zone database."""
    if zone == "UTC" or _OFFSET.fullmatch(zone):
        return zone
    try:
        tz = zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"invalid zone {zone!r}: expected an IANA time-zone name or a fixed offset '+HH:MM'") \
            from None
    start = datetime.now(timezone.utc)
    offsets = {(start + timedelta(days=d)).astimezone(tz).utcoffset() for d in range(0, 367)}
    if len(offsets) != 1:
        raise ValueError(
            f"zone {zone!r} has daylight saving (its UTC offset changes within a year): the Functions library "
            "(backend 'functions') takes only UTC and fixed offsets; use the module for this zone, or a fixed "
            "offset such as '+01:00'")
    offset = offsets.pop()
    assert offset is not None
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
