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
            " --loadmodule /path/to/libredis_ratelimit.so or run MODULE LOAD, or give the limiter"
            ' backend="functions" (the Functions library: no module needed)'
        )


class LibraryNotLoadedError(ModuleNotLoadedError):
    """Backend ``functions``: the redis-ratelimit Functions library is not on
    the server (or older than this client) and this Redis user may not load
    it; the message names the command to run once by hand. A kind of
    ``ModuleNotLoadedError``: no engine to decide with."""

    def __init__(self, message: str) -> None:
        RateLimitError.__init__(self, message)


class RedisUnavailableError(RateLimitError):
    """The server answered, but cannot decide now: ``CLUSTERDOWN``,
    ``TRYAGAIN``, ``MASTERDOWN`` or ``LOADING``. Like a refused connection
    it is "Redis unavailable" (CLIENTS.md §3): a guard decides by the
    policy's Redis-down mode, never a 500."""


class LocalBackendFullError(RateLimitError):
    """The local backend refused a command that would grow it past its
    bound (nothing the command did is kept): the ``local`` Redis-down mode
    answers a refusal whose retry-after is ``retry_after_ms`` — until the
    earliest key expires (1 s when none expires). Java's
    ``LocalBackendFullException``, Node's ``LocalBackendFullError``."""

    def __init__(self, retry_after_ms: int, max_keys: int, max_entries: int) -> None:
        self.retry_after_ms = retry_after_ms
        super().__init__(f"the local backend is full ({max_keys} keys, {max_entries} entries): "
                         f"retry after {retry_after_ms} ms")


# The error codes that mean "unavailable now", not "your call is wrong".
UNAVAILABLE_CODES = ("CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "LOADING")
