// Outbound requests a user can aim (webhook URLs, provider base URLs): which addresses they may
// reach, and HTTP requests bounded in time and size whose every connection is checked at connect
// time, so a DNS name that resolves to an internal address (or is re-pointed there later: DNS
// rebinding) is refused too. The one home of that rule: webhooks POST through `postBounded`,
// connectors GET through `getBounded` (via connectors/provider-http.ts).
import type { LookupAddress, LookupOptions } from 'node:dns';
import { Resolver } from 'node:dns/promises';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP, type Socket } from 'node:net';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import zlib from 'node:zlib';
import ipaddr from 'ipaddr.js';
import { answeredAtMs, retryAfterSeconds } from '../policy/retry-after';

/**
 * The IPv6 block `::/8`, reserved by the IETF (IANA's IPv6 address space registry): no public
 * address lies there but the IPv4-mapped (`::ffff:a.b.c.d`) and NAT64 (`64:ff9b::a.b.c.d`) forms
 * of public IPv4 addresses. It holds the unspecified and loopback addresses and the deprecated
 * IPv4-compatible ones (`::a.b.c.d`), and some stacks route other parts of it to the IPv4 address
 * in their last 32 bits (`::1:7f00:1` to 127.0.0.1).
 */
const IETF_RESERVED = ipaddr.parseCIDR('::/8');

/**
 * NAT64's well-known prefix (`64:ff9b::a.b.c.d`, RFC 6052): on an IPv6-only network, DNS64 answers
 * every IPv4-only name with an address here, and the NAT64 gateway carries it to the IPv4 address
 * in its last 32 bits.
 */
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');

/** The IPv4 address in the last 32 bits of `address`. */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 {
  const parts = address.parts;
  return new ipaddr.IPv4([parts[6]! >> 8, parts[6]! & 0xff, parts[7]! >> 8, parts[7]! & 0xff]);
}

/**
 * True for a globally routable unicast address. Loopback, private ranges, link-local (cloud
 * metadata), carrier-grade NAT, unique-local IPv6, multicast, reserved and unspecified addresses
 * are not, nor is an IPv4-mapped IPv6 form of one (`::ffff:8.8.8.8` is public), nor any other
 * address of the reserved `::/8` (`::7f00:1`, IPv4-compatible, is 127.0.0.1 to a stack that still
 * routes them; `::1:7f00:1` may be too). An address of NAT64's well-known prefix is the
 * IPv4 address it carries (`64:ff9b::8.8.8.8` is public, `64:ff9b::10.0.0.1` is not).
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed instanceof ipaddr.IPv6) {
    // NAT64's well-known prefix lies in ::/8 too: judged by the address it carries.
    if (parsed.isIPv4MappedAddress()) parsed = parsed.toIPv4Address();
    else if (parsed.match(NAT64_WELL_KNOWN)) parsed = embeddedIPv4(parsed);
    else if (parsed.match(IETF_RESERVED)) return false;
  }
  return parsed.range() === 'unicast';
}

/**
 * What is wrong with `raw` as the target of an outbound request, or null: only http(s), no
 * credentials in the URL, and unless `allowPrivate`, no loopback, private or link-local host
 * given as an address or as `localhost` (also in its absolute form, `localhost.`). Names are
 * checked again when they are resolved.
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
  // Nothing answers there: refused now rather than failing every attempt later.
  if (url.port === '0') return 'must not name port 0';
  // A name's absolute form (`localhost.`, with its root's trailing dot) names the same host.
  const host = url.hostname.replace(/^\[|\]$/g, '').replace(/\.+$/, '').toLowerCase();
  if (!isIP(host) && host.split('.').includes('')) return 'must not have an empty label in its host name (such as `a..b`)';
  if (allowPrivate) return null;
  const internal = isIP(host) ? !isPublicAddress(host) : host === 'localhost' || host.endsWith('.localhost');
  return internal ? 'must not point at a loopback, private or link-local address' : null;
}

/**
 * What a name that does not resolve and a name that resolves to a forbidden address both say: one
 * message, so a tenant cannot learn which internal names exist from a webhook's or provider's error.
 */
const HOST_NOT_FOUND_OR_NOT_ALLOWED = 'host not found or not allowed';

