"""redis_rl: typed calls, one-call policies and scopes for the redis-ratelimit
module's RL commands, over redis-py (sync and asyncio, standalone and Cluster)."""

from .args import Duration, Now, Zone
from .client import AsyncRateLimiter, RateLimiter
from .commands import Bucket, Call, Clause, Period, Rule
from .decisions import AllDecision, DayHourDecision, Decision, LeaseDecision, LockDecision, RuleState
from .errors import ModuleNotLoadedError, RateLimitError

__all__ = [
    "AllDecision", "AsyncRateLimiter", "Bucket", "Call", "Clause", "DayHourDecision", "Decision", "Duration",
    "LeaseDecision", "LockDecision", "ModuleNotLoadedError", "Now", "Period", "RateLimitError", "RateLimiter",
    "Rule", "RuleState", "Zone",
]
