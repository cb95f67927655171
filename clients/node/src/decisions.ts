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

function integer(what: string, v: unknown, reply: unknown): number {
  if (typeof v === "number" && Number.isInteger(v)) return v;
  // node-redis with some type mappings answers numbers as strings.
  if (typeof v === "string" && /^-?[0-9]+$/.test(v)) return Number(v);
  throw new ReplyShapeError(what, reply);
}

// Objects of one fixed shape, built field by field (no spread): decisions
// are made on every request, and V8 keeps these fast.
function make(what: string, r: unknown[], at: number, reply: unknown): Decision {
  const limited = integer(what, r[at], reply);
  const retry = integer(what, r[at + 4], reply);
  return Object.freeze({
    limited: limited === 1,
    rule: integer(what, r[at + 1], reply),
    limit: integer(what, r[at + 2], reply),
    remaining: integer(what, r[at + 3], reply),
    retryAfter: retry === -1 ? null : retry,
    resetAfter: integer(what, r[at + 5], reply),
    waitingCannotHelp: limited === 1 && retry === -1,
  });
}

function array(what: string, reply: unknown, n: number): unknown[] {
  if (!Array.isArray(reply) || reply.length < n) throw new ReplyShapeError(what, reply);
  return reply;
}

export function decision(what: string, reply: unknown): Decision {
  return make(what, array(what, reply, 6), 0, reply);
}

export function leaseDecision(reply: unknown): LeaseDecision {
  const r = array("RL.LEASE", reply, 6);
  const limited = integer("RL.LEASE", r[0], reply);
  const retry = integer("RL.LEASE", r[4], reply);
  return Object.freeze({
    limited: limited === 1,
    rule: integer("RL.LEASE", r[1], reply),
    limit: integer("RL.LEASE", r[2], reply),
    remaining: integer("RL.LEASE", r[3], reply),
    retryAfter: retry === -1 ? null : retry,
    resetAfter: integer("RL.LEASE", r[5], reply),
    waitingCannotHelp: limited === 1 && retry === -1,
    token: r[6] == null ? null : String(r[6]),
  });
}

export function allDecision(what: string, reply: unknown, details: boolean): AllDecision {
  const r = array(what, reply, 7);
  let states: RuleState[][] | null = null;
  if (details) {
    states = [];
    for (let c = 7; c < r.length; c++) {
      const clause = r[c];
      if (!Array.isArray(clause)) throw new ReplyShapeError(what, reply);
      const rules: RuleState[] = [];
      for (const rule of clause) rules.push(make(what, array(what, rule, 6), 0, reply));
      states.push(Object.freeze(rules) as RuleState[]);
    }
    Object.freeze(states);
  }
  const limited = integer(what, r[0], reply);
  const retry = integer(what, r[5], reply);
  return Object.freeze({
    limited: limited === 1,
    rule: integer(what, r[2], reply),
    limit: integer(what, r[3], reply),
    remaining: integer(what, r[4], reply),
    retryAfter: retry === -1 ? null : retry,
    resetAfter: integer(what, r[6], reply),
    waitingCannotHelp: limited === 1 && retry === -1,
    clause: integer(what, r[1], reply),
    details: states,
  });
}

function ints(what: string, reply: unknown, n: number): number[] {
  const r = array(what, reply, n);
  return r.slice(0, n).map((v) => integer(what, v, reply));
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
  return Object.freeze(reply.map((v) => integer(what, v, reply))) as number[];
}
