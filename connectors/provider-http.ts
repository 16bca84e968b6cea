// The one outbound HTTP function of every connector (`providerGet`), and the text hygiene of what
// providers answer. Every provider request goes through here, so each one is bounded the same way:
// - the URL: https only (plain http only with PROVIDER_ALLOW_PRIVATE), no credentials in it, a
//   host from PROVIDER_HOSTS (or, with PROVIDER_ALLOW_PRIVATE, a loopback/private literal for test
//   servers);
// - the connection: its resolved address must be public, checked at connect time by
//   lib/outbound.ts (the same rule as webhooks), so a name re-pointed at an internal address
//   (DNS rebinding) is refused too;
// - redirects: followed only within the request's origin (GitHub answers 301 for a renamed
//   repository), never to another origin, where the token would go;
// - size and time: the body is streamed and capped after decompression (and as sent), the header
//   section is held to Node's limit (16 KiB: past it the task fails for good, naming the limit), an answer
//   Node's parser refuses (malformed HTTP) fails for good naming what was wrong, and the whole
//   request, the redirects it follows included, has one deadline;
// - TLS: the provider's certificate is verified against Node's trusted CAs (NODE_EXTRA_CA_CERTS
//   adds one); a certificate refused (expired, self-signed, untrusted issuer, another host name)
//   fails for good, naming the host and the reason;
// - errors: network failures are described in generic words (no address or port), and provider
//   text is redacted first, then cut, so a secret split by the cut cannot leak its prefix;
// - the shared rate budget of the credential: asked before each request, told what the provider
//   answered and what its rate-limit headers said.
import { isUtf8 } from 'node:buffer';
import { isIP } from 'node:net';
import { z } from 'zod';
import { AddressNotAllowed, CertificateRefused, getBounded, isPublicAddress, MalformedAnswer, ResponseTooLarge } from '../lib/outbound';
import { redactValues } from '../policy/redact';
import { parseExactJson } from '../policy/exact-json';
import { MAX_BUDGET_COUNT, rateLimitHold, type ProviderAnswer, type StatedReset } from '../policy/rate-budget';
import { answeredAtMs, retryAfterSeconds } from '../policy/retry-after';
import { Permanent, Transient, type ProviderPolicy, type RequestBudget } from './types';

export type { ProviderPolicy } from './types';

const MIB = 1024 * 1024;

/**
 * The policy of a process that configured none: api.github.com and github.com (a GitHub OAuth
 * app's token URL) only (PROVIDER_HOSTS' default, lib/config.ts), https only, public addresses
 * only, 10 MiB per response, 30 s per request, 1 MiB per record, 100,000 pages and 10,000,000
 * records per task.
 */
export const DEFAULT_PROVIDER_POLICY: ProviderPolicy = Object.freeze({
  allowedHosts: Object.freeze(['api.github.com', 'github.com']),
  allowPrivate: false,
  maxResponseBytes: 10 * MIB,
  timeoutMs: 30_000,
  maxRecordBytes: MIB,
  maxPagesPerTask: 100_000,
  maxRecordsPerTask: 10_000_000,
});

/** Longest provider text (error bodies, messages) an error message carries. */
export const MAX_ERROR_TEXT = 500;

/**
 * The longest next page URL a connector follows, in characters of the absolute URL: 16 KiB, the
 * request head Node's HTTP server takes by default and twice the request line nginx and Apache
 * take (8 KiB), so no provider's front end serves a longer one (it answers 414 or 431). A next URL
 * (a Link, a body's next URL, the URL a cursor makes) becomes the page token: stored with the
 * task's progress, heartbeated to Temporal (whose payloads fail past 2 MiB: each attempt of the
 * task then failed after one page, retried as an unknown error) and known again by the paging
 * loop. A longer one fails the task for good: the provider answers it the same way on every retry.
 */
export const MAX_NEXT_URL_CHARS = 16 * 1024;