/** Raised when a name resolves to an address outbound requests may not reach. */
export class AddressNotAllowed extends Error {
  override name = 'AddressNotAllowed';
  readonly code = 'EADDRNOTALLOWED';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * How long a name server is given to answer a query on its first try (c-ares lengthens it on the
 * next), and how many tries it gets: a name whose server never answers fails within seconds.
 */
const RESOLVE_TIMEOUT_MS = 2_000;
const RESOLVE_TRIES = 2;

/** The names of a hosts file (`/etc/hosts`: address, then its names; `#` comments) with their addresses, in file order. */
export function parseHostsFile(text: string): Map<string, string[]> {
  const names = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const [address, ...aliases] = line.replace(/#.*/, '').trim().split(/\s+/);
    if (!address || !isIP(address)) continue;
    for (const alias of aliases) {
      const name = alias.toLowerCase().replace(/\.+$/, '');
      names.set(name, [...(names.get(name) ?? []), address]);
    }
  }
  return names;
}

let hostsFile: Promise<Map<string, string[]>> | undefined;
let resolver: Resolver | undefined;

/**
 * The addresses of `hostname` (of `family`, 0 for both; IPv4 first): those `/etc/hosts` gives it
 * (read once per process), else those the system's name servers (`/etc/resolv.conf`) answer for
 * its A and AAAA queries, through c-ares on the event loop. Never `dns.lookup`: its getaddrinfo
 * runs on libuv's thread pool, of whose four threads name lookups may hold two, so two names
 * whose server never answers held back every other name of the process for as long as the
 * system's resolver waited. A name that does not resolve in time fails with ENOTFOUND. (Requests
 * allowed private addresses, a test or `npm start` setting, resolve as the system does: dns.lookup.)
 */
export async function resolveName(hostname: string, family: 0 | 4 | 6): Promise<LookupAddress[]> {
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  hostsFile ??= readFile('/etc/hosts', 'utf8').then(parseHostsFile, () => new Map<string, string[]>());
  let addresses = isIP(name) ? [name] : (await hostsFile).get(name);
  if (!addresses) {
    resolver ??= new Resolver({ timeout: RESOLVE_TIMEOUT_MS, tries: RESOLVE_TRIES });
    const answers = await Promise.allSettled([family === 6 ? [] : resolver.resolve4(name), family === 4 ? [] : resolver.resolve6(name)]);
    addresses = answers.flatMap((answer) => (answer.status === 'fulfilled' ? answer.value : []));
  }
  const found = addresses
    .map((address) => ({ address, family: isIP(address) }))
    .filter((a) => family === 0 || a.family === family)
    .sort((a, b) => a.family - b.family);
  if (found.length === 0) throw Object.assign(new Error(HOST_NOT_FOUND_OR_NOT_ALLOWED), { code: 'ENOTFOUND' });
  return found;
}

/** A `lookup` for node:http that resolves through `resolveName` and refuses names resolving to any non-public address. */
export function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  const family = options.family === 4 || options.family === 'IPv4' ? 4 : options.family === 6 || options.family === 'IPv6' ? 6 : 0;
  resolveName(hostname, family).then(
    (addresses) => {
      if (addresses.some((a) => !isPublicAddress(a.address))) return callback(new AddressNotAllowed(HOST_NOT_FOUND_OR_NOT_ALLOWED), []);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    },
    (err: NodeJS.ErrnoException) => callback(err, []),
  );
}

// Outbound requests keep connections open in agents of their own, never Node's global agent: a
// socket in a shared pool could carry another caller's unchecked request, or bring this module a
// socket that caller connected to an internal address. A kept socket was checked when it
// connected (a guarded agent's every new connection resolves through `guardedLookup`); guarded
// and unguarded requests never share a socket. Provider paging (GET, and token requests) keeps
// its sockets until the server closes them; webhook deliveries (POST, which Node never retries on
// a socket the receiver closed meanwhile: `postBounded` sends it again) close an idle one after
// 5 s, as Node's global agent does.
const guardedAgentOptions = { keepAlive: true, lookup: guardedLookup as never };
const keepAlive = {
  guarded: { http: new http.Agent(guardedAgentOptions), https: new https.Agent(guardedAgentOptions) },
  open: { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) },
};
const DELIVERY_IDLE_MS = 5_000;
const deliveries = {
  guarded: { http: new http.Agent({ ...guardedAgentOptions, timeout: DELIVERY_IDLE_MS }), https: new https.Agent({ ...guardedAgentOptions, timeout: DELIVERY_IDLE_MS }) },
  open: { http: new http.Agent({ keepAlive: true, timeout: DELIVERY_IDLE_MS }), https: new https.Agent({ keepAlive: true, timeout: DELIVERY_IDLE_MS }) },
};

/**
 * The most bytes an answer may take on the connection, from its first byte, when its body may take
 * `cap`: eight times that, and 64 KiB. What the connection carries besides the body may otherwise
 * go on without end: informational (1xx) answers before the final one, each a header section of up
 * to 16 KiB (Node's limit), and chunked framing around next to no body (a chunk size line of
 * endless leading zeros, 16 KiB of extensions to each chunk of one byte). Plain chunked framing
 * adds at least five bytes to each chunk: a body of one-byte chunks takes six times its bytes.
 */
