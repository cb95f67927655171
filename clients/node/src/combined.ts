/**
 * Several policies on one request decided together: every bound policy's
 * clauses (`policy.bind(key, options)`) in ONE RL.ALL with DETAILS —
 * admitted only if every limit admits, nothing written otherwise — so a
 * refusal by the second policy charges nothing on the first, and the
 * decision carries every limit's state (the headers list them all).
 *
 * Under Cluster one RL.ALL must stay in one slot, and policies keyed
 * differently (one by IP, one by phone) hash to different slots: the
 * clauses are then grouped by slot, one RL.ALL per slot sent together, and
 * when one refuses (or fails) the slots that admitted are given back with
 * `RL.ALL ... REFUND` (their charges refunded, their leases released) — the
 * Spring starter's and the Python package's behaviour. Bindings whose keys
 * share a slot, and any standalone server, are one call.
 */
import calculateSlot from "cluster-key-slot";
import * as a from "./args";
import type * as d from "./decisions";
import type { DecideOptions, Held, LimitState, PolicyDecision } from "./limiter";
import type { Group, Limit, Policy } from "./policy";
import type { Call } from "./transport";

/** A policy bound to the key (and cost, estimate, zone, subkeys) it decides one request by. */
export interface PolicyCall {
  readonly policy: Policy;
  readonly key: string;
  readonly options: DecideOptions;
}

/** One bound policy of a combined decision: what it holds once admitted. */
export interface Part {
  readonly policy: Policy;
  readonly held: Held;
  readonly estimate: number;
}

/** One RL.ALL clause of a combined call, with what it decides. */
export interface Clause {
  readonly key: string;
  /** The clause after its key index: word first. */
  readonly words: readonly string[];
  readonly cost: number;
  readonly group: Group;
  readonly part: number;
  /** Each of the group's limits as the headers name it (`<policy>.<limit>` when an earlier part used the name). */
  readonly names: readonly string[];
}

/** The clauses of every part in binding order, with names made unique across parts. */
export function clausesOf(parts: readonly Part[]): Clause[] {
  const seen = new Set<string>();
  const out: Clause[] = [];
  parts.forEach((p, pi) => {
    const named = new Map<Limit, string>();
    for (const l of p.policy.limits) {
      const name = seen.has(l.name) ? `${p.policy.name}.${l.name}` : l.name;
      if (seen.has(name)) throw a.invalid("limit_name", new RangeError(`two bound policies named '${p.policy.name}' share limit '${l.name}'`));
      seen.add(name);
      named.set(l, name);
    }
    p.policy.compile().groups.forEach((g, i) => {
      const h = p.held;
      const words = [g.word];
      // the key index goes after the word; added when the call is built
      const rest: string[] = [];
      if (g.kind === "quota") rest.push(h.zones[i]!);
      for (const r of g.rules) rest.push(r);
      if (g.kind === "lease") rest.push("TOKEN", h.token!);
      if (h.costs[i] !== 1) rest.push("COST", String(h.costs[i]));
      out.push({ key: h.keys[i], words: [...words, ...rest], cost: h.costs[i], group: g, part: pi, names: g.limits.map((l) => named.get(l)!) });
    });
  });
  return out;
}

/** RL.ALL over some of the clauses (indices into `clauses`). */
export function allCall(clauses: readonly Clause[], idx: readonly number[], refund: boolean, details: boolean): Call {
  const args = ["RL.ALL", String(idx.length)];
  for (const i of idx) args.push(clauses[i].key);
  args.push("*");
  idx.forEach((i, j) => {
    const [word, ...rest] = clauses[i].words;
    args.push(word, String(j + 1), ...rest);
  });
  if (refund) args.push("REFUND");
  if (details) args.push("DETAILS");
  return { key: clauses[idx[0]].key, readOnly: false, args };
}

/** Clause indices grouped by Cluster slot, in order of first appearance. */
export function slotGroups(clauses: readonly Clause[]): number[][] {
  const bySlot = new Map<number, number[]>();
  clauses.forEach((c, i) => {
    const slot = calculateSlot(c.key);
    const g = bySlot.get(slot);
    if (g) g.push(i);
    else bySlot.set(slot, [i]);
  });
  return [...bySlot.values()];
}

/**
 * The slots' replies as one RL.ALL reply: the binding clause chosen across
 * slots as RL.ALL chooses it (SPEC), details in clause order (a refunded
 * slot's from its admission: what it would leave, as one RL.ALL reports it).
 */
