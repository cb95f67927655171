"""Key administration: what an operator reaches for to look at or unlock one
caller (rate-limiter-flexible's ``get``/``delete``/``penalty``/``reward``,
limits' ``get_window_stats``/``clear``), on the wire format of CLIENTS.md §2.

- ``state``: every limit's remaining and reset by peeks that write nothing
  (one ``RL.ALLPEEK`` with every ``COST 0`` and ``DETAILS``; a lockout:
  ``PTTL``/``GET`` of its two keys).
- ``reset``: one ``DEL`` of exactly the keys the policy writes for that key
  (a lockout's ``:lock`` and ``:count``); shared limits (one counter for
  every key) are left alone.
- ``penalty``/``reward``: ``n`` units charged (``DEBIT``) or given back
  (``REFUND``) on every window, bucket and quota of the key, within SPEC's
  DEBIT/REFUND rules (a refund never goes below empty); concurrency limits
  and shared limits are not touched; a lockout has neither.

The Java and Node clients send the same commands (``clients/README`` of each
package: "Key administration")."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import args as a
from .commands import Call, Clause, all_call
from .decisions import Decision, LockDecision
from .policy import Plan, Policy, PolicyDecision

_COMMAND = {"CHECK": "RL.CHECK", "THROTTLE": "RL.THROTTLE", "QUOTA": "RL.QUOTA"}


def _bare(spec: Sequence[Any]) -> list[Any]:
    """A clause's arguments without its COST (the plan's is the call's cost)."""
    spec = list(spec)
    return spec[:-2] if len(spec) >= 2 and spec[-2] == "COST" else spec


def _plan(policy: Policy, key: str, zone: Any, subkeys: Mapping[str, str] | None,
          overrides: Mapping[str, int] | None) -> Plan:
    return policy.plan(key, zone=zone, subkeys=subkeys, overrides=overrides, details=True)


def _is_lockout(policy: Policy) -> bool:
    return policy.groups[0].kind == "lockout"


def state_calls(plan: Plan) -> list[Call]:
    """The peeks that read ``plan``'s key now, writing nothing."""
    if _is_lockout(plan.policy):
        k = plan.keys[0]
        return [Call(k, ("PTTL", k + ":lock"), int), Call(k, ("GET", k + ":count"), lambda r: int(r or 0)),
                Call(k, ("PTTL", k + ":count"), int)]
    clauses = []
    for cl, key in zip(plan.clauses, plan.keys):
        spec = _bare(cl.spec)
        if cl.kind == "LEASE":  # limit ttl [TOKEN t]: COST 0 ignores the token (the state now)
            spec = spec[:2]
        clauses.append(Clause(cl.kind, key, (*spec, "COST", 0), cl.rules, 0))
    return [all_call(clauses, details=True, peek=True)]


def state_decision(plan: Plan, replies: Sequence[Any]) -> PolicyDecision:
    if _is_lockout(plan.policy):
        lock_ms, count, count_ms = replies
        if lock_ms == -1 or lock_ms > 0:  # locked (-1: a lock without expiry)
            return plan.decision(LockDecision.from_reply([1, count, lock_ms]))
        # Not locked: the window's count so far (the reply of an admission counts the call: +1 undone)
        return plan.decision(LockDecision.from_reply([0, count, max(count_ms, 0)]))
    return plan.decision(replies[0])


def reset_call(plan: Plan) -> Call:
    """``DEL`` of the key's own counters and leases (shared limits left alone)."""
    keys: list[str] = []
    for g, k in zip(plan.policy.groups, plan.keys):
        if g.limits[0].shared:
            continue
        keys += [k + ":lock", k + ":count"] if g.kind == "lockout" else [k]
    if not keys:
        raise a.invalid("limits", f"policy {plan.policy.name!r} has only shared limits: nothing is the key's own")
    return Call(keys[0], ("DEL", *keys), int)


def adjust_calls(plan: Plan, n: int, option: str) -> list[Call]:
    """``DEBIT`` (penalty) or ``REFUND`` (reward) of ``n`` on each window,
    bucket and quota of the key."""
    if _is_lockout(plan.policy):
        raise a.invalid("limits", "a lockout has no penalty or reward (RL.LOCKCOUNT has no DEBIT or REFUND): "
                        "reset the key to unlock it")
    calls = []
    for g, cl, key in zip(plan.policy.groups, plan.clauses, plan.keys):
        if g.kind == "lease" or g.limits[0].shared:
            continue
        units = a.integer(n, "cost", 1, a.MAX_COST if cl.kind == "CHECK" else a.MAX_INT)
        calls.append(Call(key, (_COMMAND[cl.kind], key, "*", *_bare(cl.spec), "COST", units, option),
                          Decision.from_reply))
    if not calls:
        raise a.invalid("limits", f"policy {plan.policy.name!r} has no window, bucket or quota of the key's own")
    return calls


