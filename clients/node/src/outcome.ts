/**
 * Counting one outcome (`new Policy(name, { counts: "failures" })`): the
 * call is charged up front like any other, and given back whole when its
 * permit closes with the outcome that does not count — one `RL.ALL ...
 * REFUND` of the admission's clauses (windows, buckets, quotas, the estimate
 * and the lease), the command CLIENTS.md §3 uses for a late reply. The same
 * rule in the Python and Java clients; the adapters' outcome: a throw or a
 * status of 400 or more is a failure (express-rate-limit's
 * `requestWasSuccessful`), unless the code said `permit.failed()`/`succeeded()`.
 */
import type { Held } from "./limiter";
import type { Policy } from "./policy";
import type { Call } from "./transport";

/** Whether an admission under `policy` with this outcome (null: a success) is given back. */
export function uncounted(policy: Policy, outcome: boolean | null): boolean {
  const counts = policy.options.counts;
  if (counts === null) return false;
  return (outcome !== false) === (counts === "failures");
}

/** The adapters' rule: a throw (`status` null) or a status of 400 or more is a failure. */
export function isFailure(status: number | null): boolean {
  return status === null || status >= 400;
}

/** `RL.ALL ... REFUND` of every clause `held` took (its decision's argv, REFUND for DETAILS). */
export function refundCall(policy: Policy, held: Held): Call {
  const c = policy.compile();
  const args = ["RL.ALL", String(c.groups.length), ...held.keys, "*"];
  c.groups.forEach((g, i) => {
    args.push(g.word, String(i + 1));
    if (g.kind === "quota") args.push(held.zones[i]!);
    args.push(...g.rules);
    if (g.kind === "lease") args.push("TOKEN", held.token!);
    if (held.costs[i] !== 1) args.push("COST", String(held.costs[i]));
  });
  args.push("REFUND");
  return { key: held.keys[0], readOnly: false, args };
}