/** Redirects followed within one origin before giving up. */
const MAX_REDIRECTS = 5;

/**
 * What is wrong with `raw` as a provider URL under `policy`, or null: it must be https (http too
 * with allowPrivate), carry no credentials, and name an allowed host.
 */
export function providerUrlProblem(raw: string, policy: ProviderPolicy): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute https URL';
  }
  if (url.username || url.password) return 'must not carry credentials (user:password@)';
  if (url.protocol !== 'https:' && !(policy.allowPrivate && url.protocol === 'http:')) {
    return policy.allowPrivate ? 'must be an http(s) URL' : 'must be an https URL';
  }
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (policy.allowedHosts.includes(host)) return null;
  const testServer = host === 'localhost' || (isIP(host) !== 0 && !isPublicAddress(host));
  if (policy.allowPrivate && testServer) return null;
  return `host '${host}' is not an allowed provider host (PROVIDER_HOSTS)`;
}

/** GitHub token shapes (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_) wherever they appear. */
const KNOWN_TOKENS = /\b(?:gh[pousr]_[A-Za-z0-9_]{16,}|github_pat_[A-Za-z0-9_]{16,})/g;
/** `Bearer <value>`, `token <value>`, `Basic <value>`: the value of an auth scheme. */
const AUTH_VALUES = /\b(Bearer|token|Basic)(\s+)([A-Za-z0-9_\-.~+/]{8,}=*)/gi;

/**
 * The text of an `AUTH_VALUES` match, its value redacted. A lower-case word after `token` is prose
 * ("the token endpoint answered", "token expired"), not a token value: kept, so messages stay
 * readable. Every value of the connection's credentials is redacted exactly anyway.
 */
const redactAuthValue = (match: string, scheme: string, space: string, value: string) =>
  scheme.toLowerCase() === 'token' && /^[a-z]+$/.test(value) ? match : `${scheme}${space}[redacted]`;

/**
 * `text` with every secret replaced by `[redacted]`: each value of `secrets` as it is or in any URL
 * encoding of it (`redactValues`), known token shapes, and the value after `Bearer`, `token` or
 * `Basic` (a lower-case word after `token` is prose, kept: `redactAuthValue`). Always redact before
 * cutting.
 */
export function redactSecrets(text: string, secrets: readonly string[] = []): string {
  return redactValues(text, secrets).replace(KNOWN_TOKENS, '[redacted]').replace(AUTH_VALUES, redactAuthValue);
}

/**
 * The fewest characters of a credential value looked for as a secret: a shorter one (`1`, `abc`)
 * is a page number or a flag as often as a password, and redacting or removing it would garble
 * text and protect nothing.
 */
export const MIN_SECRET_CHARS = 4;

/** Credential keys that name an account rather than hold a secret (left out of `credentialSecrets`). */
const IDENTITY_KEYS = /^(user(name)?|login|email|account(_id)?|client_id|app_id|kind)$/i;

/**
 * Every secret value of a connection's credentials, in each form a request may carry it: as it
 * is, URL-encoded (path or query, `%20` and `+` for a space), and for a username and password the
 * base64 of `username:password` (HTTP Basic). Values under identity keys (username, login, email…)
 * and values under MIN_SECRET_CHARS characters are left out: redacting those would garble messages and protect
 * nothing. What an error becoming an activity failure is redacted with.
 */
export function credentialSecrets(credentials: Record<string, unknown> | null | undefined): string[] {
  if (!credentials) return [];
  const out = new Set<string>();
  const visit = (value: unknown, key: string) => {
    if (typeof value === 'string') {
      if (value.length < MIN_SECRET_CHARS || IDENTITY_KEYS.test(key)) return;
      out.add(value);
      out.add(encodeURIComponent(value));
      out.add(new URLSearchParams({ v: value }).toString().slice(2));
    } else if (Array.isArray(value)) {
      for (const item of value) visit(item, key);
    } else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) visit(v, k);
    }
  };
  visit(credentials, '');
  const { username, password } = credentials;
  if (typeof username === 'string' && typeof password === 'string') out.add(Buffer.from(`${username}:${password}`, 'utf8').toString('base64'));
  // Longest first: a secret that contains another is redacted whole.
  return [...out].sort((a, b) => b.length - a.length);
}

