/**
 * Errors the package raises. A server error reply keeps the server's text
 * unchanged (the module names the bad argument in it); arguments the module
 * would refuse are refused before any Redis call with a `RangeError`
 * (JavaScript's error for a value outside what a function accepts).
 */

/** An error reply from Redis or the module, with the server's text as `message`. */
export class RateLimitError extends Error {
  /** The error as the Redis client raised it (ioredis `ReplyError`, node-redis `ErrorReply`). */
  readonly cause?: unknown;
  constructor(message: string, cause?: unknown) {
    super(message);
    this.name = "RateLimitError";
    this.cause = cause;
  }
}

/** The server answers, but the redis-ratelimit module is not loaded there. */
export class ModuleNotLoadedError extends RateLimitError {
  constructor(detail: string) {
    super(
      `the redis-ratelimit module is not loaded on this Redis server (${detail}); ` +
        "load it with --loadmodule /path/to/libredis_ratelimit.so or MODULE LOAD, " +
        'or give the limiter backend: "functions" (the Functions library: no module needed)',
    );
    this.name = "ModuleNotLoadedError";
  }
}

/**
 * Backend `functions`: the redis-ratelimit Functions library is not on the
 * server (or older than this package) and this Redis user may not load it;
 * the message names the command to run once by hand. A kind of
 * `ModuleNotLoadedError`: no engine to decide with.
 */
export class LibraryNotLoadedError extends ModuleNotLoadedError {
  constructor(message: string) {
    super("");
    this.message = message;
    this.name = "LibraryNotLoadedError";
  }
}

/**
 * Redis could not decide within the budget: a timeout, a broken connection,
 * or the circuit is open (a recent failure; a background probe is checking
 * when Redis answers again). Policies map it to fail-open or fail-closed.
 */
export class RateLimitUnavailableError extends Error {
  readonly cause?: unknown;
  constructor(message: string, cause?: unknown) {
    super(message);
    this.name = "RateLimitUnavailableError";
    this.cause = cause;
  }
}

/**
 * The local backend refused a command that would grow it past its bound
 * (nothing the command did is kept): the `local` Redis-down mode answers a
 * refusal whose retry-after is `retryAfter` — ms until the earliest key
 * expires (1 s when none expires). Java's `LocalBackendFullException`,
 * Python's `LocalBackendFullError`.
 */
export class LocalBackendFullError extends RateLimitError {
  readonly retryAfter: number;
  constructor(retryAfter: number, maxKeys: number, maxEntries: number) {
    super(`the local backend is full (${maxKeys} keys, ${maxEntries} entries): retry after ${retryAfter} ms`);
    this.name = "LocalBackendFullError";
    this.retryAfter = retryAfter;
  }
}

/** Thrown by `withPermit` (and available to callers) when a policy refuses. */
export class RateLimitedError extends Error {
  readonly decision: unknown;
  constructor(decision: unknown, message = "rate limited") {
    super(message);
    this.name = "RateLimitedError";
    this.decision = decision;
  }
}

/**
 * Whether `err` is an error *reply* from the server (as opposed to a
 * connection failure or a timeout). ioredis raises `ReplyError`, node-redis
 * `ErrorReply` (and its subclasses `SimpleError`, `BlobError`).
 */
export function isServerReplyError(err: unknown): err is Error {
  if (!(err instanceof Error)) return false;
  for (let proto = Object.getPrototypeOf(err); proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    const name = proto.constructor?.name;
    if (name === "ReplyError" || name === "ErrorReply") return true;
  }
  return err.name === "ReplyError";
}
