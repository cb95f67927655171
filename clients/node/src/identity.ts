// The identities both HTTP adapters (express, Fastify) key on, decided once:
// the same caller gets the same key, and a missing one the same problem.
import { isIPv4 } from "node:net";
import { ProblemError } from "./problems";

const IPV4_MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/** The client's address as a key; 400 when the framework knows none. */
export function clientIpKey(ip: string | undefined): string {
  if (!ip) throw new ProblemError(400, "bad-request", "the client address is unknown");
  // A dual-stack listener sees an IPv4 caller as ::ffff:a.b.c.d: keyed as
  // a.b.c.d, the same caller and key as the Java and Python packages.
  const mapped = IPV4_MAPPED.exec(ip);
  return mapped && isIPv4(mapped[1]) ? mapped[1] : ip;
}

/** The authenticated user's id as a key; 401 when there is none. */
export function userKey(id: unknown): string {
  if (id === undefined || id === null || id === "") throw new ProblemError(401, "unauthorized", "authentication required");
  return String(id);
}