/** `text` cut to `max` characters (an ellipsis marks the cut). Cut only redacted text. */
export function cutText(text: string, max = MAX_ERROR_TEXT): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * The JSON body of a provider answer, its numbers as the provider wrote them (`parseExactJson`, which
 * reads JSON nested at any depth). A body that is not JSON (truncated, or a proxy's HTML page) is
 * `Transient`, worth another try: `unreadable` says whose, and the status follows it.
 */
export function jsonBody(answer: { status: number; text: string }, unreadable: string): unknown {
  try {
    return parseExactJson(answer.text);
  } catch {
    throw new Transient(`${unreadable} (${answer.status})`);
  }
}

/** The `charset` parameter of a Content-Type, quoted or not. */
const CHARSET = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]+))/i;

/**
 * WHATWG's windows-1252 (its index) for bytes 0x80-0x9F, in byte order: the euro sign, curly
 * quotes, dashes and the letters windows-1252 puts there; the five bytes it leaves undefined (0x81,
 * 0x8D, 0x8F, 0x90, 0x9D) are the C1 control of their value, as WHATWG decodes them, so every byte
 * stays one character of its own. Every other byte is the Latin-1 character of its value.
 */
const WINDOWS_1252_C1 =
  '\u20AC\u0081\u201A\u0192\u201E\u2026\u2020\u2021\u02C6\u2030\u0160\u2039\u0152\u008D\u017D\u008F' +
  '\u0090\u2018\u2019\u201C\u201D\u2022\u2013\u2014\u02DC\u2122\u0161\u203A\u0153\u009D\u017E\u0178';

/**
 * `body` read as windows-1252 (WHATWG's encoding of that name, which the labels iso-8859-1, latin1,
 * us-ascii and ascii name too). Not by TextDecoder: Node 20's decodes 0x80-0x9F as Latin-1's C1
 * controls (0x80 as U+0080, not the euro sign). A 32-character table rather than a library:
 * iconv-lite (in the tree) reads the five undefined bytes as U+FFFD, losing them, and its
 * iso-8859-1 is Latin-1, not WHATWG's windows-1252.
 */
function windows1252Text(body: Buffer): string {
  return body.toString('latin1').replace(/[\x80-\x9f]/g, (c) => WINDOWS_1252_C1[c.charCodeAt(0) - 0x80]!);
}

/** A provider's body as text, and what kept it from being read exactly, if anything (see decodeBody). */
export interface DecodedBody {
  text: string;
  /** Why some bytes of the body are no character of the encoding it was read in (`text` has U+FFFD for them). */
  problem?: string;
}

/**
 * A provider's body as text. JSON is UTF-8 (RFC 8259), so a body that is valid UTF-8 is read so,
 * whatever charset its Content-Type names (servers name `ISO-8859-1` on everything by default). A
 * byte order mark is no part of the text (RFC 8259 lets a reader ignore one; .NET servers send it),
 * and names UTF-16 when it is one. A body that is not UTF-8 is read in the charset its Content-Type
 * names (an older API answering Latin-1 as `charset=iso-8859-1`: read as UTF-8, every accented
 * letter would be lost to U+FFFD; windows-1252 and the labels WHATWG reads as it, iso-8859-1,
 * latin1 and us-ascii among them, by windows1252Text), as is one whose charset is UTF-16 (whose
 * ASCII is valid UTF-8, NULs between the letters). No byte is guessed at: a body that is not UTF-8
 * and names no charset, one no decoder knows or UTF-8, or one with a byte its named charset (or its
 * byte order mark's) does not hold, is read with U+FFFD for such bytes and `problem` says so; a
 * connector storing what the body holds refuses it (an error answer's text is only quoted).
 * `charset` (a label TextDecoder knows, configured for a provider that answers in another charset
 * and never names it) stands in for the charset of a Content-Type that names none: read by the
 * same rules as one it names.
 */