function onConnectionCap(cap: number): number {
  return 8 * cap + 64 * 1024;
}

/** What an answer past `onConnectionCap` (`limit`) fails with, its body's cap being `cap`. */
function tooMuchOnConnection(limit: number, cap: number): ResponseTooLarge {
  return new ResponseTooLarge(
    `the response exceeds ${limit} bytes on the connection, its informational (1xx) answers, headers and chunked framing included (the body's cap is ${cap} bytes)`,
  );
}

/**
 * Counts the bytes `socket` reads from now on and calls `over` once they pass `limit`. Answers the
 * function that stops counting: a kept-alive socket goes on to carry other answers.
 */
function countReads(socket: Socket, limit: number, over: () => void): () => void {
  let read = 0;
  const onData = (chunk: Buffer) => {
    read += chunk.length;
    if (read <= limit) return;
    stop();
    over();
  };
  const stop = () => {
    socket.off('data', onData);
  };
  socket.on('data', onData);
  return stop;
}

/** The answer to an outbound POST: its status (the body is read up to a cap and dropped). */
export interface OutboundAnswer {
  status: number;
  /**
   * The seconds its `Retry-After` header asks to wait (`retryAfterSeconds`; an HTTP-date counted
   * from the answer's own `Date`), present only when it has one that says something.
   */
  retryAfterSeconds?: number;
}

/** The answer `res` is, once its status line and headers were read. */
function answerOf(res: http.IncomingMessage, fallbackStatus: number): OutboundAnswer {
  const status = res.statusCode ?? fallbackStatus;
  const header = res.headers['retry-after'];
  const wait = retryAfterSeconds(header, answeredAtMs(res.headers.date, Date.now()));
  return wait === undefined ? { status } : { status, retryAfterSeconds: wait };
}

/**
 * POSTs `body` to `url` with `headers`: no redirects followed, at most `timeoutMs` in all, at most
 * `maxResponseBytes` of the answer read (and `onConnectionCap` of it on the connection). The
 * answer is its status once the status line and headers were read: a body cut off after them
 * (past the cap, malformed, reset, or unfinished at the timeout) does not undo it. Unless
 * `allowPrivate`, the host must resolve to public addresses only (checked on the resolved
 * address, so DNS rebinding cannot get around it).
 * A request that a kept-alive socket's close failed before any answer is sent again on another.
 * Errors are `outboundError`'s: short messages that name no address (a certificate's host, the
 * URL's, at most).
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
  const secure = target.protocol === 'https:';
  const request = secure ? https.request : http.request;
  return new Promise((resolve, reject) => {
    // Settled once, by whichever comes first: the answer, an error, the close of a request never
    // answered, or the timeout (which then destroys the request). Node emits neither 'response'
    // nor 'error' for some answers (a 101 upgrade), so no outcome is left to the request alone.
    let settled = false;
    let answer: OutboundAnswer | null = null;
    let current: http.ClientRequest;
    let stopCounting = () => {};
    const timeout = AbortSignal.timeout(opts.timeoutMs);
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      stopCounting();
      timeout.removeEventListener('abort', onTimeout);
      outcome();
    };
    // A receiver whose status line and headers were read has answered, however long its body
    // takes: the timeout then ends the read with that status (the body is dropped anyway), as an
    // error after them does, and counts as no answer only before them.
    const onTimeout = () => {
      settle(() => (answer !== null ? resolve(answer) : reject(new Error('timed out'))));
      current.destroy();
    };
    timeout.addEventListener('abort', onTimeout, { once: true });
    // One request, on a kept-alive socket or a new one. A kept-alive socket the receiver closed
    // as the request went out on it (its idle timeout ran out then) fails it before any answer,
    // and Node never sends a POST again: it is sent again here, on another socket, within the
    // same time limit. Only a request on a reused socket that got no answer at all is sent again
    // (a new connection that fails is the receiver's answer); a receiver may so get a request
    // twice, which the same webhook-id lets it deduplicate.
    const send = () => {
      let answered = false;
      let resent = false;
      let response: http.IncomingMessage | null = null;
      const req = request(
        target,
        {
          method: 'POST',
          headers: { ...headers, 'content-length': Buffer.byteLength(body).toString() },
          agent: deliveries[opts.allowPrivate ? 'open' : 'guarded'][secure ? 'https' : 'http'],
          ...(opts.allowPrivate ? {} : { lookup: guardedLookup as never }),
        },
        (res) => {
          answered = true;
          response = res;
          const read = answerOf(res, 0);
          answer = read;
          let bytes = 0;
          res.on('data', (chunk: Buffer) => {
            bytes += chunk.length;
            if (bytes > opts.maxResponseBytes) res.destroy();
          });
          // Counted until the answer ends: its kept-alive socket may go on to carry another answer.
          res.on('end', () => stopCounting());
          res.on('close', () => settle(() => resolve(read)));
          res.on('error', () => settle(() => resolve(read)));
        },
      );
      current = req;
      const resend = () => {
        if (settled || answered || resent || !req.reusedSocket) return false;
        resent = true;
        send();
        return true;
      };
      // An upgrade (101) is an answer, and not a 2xx: its socket is closed at once.
      req.on('upgrade', (res, socket) => {
        answered = true;
        socket.destroy();
        settle(() => resolve(answerOf(res, 101)));
      });
      // The answer on the connection, from its first byte, is held to `onConnectionCap`: past it,
      // a body is cut off (the status read stands), and before the status there is no answer.
      const limit = onConnectionCap(opts.maxResponseBytes);
      req.on('socket', (socket: Socket) => {
        stopCounting();
        stopCounting = countReads(socket, limit, () => {
          if (response) return void response.destroy();
          settle(() => reject(tooMuchOnConnection(limit, opts.maxResponseBytes)));
          req.destroy();
        });
      });
      // An error once the status was read (a malformed body, a reset) does not undo the answer: its
      // body is dropped anyway, as the response's own 'error' and 'close' resolve it.
      req.on('error', (err: NodeJS.ErrnoException) => {
        // (Sent again already, on its close: the request sent again settles.)
        if (resent) return;
        if (answer === null && STALE_SOCKET_ERRORS.has(err.code ?? '') && resend()) return;
        settle(() => (answer !== null ? resolve(answer) : reject(outboundError(err, target))));
      });
      req.on('close', () => {
        if (!answered && !resent && !resend()) settle(() => reject(new Error('connection reset')));
      });
      req.end(body);
    };
    send();
  });
}

/** What a request sent on a kept-alive socket the receiver had closed fails with (a reset, or a hang-up). */
const STALE_SOCKET_ERRORS = new Set(['ECONNRESET', 'EPIPE', 'HPE_INVALID_EOF_STATE']);

