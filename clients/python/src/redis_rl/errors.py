"""The package's exceptions: server errors keep the server's text unchanged."""

from __future__ import annotations


class RateLimitError(Exception):
    """An error reply of an RL command, carrying the server's text unchanged
    (e.g. ``ERR invalid zone 'Mars/Base' ...`` or ``WRONGTYPE ...``)."""


class ModuleNotLoadedError(RateLimitError):
    """The server has no RL commands: the module is not loaded there."""

    def __init__(self, where: str = "") -> None:
        super().__init__(
            "the redis-ratelimit module is not loaded on the Redis server"
            + (f" {where}" if where else "")
            + " (COMMAND INFO RL.ALL answered nothing): start redis-server with"
            " --loadmodule /path/to/libredis_ratelimit.so or run MODULE LOAD"
        )
