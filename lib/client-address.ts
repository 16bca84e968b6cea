// Who a request comes from, for limits counted per client (failed API-key lookups): the TCP peer,
// or behind trusted reverse proxies the address they say they forwarded for. The one parser of
// TRUSTED_PROXIES and the one reading of X-Forwarded-For. Pure: no I/O.
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** One trusted range: an address and its prefix length (a bare address is a /32 or /128). */
export type TrustedRange = readonly [Address, number];

/** The reverse proxies whose X-Forwarded-For is believed (TRUSTED_PROXIES); empty: none. */
export type TrustedProxies = readonly TrustedRange[];

/** The message of a TRUSTED_PROXIES entry that is neither an IP address nor a CIDR range. */
export const TRUSTED_PROXIES_RULE = 'must be a comma-separated list of IP addresses or CIDR ranges, such as 10.0.0.0/8,fd00::/8,192.0.2.10';

/** An address as counted and matched: an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is its IPv4 address. */
function parseAddress(text: string): Address | null {
  const trimmed = text.trim().replace(/^\[(.*)\]$/, '$1');
  if (!ipaddr.isValid(trimmed)) return null;
  const parsed = ipaddr.parse(trimmed);
  return parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress() ? parsed.toIPv4Address() : parsed;
}

/**
 * Parses TRUSTED_PROXIES: comma-separated IP addresses and CIDR ranges (an IPv4-mapped IPv6 range
 * is taken as its IPv4 range). Throws an Error whose message is TRUSTED_PROXIES_RULE naming the
 * first entry that is neither.
 */
export function parseTrustedProxies(list: string): TrustedProxies {
  const ranges: TrustedRange[] = [];
  for (const entry of list.split(',').map((part) => part.trim()).filter(Boolean)) {
    let range: TrustedRange | null = null;
    if (entry.includes('/')) {
      if (ipaddr.isValidCIDR(entry)) {
        const [address, bits] = ipaddr.parseCIDR(entry);
        range = address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress() && bits >= 96 ? [address.toIPv4Address(), bits - 96] : [address, bits];
      }
    } else {
      const address = parseAddress(entry);
      if (address) range = [address, address.kind() === 'ipv4' ? 32 : 128];
    }
    if (!range) throw new Error(`${TRUSTED_PROXIES_RULE} (not one: ${JSON.stringify(entry)})`);
    ranges.push(range);
  }
  return ranges;
}

const isTrusted = (address: Address, trusted: TrustedProxies): boolean =>
  trusted.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits));

/**
 * The client a request comes from: the TCP peer (`socketAddress`) unless it is a trusted proxy;
 * then the rightmost X-Forwarded-For entry that is not a trusted proxy (each proxy appends the
 * address it received the request from, so entries left of the first untrusted one were written
 * by the client and prove nothing). With no trusted proxy (the default) X-Forwarded-For is never
 * read, whoever sends it. An entry that is not an IP address ends the walk at the last trusted
 * hop: that proxy's address is counted (shared by its clients, never a value a client chose). When
 * every entry is a trusted proxy, the leftmost one is the client. `unknown` without a socket.
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | undefined, trusted: TrustedProxies): string {
  const peer = socketAddress === undefined ? null : parseAddress(socketAddress);
  if (!peer) return socketAddress ?? 'unknown';
  let client = peer;
  if (trusted.length === 0 || !isTrusted(peer, trusted)) return client.toString();
  const hops = (forwardedFor ?? '').split(',').map((hop) => hop.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = parseAddress(hops[i]!);
    if (!hop) break;
    client = hop;
    if (!isTrusted(hop, trusted)) break;
  }
  return client.toString();
}

/**
 * The bucket an address is counted in: an IPv4 address on its own, an IPv6 address by its /64
 * (`2001:db8:1:2::/64`: one host or site is routinely given a whole /64 and can take any address of
 * it, so counting per address would let it rotate past any limit). Anything that is not an
 * address (`unknown`) is its own bucket.
 */
export function addressBucket(address: string): string {
  const parsed = parseAddress(address);
  if (!parsed) return address;
  if (parsed instanceof ipaddr.IPv4) return parsed.toString();
  const parts = parsed.parts.slice(0, 4).concat([0, 0, 0, 0]);
  return `${new ipaddr.IPv6(parts).toString()}/64`;
}