/**
 * A TLS handshake that failed for a reason other than the certificate (`CertificateRefused`): the
 * server does not speak TLS on that port (plain HTTP behind an https URL), or shares no protocol
 * version or cipher with this client. In words, since "network error" sends a user looking at the
 * network; retried like one (a server being switched to TLS may answer on a later try).
 */
export const TLS_HANDSHAKE_FAILED = 'TLS handshake failed: the server does not speak TLS on this port (is the URL\'s scheme right?) or shares no TLS version or cipher with Synctide';

/** A network failure in words that name no address or port (no port scanning through errors). */
export function describeNetworkError(err: NodeJS.ErrnoException): string {
  if (err instanceof AddressNotAllowed || err instanceof ResponseTooLarge) return err.message;
  if (err.name === 'AbortError' || err.name === 'TimeoutError') return 'timed out';
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return HOST_NOT_FOUND_OR_NOT_ALLOWED;
    case 'ECONNRESET':
    case 'EPIPE':
    case 'HPE_INVALID_EOF_STATE':
      return 'connection reset';
    case 'ETIMEDOUT':
      return 'timed out';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case 'Z_DATA_ERROR':
    case 'Z_BUF_ERROR':
      return 'unreadable compressed body';
    case 'EPROTO':
      return TLS_HANDSHAKE_FAILED;
    default:
      // OpenSSL's handshake failures that Node names (ERR_SSL_WRONG_VERSION_NUMBER, a protocol
      // version or handshake alert of the server, ...); certificate codes never get here.
      return typeof err.code === 'string' && err.code.startsWith('ERR_SSL_') ? TLS_HANDSHAKE_FAILED : 'network error';
  }
}

/** Raised when an answer's body, after decompression, exceeds the byte cap of its request. */
export class ResponseTooLarge extends Error {
  override name = 'ResponseTooLarge';
  readonly code = 'ERESPONSETOOLARGE';
}

/**
 * Raised when a server answered, but not in HTTP Node's parser reads (an HPE_* parse error of the
 * answer): a header with a character HTTP does not allow, an invalid chunk size, a bad status
 * line, conflicting Content-Length headers, another protocol altogether; or in a content coding
 * it was not asked for (`decoderFor`), or switching protocols (101) to a bounded GET or token
 * request, which never asks for an upgrade. Its own error, not a
 * "network error": the server answered, and answers so on every retry (it is how the server, or
 * its front end, speaks), so callers fail for good, naming what was wrong and the host. Its
 * message says what the parser found, in words, with the parser's code; never the bytes answered
 * (they may echo a secret) nor the parser's own text.
 */
