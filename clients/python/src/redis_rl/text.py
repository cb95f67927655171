"""Limits as text, as slowapi and ``limits`` write them: ``"5/minute;100/hour"``.

Each item is a sliding window (RL.CHECK), named for what it says so the
RateLimit headers read like the text: ``5/minute`` → ``5-per-1m``,
``10 per 5 minutes`` → ``10-per-5m``. The grammar, the names and the refusals
are the same in the Java and Node clients (golden cases in
``clients/conformance/cases/limits-text.json``)."""

from __future__ import annotations

import re

from . import args as a
from .policy import Limit, sliding_window

# <count> ("/" | "per") [<amount>] <unit>; case and spaces do not matter.
# Spaces are ASCII space and tab only, so the three clients' regex engines agree.
_ITEM = re.compile(r"([0-9]+)[ \t]*(?:/|per)[ \t]*([0-9]+)?[ \t]*(second|minute|hour|day)s?", re.IGNORECASE | re.ASCII)
_SEPARATORS = re.compile(r"[;,|]")
_UNIT_MS = {"second": 1_000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def parse_limits(text: str) -> list[Limit]:
    """The sliding windows ``text`` names (``;``, ``,`` or ``|`` between
    items). Refused with ``error.field``: ``limits`` (not a string, empty,
    an item that does not parse, a unit other than second/minute/hour/day),
    ``count`` (0 or above 2^53-1), ``window`` (0 or above 2^53-1 ms),
    ``limit_name`` (two items of one count and period)."""
    if not isinstance(text, str):
        raise a.invalid("limits", f"limits text must be a str, not {type(text).__name__}", TypeError)
    out = []
    for item in _SEPARATORS.split(text):
        m = _ITEM.fullmatch(item.strip(" \t"))
        if m is None:
            raise a.invalid("limits", f"invalid limit {item.strip(' ')!r} in {text!r}: expected e.g. '5/minute', "
                            "'100 per hour' or '10 per 5 minutes' (second, minute, hour, day)")
        count, amount, unit = int(m[1]), int(m[2] or 1), m[3].lower()
        out.append(sliding_window(f"{count}-per-{amount}{unit[0]}", a.integer(count, "count", 1),
                                  a.integer(amount * _UNIT_MS[unit], "window", 1)))
    names = [lim.name for lim in out]
    if len(set(names)) != len(names):
        raise a.invalid("limit_name", f"two items of one count and period in {text!r}")
    return out
