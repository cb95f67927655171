/**
 * Limits as text, as slowapi and `limits` write them: `"5/minute;100/hour"`.
 *
 * Each item is a sliding window (RL.CHECK), named for what it says so the
 * RateLimit headers read like the text: `5/minute` → `5-per-1m`,
 * `10 per 5 minutes` → `10-per-5m`. The grammar, the names and the
 * refusals are the Python and Java clients' too (golden cases in
 * clients/conformance/cases/limits-text.json).
 */
import * as a from "./args";

/** One item of a limits text: a sliding window of `count` per `window` ms. */
export interface TextLimit {
  readonly name: string;
  readonly count: number;
  readonly window: number;
}

// <count> ("/" | "per") [<amount>] <unit>; spaces are ASCII space and tab
// only and `i` folds ASCII only, so the three clients' regex engines agree.
const ITEM = /^([0-9]+)[ \t]*(?:\/|per)[ \t]*([0-9]+)?[ \t]*(second|minute|hour|day)s?$/i;
const UNIT_MS: Record<string, number> = { second: 1000, minute: 60000, hour: 3600000, day: 86400000 };

/**
 * The sliding windows `text` names (`;`, `,` or `|` between items).
 * Refused with `error.field`: `limits` (not a string, empty, an item that
 * does not parse, a unit other than second/minute/hour/day), `count` (0 or
 * above 2^53-1), `window` (0 or above 2^53-1 ms), `limit_name` (two items
 * of one count and period).
 */
export function parseLimits(text: string): TextLimit[] {
  if (typeof text !== "string") throw a.invalid("limits", new TypeError(`limits text must be a string, not ${typeof text}`));
  const out: TextLimit[] = [];
  for (const raw of text.split(/[;,|]/)) {
    const item = raw.replace(/^[ \t]+|[ \t]+$/g, "");
    const m = ITEM.exec(item);
    if (!m) {
      throw a.invalid("limits", new RangeError(`invalid limit '${item}' in '${text}': expected e.g. '5/minute', '100 per hour' or '10 per 5 minutes' (second, minute, hour, day)`));
    }
    const unit = m[3].toLowerCase();
    const count = a.int("count", Number(m[1]), 1, a.MAX);
    const amount = Number(m[2] ?? "1");
    const window = a.int("window", amount * UNIT_MS[unit], 1, a.MAX);
    out.push({ name: `${count}-per-${amount}${unit[0]}`, count, window });
  }
  const names = out.map((l) => l.name);
  if (new Set(names).size !== names.length) throw a.invalid("limit_name", new RangeError(`two items of one count and period in '${text}'`));
  return out;
}
