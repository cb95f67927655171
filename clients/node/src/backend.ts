/**
 * Which engine decides: the module's RL commands, or the project's Redis
 * Functions library (SPEC.md "The Functions library") on a Redis that loads
 * no module (ElastiCache, Memorystore, Azure, Upstash, Redis Cloud).
 *
 * `module` (the default) sends `RL.X key … args`; `functions` sends the same
 * call as `FCALL rl_x numkeys key … args` (`FCALL_RO` for a peek,
 * `rl_refund` for a refund, so it runs above maxmemory as the module's
 * refunds do); `auto` uses the module where every primary has it, else the
 * library, and switches to the library when the module goes missing at run
 * time (a failover to a server without it).
 *
 * The library is `dist/ratelimit.lua`, copied by the package build from the
 * repository's one source (functions/ratelimit.lua) and loaded with
 * `FUNCTION LOAD REPLACE` when a primary has none or one older than it
 * (`rl_version`). Everything here is pure; RateLimitClient does the I/O.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export type Backend = "module" | "functions" | "auto";
export const BACKENDS: readonly Backend[] = ["module", "functions", "auto"];

/** `value` as a backend name (case-insensitive), or a RangeError naming the setting. */
export function backendOf(value: unknown): Backend {
  const v = typeof value === "string" ? value.trim().toLowerCase() : value;
  if (BACKENDS.includes(v as Backend)) return v as Backend;
  throw new RangeError(`invalid backend '${String(value)}': 'module', 'functions' or 'auto'`);
}

/** Where the installed package keeps the library (for loading it by hand). */
export const LIBRARY_PATH = join(__dirname, "ratelimit.lua");

let source: string | null = null;

/** The library's Lua source, as this package carries it. */
export function library(): string {
  if (source === null) {
    try {
      source = readFileSync(LIBRARY_PATH, "utf8");
    } catch {
      throw new Error(
        `${LIBRARY_PATH} is missing: the package build (npm run build) copies it from the repository's functions/ratelimit.lua`,
      );
    }
  }
  return source;
}

/** The `RL_VERSION` a library source declares (what its `rl_version` answers). */
export function versionOf(src: string): number {
  const m = /^local\s+(?:RL_)?VERSION\s*=\s*(\d+)/m.exec(src);
  if (!m) throw new Error("the Functions library has no `local RL_VERSION = <number>` line");
  return Number(m[1]);
}

/** The command an operator runs once when the app's user may not run FUNCTION LOAD. */
export function loadCommand(where?: string): string {
  const i = where ? where.lastIndexOf(":") : -1;
  const target = where && i > 0 ? `-h ${where.slice(0, i)} -p ${where.slice(i + 1)} ` : "";
  return `redis-cli ${target}-x FUNCTION LOAD REPLACE < ${LIBRARY_PATH}`;
}

/** An FCALL refused because the library is not loaded on that node. */
export const isFunctionMissing = (text: string): boolean => /function not found/i.test(text);

/** An RL command refused because the module is not loaded on that node. */
export const isModuleMissing = (text: string): boolean => /^err unknown command/i.test(text) && /rl\./i.test(text);

const PEEKS = new Set(["RL.PEEK", "RL.THROTTLEPEEK", "RL.QUOTAPEEK", "RL.LEASEPEEK", "RL.ALLPEEK"]);
const TWO_KEYS = new Set(["RL.DAYHOUR", "RL.LOCKCOUNT"]);

/**
 * `RL.X key … args` as the library's FCALL: the command's keys (as COMMAND
 * GETKEYS reports them), then its other arguments in their order; zones
 * passed as SPEC.md allows (`functionsZone`).
 */
export function fcall(args: readonly string[]): string[] {
  const name = args[0].toUpperCase();
  if (!name.startsWith("RL.")) return [...args]; // a plain Redis command (DEL, PTTL): the same on both engines
  let keys: readonly string[];
  let rest: string[];
  let refund: boolean;
  if (name === "RL.ALL" || name === "RL.ALLPEEK") {
    const n = Number(args[1]);
    keys = args.slice(2, 2 + n);
    rest = args.slice(2 + n);
    refund = allClauses(rest);
  } else {
    const n = TWO_KEYS.has(name) ? 2 : 1;
    keys = args.slice(1, 1 + n);
    rest = args.slice(1 + n);
    if ((name === "RL.QUOTA" || name === "RL.QUOTAPEEK") && rest.length > 1) rest[1] = functionsZone(rest[1]);
    refund = (name === "RL.CHECK" || name === "RL.THROTTLE" || name === "RL.QUOTA") && rest.includes("REFUND");
  }
  const fn = "rl_" + name.slice(3).toLowerCase();
  if (refund) return ["FCALL", "rl_refund", String(keys.length), ...keys, fn.slice(3), ...rest]; // rl_refund … check|throttle|quota|all
  return [PEEKS.has(name) ? "FCALL_RO" : "FCALL", fn, String(keys.length), ...keys, ...rest];
}

/**
 * Maps RL.ALL's QUOTA clauses' zones (`QUOTA i zone …`) in place and says
 * whether the call ends with REFUND; the values after TOKEN and COST are
 * skipped (a token may be spelled like a kind or an option).
 */
function allClauses(rest: string[]): boolean {
  let refund = false;
  for (let i = 1; i < rest.length; ) {
    const word = rest[i].toUpperCase();
    if (word === "TOKEN" || word === "COST") i += 2;
    else if (word === "QUOTA" && i + 2 < rest.length) {
      rest[i + 2] = functionsZone(rest[i + 2]);
      i += 3;
    } else {
      refund ||= word === "REFUND";
      i += 1;
    }
  }
  return refund;
}

// Zones come from requests: a bounded memo of the ones already judged.
const zones = new Map<string, string | RangeError>();
const OFFSET = /^[+-]\d\d:\d\d$/;

/**
 * A zone as the library takes it: `UTC` and `+HH:MM` as they are; an IANA
 * zone that keeps one offset for the coming year (`Asia/Shanghai`) as that
 * offset (`+08:00`). A zone with daylight saving (or any offset change
 * ahead) is refused with a RangeError: the library has no time-zone database.
 */
export function functionsZone(zone: string): string {
  if (zone === "UTC" || OFFSET.test(zone)) return zone;
  let judged = zones.get(zone);
  if (judged === undefined) {
    judged = judge(zone);
    if (zones.size >= 1024) zones.clear();
    zones.set(zone, judged);
  }
  if (judged instanceof RangeError) throw judged;
  return judged;
}

function judge(zone: string): string | RangeError {
  let format: Intl.DateTimeFormat;
  try {
    format = new Intl.DateTimeFormat("en-US", { timeZone: zone, timeZoneName: "longOffset" });
  } catch {
    return new RangeError(`invalid zone '${zone}': expected an IANA time-zone name or a fixed offset '+HH:MM'`);
  }
  const offsets = new Set<string>();
  const start = Date.now();
  for (let day = 0; day <= 366; day++) {
    const part = format.formatToParts(start + day * 86_400_000).find((p) => p.type === "timeZoneName");
    offsets.add(part?.value ?? "?");
  }
  if (offsets.size !== 1) {
    return new RangeError(
      `zone '${zone}' has daylight saving (its UTC offset changes within a year): the Functions library ` +
        "(backend 'functions') takes only UTC and fixed offsets; use the module for this zone, or a fixed offset such as '+01:00'",
    );
  }
  const gmt = [...offsets][0]; // "GMT+08:00", "GMT-03:30", "GMT" for +00:00
  return gmt === "GMT" ? "+00:00" : gmt.slice(3);
}
