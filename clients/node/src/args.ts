/**
 * Argument checks done before any Redis call, with the module's ranges
 * (SPEC.md "Conventions"), so a caller's bug is a `RangeError` at the call
 * site instead of a round trip and an `ERR invalid ...` reply.
 */

/** 2^53-1: the module's bound for every integer (and JavaScript's safe integers). */
export const MAX = Number.MAX_SAFE_INTEGER;
/** At most this many rules per call, tokens per RELEASE/RENEW, keys per RL.ALL. */
export const MAX_RULES = 64;
/** A cost above this is refused for RL.CHECK (one member per unit) and leases. */
export const MAX_UNIT_COST = 10000;
/** RL.QUOTA's `now` bound: the end of year 9999 UTC. */
export const MAX_QUOTA_NOW = 253402300799999;

export type Now = number | "*";

/**
 * An argument error naming its field (`error.field`): the name the three
 * clients share for it (clients/conformance/README.md), so tests compare
 * the field, not the wording.
 */
export function invalid<E extends Error>(field: string, error: E): E {
  (error as E & { field: string }).field = field;
  return error;
}

/** `"count of 'short'"`, `"lockTime of 'x'"` → `"count"`, `"lockTime"`. */
const fieldOf = (what: string) => what.split(" ", 1)[0];

export function int(what: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(fieldOf(what), new RangeError(`invalid ${what} '${String(value)}': expected an integer from ${min} to ${max}`));
  }
  return value;
}

export const duration = (what: string, value: unknown) => int(what, value, 1, MAX);

export function now(value: Now | undefined, max = MAX): string {
  if (value === undefined || value === "*") return "*";
  return String(int("now", value, 0, max));
}

export function key(what: string, value: unknown): string {
  if (typeof value !== "string") throw invalid(fieldOf(what), new TypeError(`invalid ${what}: expected a string, got ${typeof value}`));
  return value;
}

/** RL.LEASE's token rule: 1 to 64 bytes, printable ASCII other than space and `#`. */
export function token(value: unknown): string {
  if (typeof value !== "string" || !/^[\x21-\x22\x24-\x7e]{1,64}$/.test(value)) {
    throw invalid(
      "token",
      new RangeError(`invalid token '${String(value)}': expected 1 to 64 printable ASCII characters other than space and '#'`),
    );
  }
  return value;
}

export function tokens(values: string | readonly string[]): string[] {
  const list = typeof values === "string" ? [values] : [...values];
  if (list.length === 0) throw new RangeError("invalid tokens: expected at least one token");
  if (list.length > MAX_RULES) throw new RangeError(`too many tokens: ${list.length} (at most ${MAX_RULES})`);
  const seen = new Set<string>();
  for (const t of list) {
    token(t);
    if (seen.has(t)) throw new RangeError(`invalid tokens: '${t}' is given twice`);
    seen.add(t);
  }
  return list;
}

const OFFSET = /^[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]$/;

/**
 * An IANA zone as the module spells it (case-sensitive) or a fixed offset
 * `+HH:MM`. Checked with `Intl` (Node's ICU time-zone data), which also
 * accepts other spellings: those are refused when they differ only in case.
 */
// Building an Intl.DateTimeFormat costs about a millisecond: zones already
// judged are remembered (a bounded map: zones come from requests).
const judged = new Map<string, string | null>();

export function zone(value: unknown): string {
  if (typeof value !== "string" || value.length === 0) throw invalid("zone", new RangeError(`invalid zone '${String(value)}'`));
  if (OFFSET.test(value)) return value;
  let verdict = judged.get(value);
  if (verdict === undefined) {
    verdict = judgeZone(value);
    if (judged.size >= 1024) judged.clear();
    judged.set(value, verdict);
  }
  if (verdict !== null) throw invalid("zone", new RangeError(verdict));
  return value;
}

/** Why `value` is not a zone the module takes, or null when it is one. */
function judgeZone(value: string): string | null {
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat("en-US", { timeZone: value }).resolvedOptions().timeZone;
  } catch {
    return `invalid zone '${value}': not an IANA time zone`;
  }
  if (resolved !== value && resolved.toLowerCase() === value.toLowerCase()) {
    return `invalid zone '${value}': zone names are case-sensitive (did you mean '${resolved}'?)`;
  }
  return null;
}

/** `REFUND` and `DEBIT` exclude each other; with either, COST has DEBIT's range. */
export function settleMode(opts: { refund?: boolean; debit?: boolean }): "REFUND" | "DEBIT" | undefined {
  if (opts.refund && opts.debit) throw new RangeError("invalid options: DEBIT and REFUND exclude each other");
  return opts.refund ? "REFUND" : opts.debit ? "DEBIT" : undefined;
}

/** Whether RL.QUOTA would take `value` as a zone (an IANA name as spelled, or `+HH:MM`); for request validation. */
export function isZone(value: unknown): boolean {
  try {
    zone(value);
    return true;
  } catch {
    return false;
  }
}
