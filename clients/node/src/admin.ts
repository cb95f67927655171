/**
 * Key administration: what an operator reaches for to look at or unlock one
 * caller (rate-limiter-flexible's `get`/`delete`/`penalty`/`reward`, limits'
 * `get_window_stats`/`clear`), on the wire format of CLIENTS.md §2, the same
 * commands as the Python and Java clients:
 *
 * - `state`: every limit's remaining and reset by peeks that write nothing
 *   (one `RL.ALLPEEK` with every `COST 0` and `DETAILS`; a lockout: `PTTL`/`GET`
 *   of its two keys);
 * - `reset`: one `DEL` of exactly the keys the policy writes for that key (a
 *   lockout's `:lock` and `:count`); shared limits (one counter for every key)
 *   are left alone;
 * - `penalty`/`reward`: `n` units charged (`DEBIT`) or given back (`REFUND`,
 *   never below empty) on every window, bucket and quota of the key;
 *   concurrency and shared limits are not touched; a lockout has neither.
 */
import * as a from "./args";
import type { RateLimitClient } from "./client";
import * as d from "./decisions";
import { finish, fromAll, heldFor, type DecideOptions, type Held, type LimitState, type PolicyDecision } from "./limiter";
import type { Policy } from "./policy";

/** Which key: its zone (a quota without one) and subkeys (a `subkey` limit). */
export type AdminOptions = Pick<DecideOptions, "zone" | "subkeys">;

const held = (policy: Policy, key: string, o: AdminOptions): Held => heldFor(policy, key, o, 1, 1, null);

/** Every limit's state for `key` now (`decision.limits`), writing nothing. */
export async function state(client: RateLimitClient, policy: Policy, key: string, o: AdminOptions = {}): Promise<PolicyDecision> {
  const c = policy.compile();
  const h = held(policy, key, o);
  if (c.lockout) {
    const l = c.lockout;
    const k = `${h.base}:${l.name}`;
    const [lockMs, count, countMs] = (await client.transport.batch([
      { key: k, readOnly: true, args: ["PTTL", `${k}:lock`] },
      { key: k, readOnly: true, args: ["GET", `${k}:count`] },
      { key: k, readOnly: true, args: ["PTTL", `${k}:count`] },
    ])).map((r) => {
      if (r instanceof Error) throw r;
      return Number(r ?? 0);
    });
    const locked = lockMs === -1 || lockMs > 0; // -1: a lock without expiry
    const st: LimitState = Object.freeze({
      name: l.name, kind: l.kind, limited: locked, limit: l.limit, window: l.window,
      remaining: locked ? 0 : Math.max(0, l.limit - count),
      retryAfter: locked ? (lockMs < 0 ? null : lockMs) : null,
      resetAfter: locked ? Math.max(lockMs, 0) : Math.max(countMs, 0),
    });
    return finish(policy, st, [st]);
  }
  const args = ["RL.ALLPEEK", String(c.groups.length), ...h.keys, "*"];
  c.groups.forEach((g, i) => {
    args.push(g.word, String(i + 1));
    if (g.kind === "quota") args.push(h.zones[i]!);
    args.push(...g.rules, "COST", "0"); // a LEASE clause without TOKEN, COST 0: the state now
  });
  args.push("DETAILS");
  return fromAll(policy, d.allDecision("RL.ALLPEEK", await client.send({ key: h.keys[0], readOnly: true, args }), true));
}

/** Deletes `key`'s counters and leases under `policy` (an unlock); the number of keys deleted. */
export async function reset(client: RateLimitClient, policy: Policy, key: string, o: AdminOptions = {}): Promise<number> {
  const c = policy.compile();
  const h = held(policy, key, o);
  const keys: string[] = [];
  c.groups.forEach((g, i) => {
    if (!g.global) keys.push(h.keys[i]);
  });
  if (c.lockout) keys.splice(0, keys.length, `${h.base}:${c.lockout.name}:lock`, `${h.base}:${c.lockout.name}:count`);
  if (keys.length === 0) throw a.invalid("limits", new RangeError(`policy '${policy.name}' has only shared limits: nothing is the key's own`));
  return Number(await client.transport.send({ key: keys[0], readOnly: false, args: ["DEL", ...keys] }));
}

/** `DEBIT` (penalty) or `REFUND` (reward) of `n` units on each window, bucket and quota of the key. */
export async function adjust(client: RateLimitClient, policy: Policy, key: string, n: number, option: "DEBIT" | "REFUND", o: AdminOptions = {}): Promise<void> {
  const c = policy.compile();
  if (c.lockout) throw a.invalid("limits", new RangeError("a lockout has no penalty or reward (RL.LOCKCOUNT has no DEBIT or REFUND): reset the key to unlock it"));
  const h = held(policy, key, o);
  const calls = c.groups.flatMap((g, i) => {
    if (g.kind === "lease" || g.global) return [];
    a.int("cost", n, 1, g.kind === "check" ? a.MAX_UNIT_COST : a.MAX);
    const args = [g.command, h.keys[i], "*"];
    if (g.kind === "quota") args.push(h.zones[i]!);
    args.push(...g.rules, "COST", String(n), option);
    return [{ key: h.keys[i], readOnly: false, args }];
  });
  if (calls.length === 0) throw a.invalid("limits", new RangeError(`policy '${policy.name}' has no window, bucket or quota of the key's own`));
  const failed = (await client.batch(calls)).find((r) => r instanceof Error);
  if (failed) throw failed;
}
