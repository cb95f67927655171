"""Decision hooks: how a service sees its decisions without wrapping every
call. Give a limiter ``hooks=[...]`` (``RateLimiter(client, hooks=[h])``);
the guard every adapter decides through tells each hook, on the calling
thread or task (keep it cheap), of

- every decision (``DecisionEvent``): ``admitted``, ``refused`` (with the
  binding limit's name), or ``unavailable`` (Redis could not decide: the
  policy's Redis-down ``mode``, ``fail_open``, ``fail_closed`` or ``local``
  — decided on this process's local backend — answered),
  and how long it took (the Redis round trip included, seconds);
- every late give-back (``LateGiveBack``): an admission whose reply landed
  after its budget, whose lease and estimate were given back at once.

Only names are passed — the policy's (``a+b`` for several bound in one
call) and its limits' — never the caller's key, so a metric labelled by
them cannot grow a series per caller. ``redis_rl.metrics`` has hooks for
OpenTelemetry and Prometheus. A hook that raises is logged, never fails
the request."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Sequence

if TYPE_CHECKING:
    from .policy import Policy, PolicyDecision

log = logging.getLogger("redis_rl")

Outcome = Literal["admitted", "refused", "unavailable"]
Mode = Literal["fail_open", "fail_closed", "local"]


@dataclass(frozen=True)
class DecisionEvent:
    policy: str
    outcome: Outcome
    #: The binding limit of a refusal (None otherwise).
    limit: str | None
    #: The Redis-down answer of an ``unavailable`` decision (None otherwise).
    mode: Mode | None
    seconds: float


@dataclass(frozen=True)
class LateGiveBack:
    policy: str


class DecisionHooks:
    """Subclass and override what you need; both methods do nothing here."""

    def decided(self, event: DecisionEvent) -> None:
        pass

    def gave_back_late(self, event: LateGiveBack) -> None:
        pass


def check_hooks(hooks: Sequence[DecisionHooks]) -> tuple[DecisionHooks, ...]:
    """Refused at construction, not at the first decision."""
    hooks = tuple(hooks)
    for h in hooks:
        if not callable(getattr(h, "decided", None)) or not callable(getattr(h, "gave_back_late", None)):
            raise TypeError(f"a hook needs decided(event) and gave_back_late(event) (see DecisionHooks): {h!r}")
    return hooks


def _each(hooks: Sequence[DecisionHooks], method: str, event: object) -> None:
    for h in hooks:
        try:
            getattr(h, method)(event)
        except Exception:  # a metrics backend's failure is not the request's
            log.exception("redis_rl: decision hook %r failed", h)


def decided(hooks: Sequence[DecisionHooks], policies: "Sequence[Policy]", decision: "PolicyDecision | None",
            seconds: float) -> None:
    """Tells the hooks of one guarded decision of ``policies`` (several: bound
    in one call); ``decision`` None: Redis could not decide."""
    if not hooks:
        return
    if decision is None:
        # as CombinedPolicy fails: closed if any is, else local if any is
        mode: Mode = ("fail_closed" if any(p.fail == "closed" for p in policies)
                      else "local" if any(p.fail == "local" for p in policies) else "fail_open")
        event = DecisionEvent("+".join(p.name for p in policies), "unavailable", None, mode, seconds)
    elif decision.limited:
        event = DecisionEvent(decision.policy.name, "refused", decision.binding, None, seconds)
    else:
        event = DecisionEvent(decision.policy.name, "admitted", None, None, seconds)
    _each(hooks, "decided", event)


def gave_back_late(hooks: Sequence[DecisionHooks], policy: str) -> None:
    if hooks:
        _each(hooks, "gave_back_late", LateGiveBack(policy))
