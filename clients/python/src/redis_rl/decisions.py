"""Frozen decision objects, each read from one raw reply (SPEC replies)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Sequence

from .errors import RateLimitError


def _ms(value: int) -> timedelta:
    # Positional (days, seconds, microseconds, milliseconds): a third of the
    # keyword form's cost, and two of these are made per decision.
    return timedelta(0, 0, 0, value)


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
    def from_reply(cls, reply: Sequence[Any]) -> "RuleState":
        return cls(*_six(reply, 6))


def _six(reply: Sequence[Any], size: int) -> tuple[bool, int, int, int, timedelta | None, timedelta]:
    """RL.CHECK's six fields, positional (the hot path: a DETAILS reply has
    one of these per rule)."""
    if not isinstance(reply, (list, tuple)) or len(reply) != size:
        raise RateLimitError(f"unexpected reply {reply!r}: expected {size} elements")
    limited, rule, limit, remaining, retry, reset = reply[:6]
    if not (type(limited) is type(rule) is type(limit) is type(remaining) is type(retry) is type(reset) is int):
        for v in reply[:6]:
            _int(v)
    return limited == 1, rule, limit, remaining, None if retry < 0 else _ms(retry), _ms(reset)


@dataclass(frozen=True, slots=True)
class Decision(RuleState):
    """The reply of RL.CHECK, RL.PEEK, RL.THROTTLE(PEEK), RL.QUOTA(PEEK), RL.LEASEPEEK."""

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "Decision":
        return cls(*_six(reply, 6))


@dataclass(frozen=True, slots=True)
class LeaseDecision(Decision):
    """RL.LEASE's reply: the six fields and the lease's token (None when refused)."""

    token: str | None = None

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "LeaseDecision":
        fields = _six(reply, 7)
        token = reply[6]
        if isinstance(token, bytes):
            token = token.decode()
        return cls(*fields, token)


@dataclass(frozen=True, slots=True)
class AllDecision(Decision):
    """RL.ALL / RL.ALLPEEK: the binding clause (1-based) and its binding rule's
    fields; with DETAILS, ``details[c][r]`` is clause c+1's rule r+1 state."""

    clause: int = 0
    # DETAILS as received; parsed into RuleStates on first access of
    # ``details``, so a decision read only for allowed/retry_after does not pay
    # for one object per rule. Equality compares the seven integers.
    raw_details: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    _parsed: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def details(self) -> tuple[tuple[RuleState, ...], ...] | None:
        """With DETAILS: ``details[c][r]`` is clause c+1's rule r+1 state."""
        if self.raw_details is None:
            return None
        if not self._parsed:
            self._parsed.append(tuple(tuple(RuleState.from_reply(rule) for rule in clause_states)
                                      for clause_states in self.raw_details))
        return self._parsed[0]

    @classmethod
    def from_reply(cls, reply: Sequence[Any]) -> "AllDecision":
        if not isinstance(reply, (list, tuple)) or not 7 <= len(reply) <= 7 + 64:
            raise RateLimitError(f"unexpected RL.ALL reply {reply!r}")
        limited, clause, rule, limit, remaining, retry, reset = reply[:7]
        if not (type(limited) is type(clause) is type(rule) is type(limit) is type(remaining) is type(retry)
                is type(reset) is int):
            for v in reply[:7]:
                _int(v)
        details = None
        if len(reply) > 7:
            details = tuple(reply[7:])
            for clause_states in details:
                if not isinstance(clause_states, (list, tuple)):
                    raise RateLimitError(f"unexpected DETAILS element {clause_states!r}: expected an array")
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