export function decodeBody(body: Buffer, contentType: string | null, charset?: string): DecodedBody {
  /** `bytes` in `encoding`, or, with `problem`, as it reads them with U+FFFD for what it does not hold. */
  const strictly = (encoding: string, bytes: Uint8Array, problem: string): DecodedBody => {
    try {
      // TextDecoder leaves out the byte order mark it decodes from.
      return { text: new TextDecoder(encoding, { fatal: true }).decode(bytes) };
    } catch {
      return { text: new TextDecoder(encoding).decode(bytes), problem };
    }
  };
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) return strictly('utf-8', body, 'the body is not UTF-8 after its UTF-8 byte order mark');
  if (body[0] === 0xff && body[1] === 0xfe) return strictly('utf-16le', body, 'the body is not UTF-16 after its UTF-16 byte order mark');
  if (body[0] === 0xfe && body[1] === 0xff) return strictly('utf-16be', body, 'the body is not UTF-16 after its UTF-16 byte order mark');
  const match = CHARSET.exec(contentType ?? '');
  const fromHeader = (match?.[1] ?? match?.[2])?.trim();
  const configured = fromHeader === undefined && charset !== undefined;
  const label = fromHeader ?? charset;
  const whose = configured ? 'the charset configured for it (charset)' : 'the charset its Content-Type names';
  let named: string | null = null;
  try {
    named = label === undefined ? null : new TextDecoder(label).encoding;
  } catch {
    // A charset no decoder knows.
  }
  const utf16 = named !== null && named.startsWith('utf-16');
  if (!utf16 && isUtf8(body)) return { text: body.toString('utf8') };
  if (named === 'windows-1252') return { text: windows1252Text(body) };
  if (named !== null && named !== 'utf-8') return strictly(named, body, `the body is not UTF-8 and not valid ${named}, ${whose}`);
  const problem =
    label === undefined
      ? `the body is not UTF-8 and its Content-Type ('${cutText(contentType ?? '', 100)}') names no charset`
      : named === null
        ? configured
          ? `the body is not UTF-8 and the charset configured for it (charset) is one no decoder here knows ('${cutText(label, 100)}')`
          : `the body is not UTF-8 and its Content-Type names a charset no decoder here knows ('${cutText(label, 100)}')`
        : `the body is not UTF-8, ${whose}`;
  return { text: body.toString('utf8'), problem };
}

/** Provider text fit for an error message: redacted first, then cut to MAX_ERROR_TEXT. */
export function providerText(text: string, secrets: readonly string[] = []): string {
  return cutText(redactSecrets(text, secrets));
}

/** A provider's answer: status, headers and body as text (2xx or not; of 3xx only 304 reaches here). */
export interface ProviderResponse {
  status: number;
  headers: Headers;
  text: string;
  /**
   * Why the body could not be read exactly (decodeBody's `problem`: `text` has U+FFFD for bytes of
   * it), if so.
   */
  undecodable?: string;
  /** The URL that answered (a same-origin redirect may have moved it). */
  url: string;
}

/** What one provider request needs. */
export interface ProviderRequest {
  headers: Record<string, string>;
  policy?: ProviderPolicy;
  signal?: AbortSignal;
  /** Values to redact from any error text (the connection's token). */
  secrets?: readonly string[];
  /** Prefix of error messages, e.g. "github connector: fetching 'octo/hello'". */
  context: string;
  /** The shared budget of the credential: asked before each request, told what the answer said. */
  budget?: RequestBudget;
  /** Where the provider states its remaining requests (read into the budget). */
  rateLimitHeaders?: RateLimitHeaders;
  /** The charset a body whose Content-Type names none is read in (decodeBody), if configured. */
  charset?: string;
}