export class MalformedAnswer extends Error {
  override name = 'MalformedAnswer';
  readonly code: string = 'EMALFORMEDANSWER';
}

/**
 * Raised when an answer's header section passes the limit Node's HTTP parser reads
 * (`http.maxHeaderSize`: 16 KiB unless the process runs with --max-http-header-size): Node fails
 * the request with HPE_HEADER_OVERFLOW before anything of the answer is read. A `MalformedAnswer`
 * whose message names the limit.
 */
export class HeadersTooLarge extends MalformedAnswer {
  override name = 'HeadersTooLarge';
  override readonly code = 'EHEADERSTOOLARGE';
  constructor() {
    const limit = http.maxHeaderSize;
    const kib = limit % 1024 === 0 ? ` (${limit / 1024} KiB)` : '';
    super(`its response headers exceed ${limit} bytes${kib}, Node's limit on a response's header section (--max-http-header-size)`);
  }
}

/** What each parse error of an answer (llhttp's and Node's HPE_* codes) means, in words. */
const PARSE_ERROR_WORDS: Readonly<Record<string, string>> = {
  HPE_INVALID_CONSTANT: 'it does not begin with an HTTP/1.x status line: not an HTTP server, or not speaking HTTP/1.x',
  HPE_INVALID_VERSION: 'its status line has an invalid HTTP version',
  HPE_INVALID_STATUS: 'its status line has an invalid status code',
  HPE_INVALID_HEADER_TOKEN: 'a header name or value holds a character HTTP does not allow',
  HPE_UNEXPECTED_SPACE: 'a line holds a space where HTTP allows none',
  HPE_CR_EXPECTED: 'a line does not end in CRLF',
  HPE_LF_EXPECTED: 'a line does not end in CRLF',
  HPE_STRICT: 'it breaks the HTTP syntax',
  HPE_INVALID_CONTENT_LENGTH: 'its Content-Length header is not a number',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'its Content-Length headers conflict',
  HPE_INVALID_TRANSFER_ENCODING: 'its Transfer-Encoding header is invalid, or comes with a Content-Length',
  HPE_INVALID_CHUNK_SIZE: 'its chunked body has an invalid chunk size',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: "its chunked body's chunk extensions exceed Node's limit",
  HPE_CLOSED_CONNECTION: 'it sent more after a response that closes the connection',
};

/**
 * The `MalformedAnswer` that an error of an outbound request is, or null: any HPE_* code (Node's
 * HTTP parser refusing the answer) but an answer cut off (HPE_INVALID_EOF_STATE: the connection
 * ended mid-answer, a network failure worth another try); HPE_HEADER_OVERFLOW is
 * `HeadersTooLarge`. The one mapping of parse errors, for every bounded request (POST or GET).
 */
export function malformedAnswer(err: NodeJS.ErrnoException): MalformedAnswer | null {
  if (err instanceof MalformedAnswer) return err;
  const code = typeof err.code === 'string' ? err.code : '';
  if (!/^HPE_[A-Z0-9_]+$/.test(code) || code === 'HPE_INVALID_EOF_STATE') return null;
  if (code === 'HPE_HEADER_OVERFLOW') return new HeadersTooLarge();
  const words = PARSE_ERROR_WORDS[code] ?? "Node's HTTP parser refused it";
  return new MalformedAnswer(`its response is not valid HTTP: ${words} (${code})`);
}

/**
 * Raised when a server's TLS certificate is refused: expired or not valid yet, self-signed, from
 * an issuer not trusted, or for another host name. Its own error, not a "network error": the
 * server presents the same certificate on every retry until its operator replaces it (or, for an
 * issuer of its own, until this deployment trusts it: NODE_EXTRA_CA_CERTS), so callers fail for
 * good, as for a `MalformedAnswer`. Its message names the URL's host and the reason in words, with
 * Node's code (`tlsCode`); never an address or port.
 */
export class CertificateRefused extends Error {
  override name = 'CertificateRefused';
  readonly code = 'ECERTREFUSED';
  constructor(
    readonly host: string,
    readonly tlsCode: string,
    words: string,
  ) {
    super(`the certificate of ${host} ${words} (${tlsCode})`);
  }
}

/** An issuer the process does not trust, in words (Node's codes for a chain it cannot complete). */
const UNTRUSTED_ISSUER = 'is signed by an issuer that is not trusted (or the server does not send its intermediate certificates)';