export function merge(clauses: readonly Clause[], groups: readonly number[][], replies: readonly d.AllDecision[], after: readonly (d.AllDecision | null)[]): d.AllDecision {
  const refused = replies.some((r) => r.limited);
  const details: (readonly d.RuleState[] | undefined)[] = new Array(clauses.length);
  let best = -1;
  replies.forEach((r, j) => {
    // Each rule as the same call on one server reports it (CLIENTS.md §5: the
    // same items standalone and Cluster): an admitting slot's admission reply
    // (what it would leave), not the state after its refund.
    const shown = r;
    shown.details?.forEach((rules, k) => (details[groups[j][k]] = rules));
    if ((!refused || r.limited) && (best < 0 || binds(r, groups[j], replies[best], groups[best], clauses))) best = j;
  });
  const r = replies[best];
  return Object.freeze({
    ...r,
    clause: groups[best][r.clause - 1] + 1,
    details: details.every((x) => x !== undefined) ? (details as ReadonlyArray<ReadonlyArray<d.RuleState>>) : null,
  });
}

// RL.ALL's choice: a refusal waiting cannot help first, else the longest
// retry-after; among admissions the fewest calls of this shape left, then
// the latest reset; ties to the earlier clause.
function binds(x: d.AllDecision, gx: readonly number[], y: d.AllDecision, gy: readonly number[], clauses: readonly Clause[]): boolean {
  const ix = gx[x.clause - 1];
  const iy = gy[y.clause - 1];
  if (x.limited !== y.limited) return x.limited;
  if (x.limited) {
    if ((x.retryAfter === null) !== (y.retryAfter === null)) return x.retryAfter === null;
    if (x.retryAfter !== null && y.retryAfter !== null && x.retryAfter !== y.retryAfter) return x.retryAfter > y.retryAfter;
    return ix < iy;
  }
  const lx = Math.floor(x.remaining / Math.max(1, clauses[ix].cost));
  const ly = Math.floor(y.remaining / Math.max(1, clauses[iy].cost));
  if (lx !== ly) return lx < ly;
  if (x.resetAfter !== y.resetAfter) return x.resetAfter > y.resetAfter;
  return ix < iy;
}

/** The combined decision: every limit's state in binding order, the binding one as the (merged) reply names it. */
export function decisionOf(parts: readonly Part[], clauses: readonly Clause[], all: d.AllDecision, stateOf: (l: Limit, r: d.Decision, name: string) => LimitState): PolicyDecision {
  const bc = clauses[all.clause - 1];
  const bl = bc?.group.limits[all.rule - 1];
  if (!bc || !bl) throw new RangeError(`RL.ALL named clause ${all.clause} rule ${all.rule}`);
  const binding = stateOf(bl, all, bc.names[all.rule - 1]);
  const limits: LimitState[] = [];
  const own: Limit[] = []; // each state's limit
  if (all.details) {
    // In binding order and, within a policy, the policy's order of limits.
    parts.forEach((p, pi) => {
      const mine = clauses.map((c, ci) => ({ c, ci })).filter(({ c }) => c.part === pi);
      for (const l of p.policy.limits) {
        for (const { c, ci } of mine) {
          const ri = c.group.limits.indexOf(l);
          const rule = all.details![ci]?.[ri];
          if (ri >= 0 && rule) {
            limits.push(ci === all.clause - 1 && ri === all.rule - 1 ? binding : stateOf(l, rule, c.names[ri]));
            own.push(l);
          }
        }
      }
    });
  } else {
    limits.push(binding);
    own.push(bl);
  }
  const policy = parts[bc.part].policy;
  const limited = binding.limited;
  // The first refusing limit with its own problem type (e.g. "duplicate"), as for one policy.
  const special = limited ? own.find((l, k) => l.options.problem && limits[k].limited) : undefined;
  const problem = special?.options.problem ?? "rate-limited";
  const retryAfter = !limited ? null : binding.kind === "concurrency" ? policy.options.inFlightRetryAfter * 1000 : binding.retryAfter;
  return Object.freeze({
    policy: policy.name,
    policies: Object.freeze(parts.map((p) => p.policy.name)),
    limited,
    binding,
    limits: Object.freeze(limits),
    retryAfter,
    waitingCannotHelp: limited && retryAfter === null,
    problem,
  });
}