/** Where a provider states its rate limit in response headers. */
export interface RateLimitHeaders {
  /** Header with the requests left in the current window, e.g. `x-ratelimit-remaining`. */
  remaining: string;
  /** Header with the window's reset, e.g. `x-ratelimit-reset`. */
  reset: string;
  /** `epoch_seconds` (GitHub: a Unix time) or `delta_seconds` (seconds from now). */
  resetFormat: 'epoch_seconds' | 'delta_seconds';
}

/** GitHub's rate-limit headers. */
export const GITHUB_RATE_LIMIT_HEADERS: RateLimitHeaders = {
  remaining: 'x-ratelimit-remaining',
  reset: 'x-ratelimit-reset',
  resetFormat: 'epoch_seconds',
};

/**
 * The remaining count and reset a provider stated in `headers`, each null when absent or
 * unreadable: a reset in epoch seconds as a time, one in seconds from now as that many seconds
 * (StatedReset: the budget counts them on the database's clock).
 */
export function readRateLimit(headers: Headers, names: RateLimitHeaders): Omit<ProviderAnswer, 'status'> {
  const remainingText = headers.get(names.remaining)?.trim() ?? '';
  const resetText = headers.get(names.reset)?.trim() ?? '';
  const remaining = /^\d+$/.test(remainingText) ? Number(remainingText) : null;
  let reset: StatedReset | null = null;
  if (/^\d+(\.\d+)?$/.test(resetText)) {
    const value = Number(resetText);
    reset = names.resetFormat === 'epoch_seconds' ? { at: new Date(value * 1000) } : { inSeconds: value };
  }
  return { remaining, reset };
}

/** A whole number from `min` to MAX_BUDGET_COUNT (the largest the budget's statements take). */
function budgetCount(min: number) {
  const rule = `must be a whole number from ${min} to ${MAX_BUDGET_COUNT}`;
  return z.number({ error: rule }).int(rule).min(min, rule).max(MAX_BUDGET_COUNT, rule);
}

/**
 * A connection's own bounds on its credential's shared rate budget (`config.rate_budget`), over the
 * provider's: requests kept in reserve (never spent: the budget waits for the reset instead), and
 * a ceiling of requests per second and/or per minute across every worker using the credential.
 */
export const rateBudgetConfigSchema = z
  .strictObject({ reserve: budgetCount(0).optional(), per_second: budgetCount(1).optional(), per_minute: budgetCount(1).optional() })
  .meta({
    description:
      "Overrides this provider's shared rate budget for this connection's credential: `reserve` (requests never spent; the sync waits for the provider's reset instead), `per_second` / `per_minute` (a ceiling across all workers)",
  });

/** A validated `config.rate_budget`. */
export type RateBudgetConfig = z.output<typeof rateBudgetConfigSchema>;

/**
 * GETs `url` for a connector under its policy (see the module comment). Answers any non-3xx
 * status with its body; throws `Permanent` for a refused URL or address, a cross-origin (or
 * endless) redirect, a body over the cap, a header section over Node's limit and any other answer
 * Node's parser refuses (naming the provider's host), a TLS certificate refused (naming the host and
 * why), `Transient` for network failures and timeouts (in
 * words that name no address), and the signal's reason when `signal` aborts.
 */