/** What each certificate error of Node's TLS client (OpenSSL's verify codes, and Node's host name check) means, in words. */
const CERTIFICATE_WORDS: Readonly<Record<string, string>> = {
  CERT_HAS_EXPIRED: 'has expired',
  CERT_NOT_YET_VALID: 'is not valid yet',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'is self-signed, not trusted',
  SELF_SIGNED_CERT_IN_CHAIN: 'chains up to a self-signed certificate that is not trusted',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: UNTRUSTED_ISSUER,
  UNABLE_TO_GET_ISSUER_CERT: UNTRUSTED_ISSUER,
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: UNTRUSTED_ISSUER,
  ERR_TLS_CERT_ALTNAME_INVALID: 'is not valid for this host name',
  CERT_SIGNATURE_FAILURE: 'has a signature that does not verify',
  CERT_REVOKED: 'has been revoked',
  CERT_UNTRUSTED: 'is not trusted',
  CERT_REJECTED: 'is not trusted',
  INVALID_CA: 'chains up through a certificate that may not sign others',
  INVALID_PURPOSE: 'is not for TLS servers',
  PATH_LENGTH_EXCEEDED: 'chains up through more certificates than its issuer allows',
  ERROR_IN_CERT_NOT_BEFORE_FIELD: 'has an unreadable start date',
  ERROR_IN_CERT_NOT_AFTER_FIELD: 'has an unreadable end date',
  CERT_CHAIN_TOO_LONG: 'chains up through too many certificates',
};

/**
 * The `CertificateRefused` that an error of an outbound request to `host` is, or null: one of
 * Node's certificate verification codes (`CERTIFICATE_WORDS`). The one mapping of certificate
 * errors, for every bounded request (POST or GET).
 */
export function certificateRefused(err: NodeJS.ErrnoException, host: string): CertificateRefused | null {
  if (err instanceof CertificateRefused) return err;
  const code = typeof err.code === 'string' ? err.code : '';
  const words = Object.hasOwn(CERTIFICATE_WORDS, code) ? CERTIFICATE_WORDS[code] : undefined;
  return words === undefined ? null : new CertificateRefused(host, code, words);
}

/**
 * Whether an error of a bounded request is one the server gives on every retry until a person
 * fixes it: an answer Node's parser refuses (`MalformedAnswer`) or a certificate refused
 * (`CertificateRefused`). What callers fail for good on (a connector's `Permanent`, a token
 * request that is no refusal of the credential), naming it; a webhook delivery keeps its schedule.
 */
export function failsEveryTime(err: unknown): err is MalformedAnswer | CertificateRefused {
  return err instanceof MalformedAnswer || err instanceof CertificateRefused;
}

/** Errors of a bounded request that keep their own class (and words) rather than `describeNetworkError`'s. */
const OWN_WORDS = [AddressNotAllowed, ResponseTooLarge];

/**
 * What an error of a bounded request to `target` rejects with: a `MalformedAnswer`
 * (`malformedAnswer`), a `CertificateRefused` naming the URL's host (`certificateRefused`), an
 * `AddressNotAllowed` or `ResponseTooLarge` as it is, else an Error of `describeNetworkError`'s
 * words. The one mapping of every bounded request's errors.
 */
function outboundError(err: NodeJS.ErrnoException, target: URL): Error {
  const malformed = malformedAnswer(err);
  if (malformed) return malformed;
  const refused = certificateRefused(err, target.hostname.replace(/^\[|\]$/g, ''));
  if (refused) return refused;
  return OWN_WORDS.some((own) => err instanceof own) ? err : new Error(describeNetworkError(err));
}

/** The answer to a bounded GET: status, headers (lower-case names) and the whole body, decompressed. */
export interface BoundedAnswer {
  status: number;
  headers: Headers;
  body: Buffer;
}

/** A Content-Encoding a message may quote: short names of codings (a longer or odd value is not quoted). */
const QUOTABLE_CODING = /^[a-z0-9-]{1,20}(\s*,\s*[a-z0-9-]{1,20}){0,2}$/;

/** Sync flush: a truncated body yields what it has instead of failing on the end of input. */
const INFLATE_OPTIONS = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH };

/**
 * The `deflate` coding's decoder. RFC 9110's deflate is zlib-wrapped DEFLATE data, but some
 * servers send raw DEFLATE data under that name, and browsers and curl read both: the first two
 * bytes tell them apart (a zlib header names compression method 8 and is a multiple of 31 as a
 * big-endian number; see RFC 1950), and the body goes to the inflater that reads its form.
 */