class KeyAdmin:
    """``RateLimiter``'s key administration (sync)."""

    def _admin_plan(self, policy: Policy, key: str, zone: Any, subkeys: Any) -> Plan:
        rl = getattr(self, "runtime_limits", None)
        return _plan(policy, key, zone, subkeys, rl.for_policy(policy, None) if rl is not None else None)

    def _plain(self, call: Call) -> Any:
        """A plain Redis command (DEL, GET, PTTL): never translated to FCALL."""
        if self.cluster:  # type: ignore[attr-defined]
            return call.parse(self._on_node(call.args, call.key))  # type: ignore[attr-defined]
        return call.parse(self.redis.execute_command(*call.args))  # type: ignore[attr-defined]

    def state(self, policy: Policy, key: str, *, zone: Any = None,
              subkeys: Mapping[str, str] | None = None) -> PolicyDecision:
        """Every limit's state for ``key`` now (``decision.states``), writing nothing."""
        plan = self._admin_plan(policy, key, zone, subkeys)
        calls = state_calls(plan)
        if _is_lockout(policy):
            return state_decision(plan, [self._plain(x) for x in calls])
        return state_decision(plan, [self.run(calls[0])])  # type: ignore[attr-defined]

    def reset(self, policy: Policy, key: str, *, subkeys: Mapping[str, str] | None = None,
              zone: Any = None) -> int:
        """Deletes ``key``'s counters and leases under ``policy`` (an unlock); the number of keys deleted."""
        return self._plain(reset_call(self._admin_plan(policy, key, zone, subkeys)))

    def penalty(self, policy: Policy, key: str, n: int = 1, *, zone: Any = None,
                subkeys: Mapping[str, str] | None = None) -> PolicyDecision:
        """Charges ``n`` units whether or not they fit (DEBIT); the state after."""
        plan = self._admin_plan(policy, key, zone, subkeys)
        self.run_many(adjust_calls(plan, n, "DEBIT"))  # type: ignore[attr-defined]
        return self.state(policy, key, zone=zone, subkeys=subkeys)

    def reward(self, policy: Policy, key: str, n: int = 1, *, zone: Any = None,
               subkeys: Mapping[str, str] | None = None) -> PolicyDecision:
        """Gives ``n`` units back (REFUND; never below empty); the state after."""
        plan = self._admin_plan(policy, key, zone, subkeys)
        self.run_many(adjust_calls(plan, n, "REFUND"))  # type: ignore[attr-defined]
        return self.state(policy, key, zone=zone, subkeys=subkeys)


class AsyncKeyAdmin:
    """``AsyncRateLimiter``'s key administration: as ``KeyAdmin``, awaited."""

    async def _admin_plan(self, policy: Policy, key: str, zone: Any, subkeys: Any) -> Plan:
        rl = getattr(self, "runtime_limits", None)
        return _plan(policy, key, zone, subkeys, await rl.for_policy(policy, None) if rl is not None else None)

    async def _plain(self, call: Call) -> Any:
        if self.cluster:  # type: ignore[attr-defined]
            return call.parse(await self._on_node(call.args, call.key))  # type: ignore[attr-defined]
        return call.parse(await self.redis.execute_command(*call.args))  # type: ignore[attr-defined]

    async def state(self, policy: Policy, key: str, *, zone: Any = None,
                    subkeys: Mapping[str, str] | None = None) -> PolicyDecision:
        plan = await self._admin_plan(policy, key, zone, subkeys)
        calls = state_calls(plan)
        if _is_lockout(policy):
            return state_decision(plan, [await self._plain(x) for x in calls])
        return state_decision(plan, [await self.run(calls[0])])  # type: ignore[attr-defined]

    async def reset(self, policy: Policy, key: str, *, subkeys: Mapping[str, str] | None = None,
                    zone: Any = None) -> int:
        return await self._plain(reset_call(await self._admin_plan(policy, key, zone, subkeys)))

    async def penalty(self, policy: Policy, key: str, n: int = 1, *, zone: Any = None,
                      subkeys: Mapping[str, str] | None = None) -> PolicyDecision:
        plan = await self._admin_plan(policy, key, zone, subkeys)
        await self.run_many(adjust_calls(plan, n, "DEBIT"))  # type: ignore[attr-defined]
        return await self.state(policy, key, zone=zone, subkeys=subkeys)

    async def reward(self, policy: Policy, key: str, n: int = 1, *, zone: Any = None,
                     subkeys: Mapping[str, str] | None = None) -> PolicyDecision:
        plan = await self._admin_plan(policy, key, zone, subkeys)
        await self.run_many(adjust_calls(plan, n, "REFUND"))  # type: ignore[attr-defined]
        return await self.state(policy, key, zone=zone, subkeys=subkeys)
