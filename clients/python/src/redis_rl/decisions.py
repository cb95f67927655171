"""Frozen decision objects, each read from one raw reply (SPEC replies)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Sequence

from .errors import RateLimitError


def _ms(value: int) -> timedelta:
    return timedelta(milliseconds=value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RateLimitError(f"unexpected reply element {value!r}: expected an integer")
    return value


@dataclass(frozen=True, slots=True)
class RuleState:
    """One rule's state: RL.CHECK's six reply fields.

    ``retry_after`` is None when the reply says -1: always for an admission,
    and for a refusal that waiting cannot help (``waiting_cannot_help``)."""

    limited: bool
    rule: int
    limit: int
    remaining: int
    retry_after: timedelta | None
    reset_after: timedelta

    @property
    def allowed(self) -> bool:
        return not self.limited

    @property
    def waiting_cannot_help(self) -> bool:
        """Refused, and no wait makes this request fit (a quota cost above its limit)."""
        return self.limited and self.retry_after is None

    @property
    def retry_after_ms(self) -> int:
        """The raw field: ms, or -1."""
        return -1 if self.retry_after is None else self.retry_after // timedelta(milliseconds=1)

    @property
    def reset_after_ms(self) -> int:
        return self.reset_after // timedelta(milliseconds=1)

    @classmethod
    def _fields(cls, reply: Sequence[Any]) -> dict[str, Any]:
        limited, rule, limit, remaining, retry, reset = reply[:6]
        if not (type(limited) is type(rule) is type(limit) is type(remaining) is type(retry) is type(reset)
                is int):
            for v in reply[:6]:
                _int(v)
        return dict(limited=limited == 1, rule=rule, limit=limit, remaining=remaining,
                    retry_after=None if retry < 0 else _ms(retry), reset_after=_ms(reset))

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "RuleState":
        if not isinstance(reply, (list, tuple)) or len(reply) != 6:
            raise RateLimitError(f"unexpected reply {reply!r}: expected six integers")
        return cls(**cls._fields(reply))


@dataclass(frozen=True, slots=True)
class Decision(RuleState):
    """The reply of RL.CHECK, RL.PEEK, RL.THROTTLE(PEEK), RL.QUOTA(PEEK), RL.LEASEPEEK."""

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "Decision":
        if not isinstance(reply, (list, tuple)) or len(reply) != 6:
            raise RateLimitError(f"unexpected reply {reply!r}: expected six integers")
        return cls(**cls._fields(reply))


@dataclass(frozen=True, slots=True)
class LeaseDecision(Decision):
    """RL.LEASE's reply: the six fields and the lease's token (None when refused)."""

    token: str | None = None

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "LeaseDecision":
        if not isinstance(reply, (list, tuple)) or len(reply) != 7:
            raise RateLimitError(f"unexpected reply {reply!r}: expected six integers and a token")
        token = reply[6]
        if isinstance(token, bytes):
            token = token.decode()
        return cls(**cls._fields(reply), token=token)


@dataclass(frozen=True, slots=True)
class AllDecision(Decision):
    """RL.ALL / RL.ALLPEEK: the binding clause (1-based) and its binding rule's
    fields; with DETAILS, ``details[c][r]`` is clause c+1's rule r+1 state."""

    clause: int = 0
    details: tuple[tuple[RuleState, ...], ...] | None = None

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "AllDecision":
        if not isinstance(reply, (list, tuple)) or len(reply) not in range(7, 7 + 65):
            raise RateLimitError(f"unexpected RL.ALL reply {reply!r}")
        limited, clause, rule, limit, remaining, retry, reset = reply[:7]
        if not (type(limited) is type(clause) is type(rule) is type(limit) is type(remaining) is type(retry)
                is type(reset) is int):
            for v in reply[:7]:
                _int(v)
        details = None
        if len(reply) > 7:
            details = tuple(tuple(RuleState.from_reply(rule) for rule in clause_states)
                            for clause_states in reply[7:])
        return cls(limited == 1, rule, limit, remaining, None if retry < 0 else _ms(retry), _ms(reset),
                   clause, details)


@dataclass(frozen=True, slots=True)
class DayHourDecision:
    """RL.DAYHOUR: the day and hour counts as the reply gives them (a count
    above its limit marks the counter that refused)."""

    limited: bool
    day: int
    hour: int
    day_limited: bool
    hour_limited: bool

    @classmethod
    def from_reply(cls, reply: Sequence[Any], day_limit: int, hour_limit: int) -> "DayHourDecision":
        if not isinstance(reply, (list, tuple)) or len(reply) != 2:
            raise RateLimitError(f"unexpected RL.DAYHOUR reply {reply!r}")
        day, hour = _int(reply[0]), _int(reply[1])
        day_limited, hour_limited = day > day_limit, hour > hour_limit
        return cls(day_limited or hour_limited, day, hour, day_limited, hour_limited)


@dataclass(frozen=True, slots=True)
class LockDecision:
    """RL.LOCKCOUNT: admitted, the window's count and the ms until it ends;
    refused, the count before the call and the ms until the lock lifts
    (``ttl`` None for a lock key without expiry)."""

    limited: bool
    count: int
    ttl: timedelta | None

    @property
    def allowed(self) -> bool:
        return not self.limited

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "LockDecision":
        if not isinstance(reply, (list, tuple)) or len(reply) != 3:
            raise RateLimitError(f"unexpected RL.LOCKCOUNT reply {reply!r}")
        limited, count, ttl = (_int(v) for v in reply)
        return cls(limited == 1, count, None if ttl < 0 else _ms(ttl))