class DeflateDecoder extends Transform {
  private inner: zlib.Inflate | zlib.InflateRaw | null = null;
  private head = Buffer.alloc(0);
  private ended = false;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    // Bytes after the compressed stream's end are no part of the body.
    if (this.ended) return done();
    if (this.inner) {
      this.inner.write(chunk, () => done());
      return;
    }
    this.head = Buffer.concat([this.head, chunk]);
    if (this.head.length < 2) return done();
    this.start();
    this.inner!.write(this.head, () => done());
  }

  override _flush(done: TransformCallback): void {
    if (this.ended) return done();
    if (!this.inner) {
      if (this.head.length === 0) return done();
      this.start();
      this.inner!.write(this.head);
    }
    this.inner!.once('end', () => done());
    this.inner!.end();
  }

  override _destroy(err: Error | null, done: (error: Error | null) => void): void {
    this.inner?.destroy();
    done(err);
  }

  private start(): void {
    const [cmf = 0, flg = 0] = this.head;
    const zlibWrapped = (cmf & 0x0f) === 8 && ((cmf << 8) | flg) % 31 === 0;
    const inner = zlibWrapped ? zlib.createInflate(INFLATE_OPTIONS) : zlib.createInflateRaw(INFLATE_OPTIONS);
    inner.on('data', (data: Buffer) => this.push(data));
    // The compressed stream's end is the body's end, as it is for the other codings' decoders.
    inner.on('end', () => {
      this.ended = true;
      this.push(null);
    });
    inner.on('error', (err) => this.destroy(err));
    this.inner = inner;
  }
}

/**
 * The decoder of a Content-Encoding, or null for identity; throws a `MalformedAnswer` on any
 * other coding (zstd, or two codings): one it was not asked for, answered so every time.
 */
function decoderFor(encoding: string | undefined): Transform | null {
  const coding = (encoding ?? '').trim().toLowerCase();
  if (coding === '' || coding === 'identity') return null;
  const options = INFLATE_OPTIONS;
  if (coding === 'gzip' || coding === 'x-gzip') return zlib.createGunzip(options);
  if (coding === 'deflate') return new DeflateDecoder();
  if (coding === 'br') return zlib.createBrotliDecompress();
  const quoted = QUOTABLE_CODING.test(coding) ? `'${coding}'` : 'that';
  throw new MalformedAnswer(`its response is in a content coding ${quoted} Synctide does not read (it asks for gzip, deflate or br)`);
}

/**
 * The most bytes a compressed body of at most `cap` bytes decoded may take as sent: the cap, and
 * what compressing bytes no coding shrinks adds to them (gzip and deflate 5 bytes a stored block of
 * up to 64 KiB, brotli a few a block of up to 16 MiB, and a header and trailer: far under 1/1024
 * more, and 1 KiB).
 */
function sentBodyCap(cap: number): number {
  return cap + Math.ceil(cap / 1024) + 1024;
}

/**
 * GETs `url` with `headers`: no redirect followed (a 3xx is answered as it is), at most
 * `timeoutMs` for the whole exchange (connect, headers and body), at most `maxBodyBytes` of body
 * AFTER decompression (gzip, deflate and br are asked for and decoded as a stream, so a small
 * compressed bomb stops at the cap instead of filling memory) and at most `sentBodyCap` of it as
 * sent (a compressed stream decoding to little or nothing stops there), at most `onConnectionCap`
 * of that on the connection (informational answers, headers and chunked framing included), and
 * `signal` aborting it. Unless `allowPrivate`, the URL must pass `outboundUrlProblem` and every
 * connection's resolved address must be public (checked at connect time). Errors carry short
 * messages that name no address: `outboundError`'s (`AddressNotAllowed`, `ResponseTooLarge`,
 * `MalformedAnswer` for an answer Node's HTTP parser refused or a 101 upgrade, `HeadersTooLarge`
 * for a header section past its limit, `CertificateRefused`, or an Error whose message is
 * `describeNetworkError`'s); an abort through `signal` rejects with the signal's reason.
 */
