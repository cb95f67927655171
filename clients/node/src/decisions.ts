/**
 * Decisions: frozen objects built from the module's integer replies, with
 * the same fields in the Java, Python and Node packages (clients/DESIGN.md).
 * Times are milliseconds; `retryAfter` is `null` when the reply says -1.
 */

/** The six integers of RL.CHECK, RL.PEEK, RL.THROTTLE, RL.QUOTA, RL.LEASE and their peeks. */
export interface Decision {
  /** The call was refused. */
  readonly limited: boolean;
  /** 1-based index of the binding rule. */
  readonly rule: number;
  /** The binding rule's limit (`count`, `burst`, a period's limit, a lease limit). */
  readonly limit: number;
  /** Units left on the binding rule after this call (never below 0). */
  readonly remaining: number;
  /**
   * Refused: ms until a call of this cost would pass; an admitted
   * reservation: its delay. `null` when the reply says -1 (admitted, or
   * refused where waiting cannot help).
   */
  readonly retryAfter: number | null;
  /** ms until the binding rule is back to empty/full. */
  readonly resetAfter: number;
  /** Refused and no wait helps (a cost above a limit, a limit of 0): send no `Retry-After`. */
  readonly waitingCannotHelp: boolean;
}

/** RL.LEASE's reply: a decision and the lease's token (null when refused). */
export interface LeaseDecision extends Decision {
  readonly token: string | null;
}

/** One rule's state in RL.ALL's `DETAILS` (the fields of `Decision`). */
export type RuleState = Decision;

/** RL.ALL / RL.ALLPEEK: the binding clause's decision, the clause, and with DETAILS every rule's state. */
export interface AllDecision extends Decision {
  /** 1-based index of the binding clause. */
  readonly clause: number;
  /** With `details: true`: per clause, per rule, its state; otherwise null. */
  readonly details: ReadonlyArray<ReadonlyArray<RuleState>> | null;
}

/** RL.DAYHOUR: the counters as the reply gives them. */
export interface DayHourDecision {
  readonly limited: boolean;
  /** Day counter (one more than the limit when the day refused). */
  readonly day: number;
  /** Hour counter (one more than the limit when the hour refused). */
  readonly hour: number;
  readonly dayLimited: boolean;
  readonly hourLimited: boolean;
}

/** RL.LOCKCOUNT: `[limited, count, ttl]`. */
export interface LockCountDecision {
  readonly limited: boolean;
  /** Admitted: the count with this call; refused: the count before (0 while locked). */
  readonly count: number;
  /** Admitted: ms until the count's window ends; refused: ms until the lock lifts; null for a lock without expiry. */
  readonly ttl: number | null;
}

export class ReplyShapeError extends Error {
  constructor(what: string, reply: unknown) {
    super(`unexpected reply to ${what}: ${JSON.stringify(reply)}`);
    this.name = "ReplyShapeError";
  }
}

function integer(what: string, v: unknown): number {
  const n = typeof v === "string" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n)) throw new ReplyShapeError(what, v);
  return n;
}

function ints(what: string, reply: unknown, n: number): number[] {
  if (!Array.isArray(reply) || reply.length < n) throw new ReplyShapeError(what, reply);
  return reply.slice(0, n).map((v) => integer(what, v));
}

function fromSix(a: number[]): Decision {
  const [limited, rule, limit, remaining, retry, reset] = a;
  return {
    limited: limited === 1,
    rule,
    limit,
    remaining,
    retryAfter: retry === -1 ? null : retry,
    resetAfter: reset,
    waitingCannotHelp: limited === 1 && retry === -1,
  };
}

export function decision(what: string, reply: unknown): Decision {
  return Object.freeze(fromSix(ints(what, reply, 6)));
}

export function leaseDecision(reply: unknown): LeaseDecision {
  const d = fromSix(ints("RL.LEASE", reply, 6));
  const tok = (reply as unknown[])[6];
  return Object.freeze({ ...d, token: tok == null ? null : String(tok) });
}

export function allDecision(what: string, reply: unknown, details: boolean): AllDecision {
  const [limited, clause, ...six] = ints(what, reply, 7);
  let states: RuleState[][] | null = null;
  if (details) {
    const rest = (reply as unknown[]).slice(7);
    states = rest.map((clauseReply) => {
      if (!Array.isArray(clauseReply)) throw new ReplyShapeError(what, reply);
      return Object.freeze(clauseReply.map((rule) => Object.freeze(fromSix(ints(what, rule, 6)))));
    }) as RuleState[][];
    Object.freeze(states);
  }
  return Object.freeze({ ...fromSix([limited, ...six]), clause, details: states });
}

export function dayHourDecision(reply: unknown, dayLimit: number, hourLimit: number): DayHourDecision {
  const [day, hour] = ints("RL.DAYHOUR", reply, 2);
  const dayLimited = day > dayLimit;
  const hourLimited = hour > hourLimit;
  return Object.freeze({ limited: dayLimited || hourLimited, day, hour, dayLimited, hourLimited });
}

export function lockCountDecision(reply: unknown): LockCountDecision {
  const [limited, count, ttl] = ints("RL.LOCKCOUNT", reply, 3);
  return Object.freeze({ limited: limited === 1, count, ttl: ttl === -1 ? null : ttl });
}

export function counts(what: string, reply: unknown): number[] {
  if (!Array.isArray(reply)) throw new ReplyShapeError(what, reply);
  return Object.freeze(reply.map((v) => integer(what, v))) as number[];
}
