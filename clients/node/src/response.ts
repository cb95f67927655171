/**
 * When an HTTP adapter's permit closes (CLIENTS.md §4): once the request's
 * work is over, never at a disconnect while the handler still runs. Shared
 * by the express and Fastify adapters (Node's own ServerResponse, no
 * framework import).
 */
import type { ServerResponse } from "node:http";
import type { Permit } from "./limiter";
import { isFailure } from "./outcome";

/**
 * After a disconnect, the longest a permit waits for the handler to end its
 * response before it closes anyway (a handler that never calls
 * `res.end()`): its lease would else be renewed for as long as the process runs.
 */
export const ABANDONED_AFTER = 60_000;

/**
 * Closes `permit` once the work is over: the response fully sent
 * ('finish'); or, the client gone first ('close' without 'finish'), when
 * the handler ends its response (`res.end()`) — at once if `bodyHandedOff`
 * says the handler had already handed its body over (a piped stream, which
 * the disconnect destroyed) — and at the latest `ABANDONED_AFTER` ms after
 * the disconnect.
 */
export function closeWhenDone(res: ServerResponse, permit: Permit, bodyHandedOff: () => boolean = () => false): void {
  let handlerEnded = false;
  let gone = false;
  let timer: NodeJS.Timeout | null = null;
  const close = () => {
    if (timer) clearTimeout(timer);
    // The outcome, for a policy that counts only failures or successes (outcome.ts).
    if (!permit.outcomeKnown) {
      if (isFailure(res.statusCode)) permit.failed();
      else permit.succeeded();
    }
    void permit.close();
  };
  const end = res.end;
  res.end = function (this: ServerResponse, ...args: unknown[]) {
    handlerEnded = true;
    if (gone) setImmediate(close);
    return (end as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse["end"];
  res.once("finish", close);
  res.once("close", () => {
    if (res.writableFinished) return; // 'finish' closes it
    gone = true;
    if (handlerEnded || bodyHandedOff()) return close();
    timer = setTimeout(close, ABANDONED_AFTER);
    timer.unref();
  });
}