export function getBounded(
  url: string,
  headers: Record<string, string>,
  opts: { timeoutMs: number; maxBodyBytes: number; allowPrivate: boolean; signal?: AbortSignal; postBody?: string },
): Promise<BoundedAnswer> {
  const problem = outboundUrlProblem(url, opts.allowPrivate);
  if (problem) return Promise.reject(new AddressNotAllowed(`url ${problem}`));
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  const timeout = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
  if (opts.signal?.aborted) return Promise.reject(opts.signal.reason as Error);
  return new Promise<BoundedAnswer>((resolve, reject) => {
    let settled = false;
    const streams: { destroy(): void }[] = [];
    let stopCounting = () => {};
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      stopCounting();
      signal.removeEventListener('abort', onAbort);
      for (const stream of streams) stream.destroy();
      if (opts.signal?.aborted) return reject(opts.signal.reason as Error);
      reject(outboundError(err, target));
    };
    const onAbort = () => fail(timeout.aborted ? Object.assign(new Error('timed out'), { name: 'TimeoutError' }) : (signal.reason as Error));
    signal.addEventListener('abort', onAbort, { once: true });
    const post = opts.postBody !== undefined;
    const req = (secure ? https : http).request(target, {
      method: post ? 'POST' : 'GET',
      headers: {
        'accept-encoding': 'gzip, deflate, br',
        ...headers,
        ...(post && { 'content-length': Buffer.byteLength(opts.postBody!).toString() }),
      },
      agent: keepAlive[opts.allowPrivate ? 'open' : 'guarded'][secure ? 'https' : 'http'],
      ...(opts.allowPrivate ? {} : { lookup: guardedLookup as never }),
    });
    streams.push(req);
    let response: http.IncomingMessage | undefined;
    // Bytes after an answer read whole (a body longer than its Content-Length) are no part of it:
    // Node's parser refuses them as the start of a next answer just before the whole one ends,
    // and closes the connection; the answer read is the answer.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (response?.complete && malformedAnswer(err)) return;
      fail(err);
    });
    // The answer on the connection, from its first byte, is held to `onConnectionCap`: what it
    // carries besides the body (1xx answers, chunked framing) may go on without end.
    const limit = onConnectionCap(sentBodyCap(opts.maxBodyBytes));
    req.on('socket', (socket: Socket) => {
      stopCounting = countReads(socket, limit, () => fail(tooMuchOnConnection(limit, opts.maxBodyBytes)));
    });
    // An upgrade (101) is never asked for: Node drops its connection and emits neither a response
    // nor an error, so it would wait for the deadline. A malformed answer, as the server answers so
    // on every try.
    req.on('upgrade', (_res, socket: Socket) => {
      socket.destroy();
      fail(new MalformedAnswer('its response switches protocols (101 Switching Protocols), an upgrade Synctide never asks for'));
    });
    req.on('response', (res) => {
      response = res;
      streams.push(res);
      // Counted until the response ends: its kept-alive socket may carry another answer while a
      // decoder still reads this one.
      res.on('end', () => stopCounting());
      res.on('close', () => stopCounting());
      let decoder: ReturnType<typeof decoderFor>;
      try {
        decoder = decoderFor(res.headers['content-encoding']);
      } catch (err) {
        return fail(err as Error);
      }
      const source: Readable = decoder ? res.pipe(decoder) : res;
      if (decoder) {
        streams.push(decoder);
        // Held to its cap as sent too: a compressed stream may go on without end while decoding
        // to nothing (empty gzip members, empty DEFLATE blocks, brotli metadata), read and
        // decompressed for as long as the server sent it.
        const sentLimit = sentBodyCap(opts.maxBodyBytes);
        let sent = 0;
        res.on('data', (chunk: Buffer) => {
          sent += chunk.length;
          if (sent > sentLimit) {
            fail(new ResponseTooLarge(`the compressed response body exceeds ${sentLimit} bytes as sent (the cap of ${opts.maxBodyBytes} bytes, and what compressing may add to it)`));
          }
        });
      }
      const chunks: Buffer[] = [];
      let size = 0;
      source.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > opts.maxBodyBytes) return fail(new ResponseTooLarge(`the response body exceeds ${opts.maxBodyBytes} bytes`));
        chunks.push(chunk);
      });
      source.on('error', fail);
      res.on('error', fail);
      res.on('aborted', () => fail(Object.assign(new Error('connection reset'), { code: 'ECONNRESET' })));
      source.on('end', () => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        // A compressed stream that ended before its response did: what follows it is no part of
        // the body, and would be read (and dropped) for as long as the server sent it, past the
        // cap and the deadline. The response, and its connection, are closed instead.
        if (decoder && !res.complete) res.destroy();
        const answer = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) {
            try {
              answer.append(name, v);
            } catch {
              // a header value fetch's Headers refuses: left out
            }
          }
        }
        resolve({ status: res.statusCode ?? 0, headers: answer, body: Buffer.concat(chunks, size) });
      });
    });
    req.end(opts.postBody);
  });
}

/**
 * POSTs `body` to `url` under exactly `getBounded`'s bounds and checks, answering the whole body:
 * for exchanges whose answer matters (an OAuth token endpoint), unlike webhook deliveries.
 */
export function postBoundedForAnswer(
  url: string,
  body: string,
  headers: Record<string, string>,
  opts: { timeoutMs: number; maxBodyBytes: number; allowPrivate: boolean; signal?: AbortSignal },
): Promise<BoundedAnswer> {
  return getBounded(url, headers, { ...opts, postBody: body });
}
