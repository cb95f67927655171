"""redis_rl: typed calls, one-call policies and scopes for the redis-ratelimit
module's RL commands, over redis-py (sync and asyncio, standalone and Cluster)."""

from .args import Duration, Now, Zone
from .client import AsyncRateLimiter, RateLimiter
from .combined import PolicyCall
from .commands import Bucket, Call, Clause, Period, Rule
from .decisions import AllDecision, DayHourDecision, Decision, LeaseDecision, LockDecision, RuleState
from .errors import LibraryNotLoadedError, LocalBackendFullError, ModuleNotLoadedError, RateLimitError, RedisUnavailableError
from .policy import (FAIL_CLOSED, FAIL_LOCAL, FAIL_OPEN, FailMode, Limit, Policy, PolicyDecision, concurrency, lockout, quota,
                     sliding_window, token_bucket)
from .text import parse_limits
from .scope import AsyncPermit, Permit, RateLimitExceeded

__all__ = [
    "FAIL_CLOSED", "FAIL_LOCAL", "FAIL_OPEN", "LocalBackendFullError", "FailMode", "Limit", "Policy", "PolicyDecision", "concurrency", "lockout", "quota",
    "sliding_window", "token_bucket", "PolicyCall", "AsyncPermit", "Permit", "RateLimitExceeded",
    "AllDecision", "AsyncRateLimiter", "Bucket", "Call", "Clause", "DayHourDecision", "Decision", "Duration",
    "LeaseDecision", "LibraryNotLoadedError", "LockDecision", "ModuleNotLoadedError", "Now", "Period", "RateLimitError", "RateLimiter", "RedisUnavailableError",
    "Rule", "RuleState", "Zone", "parse_limits",
]
