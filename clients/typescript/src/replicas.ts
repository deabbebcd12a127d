/**
 * Which replicas a processor keeps a session with: addresses as given, and every address a
 * `dns:///name:port` resolves to (with the name, which their TLS certificates must carry).
 */

import { lookup } from "node:dns/promises";

/** The prefix of an address that stands for every address its name resolves to. */
export const DNS_PREFIX = "dns:///";

/**
 * The targets (`host:port`) for `addresses`, each with the name its certificate must carry
 * (`undefined` for an address given as is). A name that does not resolve now adds nothing
 * until it does (`log` says so).
 */
export async function resolveTargets(
  addresses: readonly string[],
  log: (line: string) => void,
): Promise<Map<string, string | undefined>> {
  const targets = new Map<string, string | undefined>();
  for (const address of addresses) {
    if (!address.startsWith(DNS_PREFIX)) {
      targets.set(address, undefined);
      continue;
    }
    const name = address.slice(DNS_PREFIX.length);
    const colon = name.lastIndexOf(":");
    const host = name.slice(0, colon).replace(/^\[|\]$/g, "");
    const port = name.slice(colon + 1);
    if (colon <= 0 || !/^\d+$/.test(port)) throw new Error(`${JSON.stringify(address)}: expected dns:///name:port`);
    try {
      for (const { address: ip, family } of await lookup(host, { all: true })) {
        targets.set(family === 6 ? `[${ip}]:${port}` : `${ip}:${port}`, host);
      }
    } catch (error) {
      log(`agentwire: ${host} does not resolve (${String(error)}); trying again later`);
    }
  }
  return targets;
}
