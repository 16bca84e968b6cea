// Outbound requests a user can aim (webhook URLs): which addresses they may reach, and an HTTP
// POST bounded in time and size whose every connection is checked at connect time, so a DNS name
// that resolves to an internal address (or is re-pointed there later) is refused too.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * True for a globally routable unicast address. Loopback, private ranges, link-local (cloud
 * metadata), carrier-grade NAT, unique-local IPv6, multicast, reserved and unspecified addresses
 * are not, nor is an IPv4-mapped IPv6 form of one.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress()) parsed = parsed.toIPv4Address();
  return parsed.range() === 'unicast';
}

/**
 * What is wrong with `raw` as the target of an outbound request, or null: only http(s), no
 * credentials in the URL, and unless `allowPrivate`, no loopback, private or link-local host
 * given as an address or as `localhost`. Names are checked again when they are resolved.
 */
export function outboundUrlProblem(raw: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http(s) URL';
  if (url.username || url.password) return 'must not carry credentials';
  if (allowPrivate) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const internal = isIP(host) ? !isPublicAddress(host) : host === 'localhost' || host.endsWith('.localhost');
  return internal ? 'must not point at a loopback, private or link-local address' : null;
}

/** Raised when a name resolves to an address outbound requests may not reach. */
export class AddressNotAllowed extends Error {
  override name = 'AddressNotAllowed';
  readonly code = 'EADDRNOTALLOWED';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `lookup` for node:http that refuses names resolving to any non-public address. */
function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    if (addresses.length === 0 || addresses.some((a) => !isPublicAddress(a.address))) {
      return callback(new AddressNotAllowed('the host resolves to an address that is not allowed'), []);
    }
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
}

/** The answer to an outbound POST: its status (the body is read up to a cap and dropped). */
export interface OutboundAnswer {
  status: number;
}

/**
 * POSTs `body` to `url` with `headers`: no redirects followed, at most `timeoutMs` in all, at most
 * `maxResponseBytes` of the answer read. Unless `allowPrivate`, the host must resolve to public
 * addresses only (checked on the resolved address, so DNS rebinding cannot get around it).
 * Errors carry short messages that name no address.
 */
export function postBounded(
  url: string,
  body: string,
  headers: Record<string, string>,
  opts: { timeoutMs: number; maxResponseBytes: number; allowPrivate: boolean },
): Promise<OutboundAnswer> {
  const problem = outboundUrlProblem(url, opts.allowPrivate);
  if (problem) return Promise.reject(new AddressNotAllowed(`url ${problem}`));
  const target = new URL(url);
  const request = target.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': Buffer.byteLength(body).toString() },
        ...(opts.allowPrivate ? {} : { lookup: guardedLookup as never }),
        signal: AbortSignal.timeout(opts.timeoutMs),
      },
      (res) => {
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > opts.maxResponseBytes) res.destroy();
        });
        res.on('close', () => resolve({ status: res.statusCode ?? 0 }));
        res.on('error', () => resolve({ status: res.statusCode ?? 0 }));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => reject(new Error(describeNetworkError(err))));
    req.end(body);
  });
}

/** A network failure in words that name no address or port (no port scanning through errors). */
function describeNetworkError(err: NodeJS.ErrnoException): string {
  if (err instanceof AddressNotAllowed) return err.message;
  if (err.name === 'AbortError' || err.name === 'TimeoutError') return 'timed out';
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'host not found';
    case 'ECONNRESET':
      return 'connection reset';
    default:
      return 'network error';
  }
}
