/**
 * Exempt callers for the HTTP adapters (slowapi's `exempt`, express-rate-limit's
 * `skip`): addresses and CIDR ranges (Node's own `net.BlockList`, IPv4 and
 * IPv6) and caller keys that are never limited.
 */
import { BlockList, isIP } from "node:net";

export interface Exemptions {
  /** Addresses or CIDR ranges (`"10.0.0.0/8"`, `"::1"`) never limited. */
  readonly ips?: readonly string[];
  /** Resolved caller keys never limited (an internal service's API key). */
  readonly keys?: readonly string[];
}

/** `(ip, keys) => exempt`, built once; a malformed address or range throws here, at start. */
export function exemption(e: Exemptions | undefined): (ip: string | undefined, keys: readonly string[]) => boolean {
  if (!e) return () => false;
  const list = new BlockList();
  for (const entry of e.ips ?? []) {
    const [addr, bits] = entry.split("/");
    const family = isIP(addr) === 6 ? "ipv6" : isIP(addr) === 4 ? "ipv4" : null;
    if (family === null) throw new RangeError(`exempt.ips: '${entry}' is not an address or a CIDR range`);
    if (bits === undefined) list.addAddress(addr, family);
    else {
      const n = Number(bits);
      if (!Number.isInteger(n) || n < 0 || n > (family === "ipv4" ? 32 : 128)) throw new RangeError(`exempt.ips: '${entry}' has a bad prefix length`);
      list.addSubnet(addr, n, family);
    }
  }
  const keys = new Set(e.keys ?? []);
  return (ip, resolved) => {
    if (ip) {
      const bare = ip.startsWith("::ffff:") && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip; // an IPv4 client on a dual-stack socket
      const family = isIP(bare) === 6 ? "ipv6" : isIP(bare) === 4 ? "ipv4" : null;
      if (family && list.check(bare, family)) return true;
    }
    return resolved.some((k) => keys.has(k));
  };
}
