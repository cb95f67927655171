"""Argument checks done before any Redis call, with the module's meaning.

Each refuses what the module would refuse (SPEC "Conventions"), so a bad
argument raises ``ValueError`` (``TypeError`` for a wrong type) here instead
of costing a round trip and an ``ERR`` reply.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Union

MAX_INT = 2**53 - 1  # every integer the module takes is at most this
MAX_COST = 10_000  # RL.CHECK / RL.LEASE cost cap (one member per unit)
MAX_RULES = 64  # rules per call (RL.ALL: over all clauses)
QUOTA_MAX_NOW = 253_402_300_799_999  # the end of year 9999 UTC

Duration = Union[timedelta, int]  # a timedelta, or whole milliseconds
Now = Union[None, int, datetime]  # None: the server's clock ("*")
Zone = Union[zoneinfo.ZoneInfo, timezone, str]

# Files of a zoneinfo directory (Debian's) that ZoneInfo opens but that are no
# IANA zone names: the module refuses them.
_NOT_ZONES = ("localtime", "posixrules")
_NOT_ZONE_DIRS = ("posix/", "right/")

_TOKEN = re.compile(r"[\x21-\x22\x24-\x7e]{1,64}")  # printable ASCII, no space, no '#'
_OFFSET = re.compile(r"[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]")


def invalid(field: str, message: str, cls: type[Exception] = ValueError) -> Exception:
    """An argument error naming its ``field`` (``error.field``): the name the
    three clients share for it (clients/conformance/README.md), so tests
    compare the field, not the wording."""
    e = cls(message)
    e.field = field  # type: ignore[attr-defined]
    return e


def field_of(what: str) -> str:
    """``"window (ms)"``, ``"count of rule 2"`` → ``"window"``, ``"count"``."""
    return what.split(" ", 1)[0]


def integer(value: object, what: str, low: int, high: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field_of(what), f"{what} must be an int, not {type(value).__name__}", TypeError)
    if not low <= value <= high:
        raise invalid(field_of(what), f"invalid {what} {value}: expected an integer from {low} to {high}")
    return value


def millis(value: Duration, what: str, low: int = 1) -> int:
    """A duration in whole ms (timedelta or int ms), in [low, 2^53-1]."""
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1000:
            raise invalid(field_of(what), f"invalid {what} {value}: the module counts whole milliseconds")
        return integer(micros // 1000, f"{what} (ms)", low)
    return integer(value, f"{what} (ms)", low)


def now_arg(now: Now, high: int = MAX_INT) -> str | int:
    """``*`` (the server's clock, the recommended form) or Unix ms."""
    if now is None:
        return "*"
    if isinstance(now, datetime):
        if now.tzinfo is None:
            raise ValueError("now: a naive datetime has no instant; give it a tzinfo")
        delta = now - datetime(1970, 1, 1, tzinfo=timezone.utc)
        now = millis(delta, "now", 0)
    return integer(now, "now (Unix ms)", 0, high)


def zone_arg(zone: Zone) -> str:
    """An IANA zone name (checked against the local tz database) or a fixed
    ``+HH:MM`` offset, as RL.QUOTA spells zones."""
    if isinstance(zone, zoneinfo.ZoneInfo):
        return zone.key
    if isinstance(zone, timezone):
        offset = zone.utcoffset(None)
        minutes = int(offset.total_seconds()) // 60
        if offset.total_seconds() % 60:
            raise invalid("zone", f"invalid zone {zone}: RL.QUOTA offsets are whole minutes")
        sign = "-" if minutes < 0 else "+"
        return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    if isinstance(zone, tzinfo) or not isinstance(zone, str):
        raise invalid("zone", f"zone must be a ZoneInfo, a timezone or an IANA name, not {type(zone).__name__}",
                      TypeError)
    if _OFFSET.fullmatch(zone):
        return "+00:00" if zone == "-00:00" else zone
    try:
        if zone in _NOT_ZONES or zone.startswith(_NOT_ZONE_DIRS):
            raise ValueError(zone)
        return zoneinfo.ZoneInfo(zone).key
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise invalid("zone", f"invalid zone {zone!r}: expected an IANA time-zone name such as "
                              "'Asia/Shanghai', or a fixed offset '+HH:MM'") from None


def token_arg(token: object, what: str = "token") -> str:
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise invalid(what, f"invalid {what} {token!r}: 1 to 64 printable ASCII characters, "
                            "no space and no '#'")
    return token


def key_arg(key: object, what: str = "key") -> str | bytes:
    if isinstance(key, (str, bytes)) and len(key) > 0:
        return key
    raise invalid(what, f"invalid {what} {key!r}: a non-empty str or bytes")


def rule_count(n: int) -> None:
    if n < 1:
        raise invalid("limits", "at least one rule is needed")
    if n > MAX_RULES:
        raise invalid("limits", f"too many rules ({n}): at most {MAX_RULES} per call")