export async function providerGet(url: string, request: ProviderRequest): Promise<ProviderResponse> {
  const policy = request.policy ?? DEFAULT_PROVIDER_POLICY;
  const secrets = request.secrets ?? [];
  const fail = (kind: 'permanent' | 'transient', reason: string) =>
    kind === 'permanent' ? new Permanent(providerText(`${request.context}: ${reason}`, secrets)) : new Transient(providerText(`${request.context}: ${reason}`, secrets));
  const timedOut = () => fail('transient', `timed out after ${policy.timeoutMs / 1000} s (PROVIDER_REQUEST_TIMEOUT_SECONDS)`);
  let current = url;
  // One deadline for the request and the redirects it follows: each exchange gets what the ones
  // before it left (waits for the rate budget between them are no part of it).
  let spentMs = 0;
  for (let redirects = 0; ; redirects++) {
    const problem = providerUrlProblem(current, policy);
    if (problem) throw fail('permanent', `refusing the provider URL: it ${problem}`);
    await request.budget?.acquire(request.signal);
    const leftMs = Math.ceil(policy.timeoutMs - spentMs);
    if (leftMs <= 0) throw timedOut();
    const startedAt = performance.now();
    let answer;
    try {
      answer = await getBounded(current, request.headers, {
        timeoutMs: leftMs,
        maxBodyBytes: policy.maxResponseBytes,
        allowPrivate: policy.allowPrivate,
        ...(request.signal ? { signal: request.signal } : {}),
      });
    } catch (err) {
      if (request.signal?.aborted) throw request.signal.reason ?? err;
      if (err instanceof AddressNotAllowed) throw fail('permanent', `refused: ${err.message}`);
      if (err instanceof ResponseTooLarge) throw fail('permanent', `${err.message} (PROVIDER_MAX_RESPONSE_BYTES)`);
      // Permanent, as a body over its cap: a provider answering what Node's parser refuses (a header
      // section past its limit, a bad header, chunk or status line) answers every retry so;
      // retried as a network error it only spent the job's retries, with no word of why. The host
      // is the configured one (no resolved address, no port, nothing else of the URL).
      if (err instanceof MalformedAnswer) throw fail('permanent', `the provider at '${new URL(current).hostname}' answered, but ${err.message}`);
      // Permanent too: the provider presents the same certificate on every retry until its
      // operator replaces it (or this deployment trusts its issuer: NODE_EXTRA_CA_CERTS).
      if (err instanceof CertificateRefused) throw fail('permanent', `refusing the provider's TLS certificate: ${err.message}`);
      const words = (err as Error).message;
      throw words === 'timed out' ? timedOut() : fail('transient', `network error: ${words}`);
    } finally {
      spentMs += performance.now() - startedAt;
    }
    if (request.budget) {
      const stated = request.rateLimitHeaders ? readRateLimit(answer.headers, request.rateLimitHeaders) : { remaining: null, reset: null };
      // A Retry-After date is one of the provider's clock: counted from its answer's Date.
      const retryAfter = retryAfterSeconds(answer.headers.get('retry-after'), answeredAtMs(answer.headers.get('date'), Date.now()));
      await request.budget.report({ status: answer.status, ...stated, holdSeconds: rateLimitHold(answer.status, retryAfter) });
    }
    // 304 Not Modified answers a conditional request; it is not a redirect.
    if (answer.status < 300 || answer.status >= 400 || answer.status === 304) {
      const { text, problem } = decodeBody(answer.body, answer.headers.get('content-type'), request.charset);
      return { status: answer.status, headers: answer.headers, text, ...(problem !== undefined && { undecodable: problem }), url: current };
    }
    const location = answer.headers.get('location');
    let next: URL | null = null;
    try {
      next = location ? new URL(location, current) : null;
    } catch {
      next = null;
    }
    if (!next) throw fail('permanent', `the provider answered a redirect (${answer.status}) without a usable Location`);
    if (next.origin !== new URL(current).origin) {
      throw fail('permanent', `refusing a redirect (${answer.status}) to another origin (${next.origin})`);
    }
    if (redirects >= MAX_REDIRECTS) throw fail('permanent', `more than ${MAX_REDIRECTS} redirects`);
    current = next.href;
  }
}

/**
 * Seconds to wait per a `Retry-After` value (delay-seconds or an HTTP-date; anything else is
 * ignored: undefined), at `nowMs` (now unless given). The rule: `retryAfterSeconds`.
 */
export function parseRetryAfter(value: string | null, nowMs: number = Date.now()): number | undefined {
  return retryAfterSeconds(value, nowMs);
}
