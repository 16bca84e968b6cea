// The declarative `http` connector: a provider described by the connection's config instead of
// code. The config names the base URL, the auth scheme (its secret comes from the credentials),
// each resource (path, where the records are in the JSON body, their id and updated-at fields,
// the `since` parameter and its format), the pagination style (Link header, next URL in the body,
// cursor field + parameter, page number, offset) and the rate-limit headers. Validation errors
// name the key at fault.
//
// Every request goes through the connectors' one HTTP path (`providerGet`): the shared rate budget
// applies, and failures map to the typed errors as for GitHub (401/403 → Permanent unless they
// carry rate-limit signals; 429, and 503 with Retry-After → RateLimited; other 5xx, 408, network
// errors, unreadable JSON → Transient; other 4xx → Permanent). A page body whose bytes cannot all
// be read as text (not UTF-8, and in no charset it names that holds them) is Permanent (jsonOf).
//
// The page token is base64url JSON { url, read?, listing, lastAt?, exclusive?, head?, low?, upper?,
// falling?, catchup? }: the exact next URL, whatever the pagination style, for page numbers and
// offsets which read of the listing it belongs to (see positionNext), so the paging loop's guard
// sees a repeated page as a repeated URL and read, and a digest of the listing it pages
// (`listing`); by keyset, what a step needs to tell an exclusive `since` (see positionNext); by
// links or cursors, whether the listing came newest first so far and, on a catch-up pass, where it
// stands (see catchUpOn; a catch-up page is another page than the pass's own of the same URL). A
// task resumes from its stored token after its connection's config may have changed: a token of
// another listing starts the pass again from its first page (the rest of the old listing says
// nothing of what the new one serves, and its cursor would pass records the new one never read),
// and so does one of another pagination of the resource (its next URL and read carry the old
// paging: a page number counted from another start, another size or parameter, skips or repeats
// records under the new one; see tokenDigest). Tokens written before the digest, or before
// newest-first listings were noted, go on as they did (such a pass ends with no catch-up).
//
// Next URLs must share the origin of `base_url` (the credentials are never sent elsewhere), and a
// query-parameter secret is added at request time only: it never appears in a token, a stored
// page, a log line or an error. A next URL goes into the token as the provider wrote it, less the
// parameters that carry a secret (withoutSecrets).
//
// Links, next URLs and cursors end when absent, and at a page with no records whose next URL is
// its own (a tail position given back). One the provider then answers 400, 404 or 410 (gone: a
// deleted record's cursor, an expired one) starts the pass again from its first page (POSITION_GONE). Page numbers and offsets end at the first EMPTY page, never at a short one: providers cap the
// page size silently (per_page at most 100, say), so a page with fewer records than asked for may
// still be followed by more. Offsets step by the records a page actually served. A short page
// costs one more request in the same fetch (the next position, asked for at once): empty, it is
// the end; else its records join the page's.
//
// Paging while the provider changes: a pass serves every record the provider has, unchanged, for
// the whole pass. Provider links and cursors are taken as keyset positions (`stable`, default
// true); over a listing that comes newest first, a record changed mid-pass moves to the head,
// behind the position, so such a pass ends with catch-up passes over the head (catchUpOn). Page
// numbers and offsets page by keyset under `order: 'change_ascending'` and read what they page by
// position again until two reads agree (`max_reads`). A listing that cannot promise
// it (`stable: false`, `max_reads: 1`) is declared not consistent: full syncs delete only what
// `recheck` confirms gone by the resource's `item` lookup (nothing without one).
//
// Paths into JSON are a subset of JSONPath (`$`, `data.items`, `$.meta.next`, `links[0].href`,
// `$['@odata.nextLink']` for a name with a dot in it), read by a few lines of code rather than a
// JSONPath library: a config is user input, and a subset with no filters, wildcards, descendant
// search or script expressions cannot run anything. A malformed path is refused with the config.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { storableChangeTime } from '../policy/change-time';
import { JsonNumber, numberValueText } from '../policy/exact-json';
import { isBareHttpUrl, keyPath, parseConnectorConfig, refusedHeaderProblem } from './config-errors';
import { nextLink } from './link-header';
import { encodePageToken, pageTokenBody } from './page-token';
import { answeredAtMs } from '../policy/retry-after';
import {
  cutText, GITHUB_RATE_LIMIT_HEADERS, jsonBody, MAX_NEXT_URL_CHARS, MIN_SECRET_CHARS, parseRetryAfter, providerGet, providerText, rateBudgetConfigSchema, readRateLimit, redactSecrets, type RateLimitHeaders,
} from './provider-http';
import { Permanent, RateLimited, sinceOf, Transient, Unauthorized, type Connector, type ConnectorError, type ConnectorRecord, type FetchPageInput, type FetchPageResult } from './types';

const USER_AGENT = 'synctide-http-connector/0.1';
const DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60;

// ---------------------------------------------------------------------------------------------
// Config

// The one grammar of paths into JSON (see the module comment). A step is a name (`.name`, no dot
// before the first step), a name in quotes and brackets (`['@odata.nextLink']`, `["a.b"]`: any
// characters, `\'`, `\"` and `\\` escaped), or an index (`[0]`). JSON_PATH decides what a config
// may hold (and the OpenAPI pattern shows it); PATH_STEP reads the steps of a path it accepted.
const PATH_NAME = String.raw`([A-Za-z0-9_-]+)`;
const PATH_BRACKET = String.raw`\[(?:(\d+)|'((?:[^'\\]|\\['\\])*)'|"((?:[^"\\]|\\["\\])*)")\]`;
const JSON_PATH = new RegExp(String.raw`^\$$|^(?:\$\.?)?(?:${PATH_NAME}|${PATH_BRACKET})(?:\.${PATH_NAME}|${PATH_BRACKET})*$`);
const PATH_STEP = new RegExp(String.raw`\.?${PATH_NAME}|${PATH_BRACKET}`, 'g');
const PATH_EXAMPLES = `such as 'data.items', '$' or "$['@odata.nextLink']" (dotted names, quoted names in brackets and [n] indexes)`;
const jsonPath = (what: string) =>
  z
    .string({ error: `must be a JSON path to ${what}, ${PATH_EXAMPLES}` })
    .regex(JSON_PATH, `must be a JSON path to ${what}, ${PATH_EXAMPLES}`)
    .meta({
      description:
        `A JSON path to ${what}: \`$\` (the value itself), dotted names (\`data.items\`, \`$.meta.next\`), a name with any other characters ` +
        'in quotes and brackets (`$[\'@odata.nextLink\']` or `$["@odata.nextLink"]`, a quote or backslash in it escaped by a backslash) and `[n]` indexes',
    });
const paramName = z.string({ error: 'must be a query parameter name' }).min(1, 'must be a query parameter name');
const positiveInt = (max = 10_000) =>
  z.number({ error: `must be an integer between 1 and ${max}` }).int(`must be an integer between 1 and ${max}`).min(1, `must be an integer between 1 and ${max}`).max(max, `must be an integer between 1 and ${max}`);

/** A request header name a config may set: a token of letters, digits and '-', none of REFUSED_HEADERS. */
const headerName = z
  .string({ error: 'must be a header name' })
  .regex(/^[A-Za-z0-9-]+$/, 'must be a header name')
  .superRefine((name, ctx) => {
    const problem = refusedHeaderProblem(name);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/**
 * A header the connector reads from answers (`rate_limit`): an HTTP field name (RFC 9110 token);
 * any other name makes every lookup throw.
 */
const readHeaderName = z.string({ error: 'must be a header name' }).regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be a header name');

/**
 * A fixed header's value: tabs, visible ASCII and Latin-1 (what Node's HTTP client sends); a line
 * break or a character past Latin-1 would fail every request. Never quoted: it is the tenant's text.
 */
const headerValue = z
  .string({ error: 'must be a string' })
  .regex(/^[\t\x20-\x7e\x80-\xff]*$/, 'must be a header value (tabs, visible ASCII and Latin-1 text; no line breaks or other control characters)');

const authSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('none') }),
    z.strictObject({ type: z.literal('bearer') }).meta({ description: '`Authorization: Bearer <credentials.token>`' }),
    z.strictObject({ type: z.literal('header'), name: headerName }).meta({ description: '`<name>: <credentials.token>` (not a hop-by-hop, framing, host-routing or cookie header)' }),
    z.strictObject({ type: z.literal('basic') }).meta({ description: 'HTTP Basic with `credentials.username` and `credentials.password`' }),
    z.strictObject({ type: z.literal('query'), name: paramName }).meta({ description: '`?<name>=<credentials.token>`, added to each request only' }),
  ],
  { error: "must be an object whose type is one of 'none', 'bearer', 'header', 'basic', 'query'" },
);

// Positions (page numbers, offsets) shift when the provider's list changes during a pass: a record
// removed from a page already read moves the next one back onto it, unread. A listing paged by
// position is therefore read again from where the read began until two reads in a row served the
// same records in the same order; an item present for the whole of such a pair was served by it
// (a record leaves its place only by deletion, or by a change that moves it to the end of a
// change-time order). With `order: 'change_ascending'` a read ends at each keyset step (below),
// so only records sharing one change time over more than one page are read twice (as is the
// listing's last change time: its page and the empty page after it).
const maxReads = z
  .number({ error: 'must be an integer between 1 and 20' })
  .int('must be an integer between 1 and 20')
  .min(1, 'must be an integer between 1 and 20')
  .max(20, 'must be an integer between 1 and 20')
  .default(5)
  .meta({
    description:
      'Reads of a listing paged by position (from where the read began) until two in a row agree, so records that shift between pages while the ' +
      'provider changes are not missed; a listing still changing after this many reads fails the task as transient (retried). 1: read once, ' +
      "not safe under change: records can be skipped, so full syncs delete only what the resource's `item` lookup confirms gone.",
  });

// A provider's own next links and cursors are taken as keyset positions (after this record), as
// real providers' are: a record present for the whole pass and unchanged is served. One changed
// meanwhile moves to the end of a change-time order: ahead of the position in an ascending one,
// behind it in a newest-first one, whose pass therefore reads the head again at its end (catchUpOn).
// One that hides a page number or offset in them is declared `stable: false`.
const stableLinks = z
  .boolean({ error: 'must be true or false' })
  .default(true)
  .meta({
    description:
      "Whether the provider's next links/cursors are stable positions (keyset: after this record), so a full sync may delete what it did not see. " +
      'A listing seen to come newest first (by `updated_at`: no record newer than the one before it, some older; nothing to declare) is read ' +
      'again from its first page at the end of a pass of more than one page, down to the newest change that page showed (a catch-up pass), since a record ' +
      'changed meanwhile moves to its head, behind the position. ' +
      'false when they are page numbers or offsets in disguise (they shift while the provider changes): full syncs then delete only what ' +
      "the resource's `item` lookup confirms gone (nothing without one).",
  });

const paginationSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('none') }).meta({ description: 'One page per resource' }),
    z.strictObject({ type: z.literal('link_header'), stable: stableLinks }).meta({ description: 'The `Link` header\'s rel="next" URL (RFC 8288)' }),
    z.strictObject({ type: z.literal('next_url'), path: jsonPath('the next URL'), stable: stableLinks })
      .meta({ description: 'A next URL (absolute or relative) in the body; absent or null ends' }),
    z.strictObject({ type: z.literal('cursor'), path: jsonPath('the next cursor'), param: paramName, stable: stableLinks })
      .meta({ description: 'A cursor in the body, sent back as query parameter `param`; absent, null, empty or 0 ends (so does a page with no records whose next URL is its own)' }),
    z.strictObject({
      type: z.literal('page_number'), param: paramName.default('page'), start: z.number().int().min(0).default(1), size_param: paramName.optional(), size: positiveInt().optional(),
      max_reads: maxReads,
    }).meta({ description: 'Page numbers from `start`; the first page with no records ends (a short page does not: providers cap page sizes)' }),
    z.strictObject({ type: z.literal('offset'), param: paramName.default('offset'), limit_param: paramName.default('limit'), limit: positiveInt(), max_reads: maxReads })
      .meta({ description: 'Offsets from 0, each the previous plus the records it served; the first page with no records ends (a short page does not: providers cap page sizes)' }),
  ],
  { error: "must be an object whose type is one of 'none', 'link_header', 'next_url', 'cursor', 'page_number', 'offset'" },
);

const sinceSchema = z.strictObject({
  param: paramName,
  format: z.enum(['iso8601', 'epoch_seconds', 'epoch_millis', 'date'], { error: "must be one of 'iso8601', 'epoch_seconds', 'epoch_millis', 'date'" }).default('iso8601'),
});

/**
 * The charset a provider answers in without naming it: a label TextDecoder knows (WHATWG's, e.g.
 * `windows-1252`, `iso-8859-1`, `shift_jis`), checked with the config. Read only for a body that
 * is not UTF-8 and whose Content-Type names no charset (decodeBody).
 */
const charsetLabel = z
  .string({ error: "must be a charset label (e.g. 'windows-1252', 'iso-8859-1', 'shift_jis')" })
  .refine((label) => {
    try {
      new TextDecoder(label);
      return true;
    } catch {
      return false;
    }
  }, "must be a charset label a decoder here knows (e.g. 'windows-1252', 'iso-8859-1', 'shift_jis')");

const charsetDescription =
  'The charset of bodies that are not UTF-8 and whose Content-Type names none (a WHATWG label, e.g. `windows-1252`); ' +
  "without one such a page fails. A valid UTF-8 body is read as UTF-8 and a charset the Content-Type names comes first.";

const resourceSchema = z.strictObject({
  path: z.string({ error: "must be a path starting with '/'" }).regex(/^\/[^?#]*$/, "must be a path starting with '/' (no query or fragment: use params)"),
  params: z.record(paramName, z.string({ error: 'must be a string' })).optional().meta({ description: 'Fixed query parameters of every request' }),
  records: jsonPath('the array of records').default('$'),
  id: jsonPath("a record's id"),
  id_prefix: z.string().max(200).optional().meta({ description: 'Put before each id (e.g. to match the ids of another connector)' }),
  updated_at: jsonPath("a record's change time").optional().meta({ description: "A JSON path to a record's change time (ISO 8601, or epoch seconds, milliseconds, microseconds or nanoseconds as a number, or as text of 10, 13, 16 or 19 digits); paths as `id`'s" }),
  since: sinceSchema.optional().meta({ description: 'How an incremental fetch asks for records changed at or after its cursor' }),
  exclude_when_present: z.array(jsonPath('a field')).optional().meta({ description: "Records with a value (not null) at any of these fields (JSON paths, as `id`'s) are left out" }),
  order: z
    .enum(['unspecified', 'change_ascending'], { error: "must be one of 'unspecified', 'change_ascending'" })
    .default('unspecified')
    .meta({
      description:
        "How the provider lists this resource. 'change_ascending': by `updated_at` ascending, ties always in the same order " +
        '(e.g. params sort=updated&direction=asc). Page-number and offset paging then continue from the last change time seen ' +
        '(`since` = that time, first page again) instead of by position, which shifts while the provider changes. `since` may be inclusive ' +
        'or exclusive (one that leaves out the records of the time asked is found at the first step, which is asked again one unit earlier: ' +
        '1 ms, 1 s or a day, as every later step of the pass is; one request more a pass, none for an inclusive one). Requires `updated_at` and `since`.',
    }),
  pagination: paginationSchema.optional().meta({ description: "This resource's pagination, if not the connection's" }),
  charset: charsetLabel.optional().meta({ description: `${charsetDescription} This resource's, if not the connection's.` }),
  item: z
    .strictObject({
      path: z
        .string({ error: "must be a path starting with '/' with '{id}' in it" })
        .regex(/^\/[^?#]*\{id\}[^?#]*$/, "must be a path starting with '/' with '{id}' in it (no query or fragment)"),
      record: jsonPath('the record in the answer').default('$'),
    })
    .optional()
    .meta({
      description:
        "One record by id, e.g. {\"path\": \"/v1/customers/{id}\", \"record\": \"data\"} ({id}: its id without id_prefix). A full sync looks up " +
        'the records it did not see (at most 100) before deleting them: 404 or 410 is gone, as is an answer with null at `record`; an answer with the record keeps it. Lets a listing that is ' +
        'not consistent (stable: false, max_reads: 1) delete what is confirmed gone.',
    }),
});

/** The http connection config. Unknown top-level keys are refused: a typo must not go unnoticed. */
export const httpConfigSchema = z.strictObject({
  base_url: z
    .string({ error: 'must be an http(s) URL' })
    .refine(isBareHttpUrl, 'must be an http(s) URL without query, fragment or credentials')
    .meta({ format: 'uri' }),
  auth: authSchema.default({ type: 'none' }),
  headers: z
    .record(z.string().regex(/^[A-Za-z0-9-]+$/, 'must be header names'), headerValue)
    .superRefine((headers, ctx) => {
      for (const name of Object.keys(headers)) {
        const problem = refusedHeaderProblem(name);
        if (problem) ctx.addIssue({ code: 'custom', path: [name], message: problem });
      }
    })
    .optional()
    .meta({ description: 'Fixed, non-secret headers of every request (not hop-by-hop, framing, host-routing or cookie headers)' }),
  resources: z
    .record(z.string().min(1, 'must be resource type names').max(64, 'must be resource type names of at most 64 characters'), resourceSchema, {
      error: 'must be an object of resource type → resource',
    })
    .refine((r) => Object.keys(r).length > 0, 'must describe at least one resource')
    .superRefine((resources, ctx) => {
      for (const [name, resource] of Object.entries(resources)) {
        if (resource.order !== 'change_ascending') continue;
        for (const key of ['updated_at', 'since'] as const) {
          if (resource[key] === undefined) ctx.addIssue({ code: 'custom', path: [name, 'order'], message: `'change_ascending' needs resources.${name}.${key}` });
        }
      }
    })
    .meta({ minProperties: 1, description: 'Resource type → how to fetch it' }),
  pagination: paginationSchema.default({ type: 'none' }),
  charset: charsetLabel.optional().meta({ description: `${charsetDescription} The default of every resource.` }),
  rate_limit: z
    .strictObject({
      remaining_header: readHeaderName,
      reset_header: readHeaderName,
      reset_format: z.enum(['epoch_seconds', 'delta_seconds']).default('epoch_seconds'),
    })
    .optional()
    .meta({ description: 'Where the provider states its remaining requests and reset, read into the shared rate budget' }),
  rate_budget: rateBudgetConfigSchema.optional(),
}).superRefine((cfg, ctx) => {
  // Each query parameter the connector writes has one role: a second role in the same name
  // overwrites the first (an offset and its limit in one name ask for offset `limit` first, and
  // the records before it are never read). Names are compared exactly (they are case-sensitive).
  const reported = new Set<string>();
  for (const [name, resource] of Object.entries(cfg.resources)) {
    const own = resource.pagination !== undefined;
    const pagination = resource.pagination ?? cfg.pagination;
    const at = (key: string): (string | number)[] => (own ? ['resources', name, 'pagination', key] : ['pagination', key]);
    const roles: { param: string; path: (string | number)[] }[] = [];
    if (pagination.type === 'cursor') roles.push({ param: pagination.param, path: at('param') });
    if (pagination.type === 'page_number') {
      roles.push({ param: pagination.param, path: at('param') });
      if (pagination.size_param !== undefined) roles.push({ param: pagination.size_param, path: at('size_param') });
    }
    if (pagination.type === 'offset') roles.push({ param: pagination.param, path: at('param') }, { param: pagination.limit_param, path: at('limit_param') });
    if (resource.since) roles.push({ param: resource.since.param, path: ['resources', name, 'since', 'param'] });
    if (cfg.auth.type === 'query') roles.push({ param: cfg.auth.name, path: ['auth', 'name'] });
    roles.forEach((role, index) => {
      const first = roles.slice(0, index).find((earlier) => earlier.param === role.param);
      if (!first) return;
      const message = `'${role.param}' is also ${keyPath(first.path)}: each must be a query parameter of its own`;
      const key = `${keyPath(role.path)}: ${message}`;
      if (reported.has(key)) return;
      reported.add(key);
      ctx.addIssue({ code: 'custom', path: role.path, message });
    });
  }
});

/** A validated http config, defaults applied. */
export type HttpConfig = z.output<typeof httpConfigSchema>;
type Resource = HttpConfig['resources'][string];
type Pagination = HttpConfig['pagination'];

/** Validates an http config and applies defaults; throws `Permanent` naming each offending key. */
export function parseHttpConfig(config: Record<string, unknown>): HttpConfig {
  return parseConnectorConfig('http', httpConfigSchema, config);
}

// ---------------------------------------------------------------------------------------------
// JSON paths, tokens

/**
 * The value at `path` in `value` (a path JSON_PATH accepts; `$` is the value itself). A name is a
 * field the provider sent (an own property of an object), never one every object inherits
 * (`constructor`, `toString`, `__proto__`); an index, an element of an array.
 */
export function readPath(value: unknown, path: string): unknown {
  if (!JSON_PATH.test(path)) throw new Error(`not a JSON path: '${path}'`);
  let at = value;
  for (const [, dotted, index, single, double] of path.replace(/^\$\.?/, '').matchAll(PATH_STEP)) {
    if (index !== undefined) {
      const position = Number(index);
      at = Array.isArray(at) && position < at.length ? (at[position] as unknown) : undefined;
    } else {
      const name = dotted ?? (single ?? double)!.replace(/\\(.)/g, '$1');
      at = at !== null && typeof at === 'object' && !Array.isArray(at) && Object.hasOwn(at, name) ? (at as Record<string, unknown>)[name] : undefined;
    }
  }
  return at;
}

/** Whether the value at `path` in `value`, or at a step on the way to it, is null. */
function nullOnPath(value: unknown, path: string): boolean {
  if (value === null) return true;
  let prefix = '$';
  for (const [step] of path.replace(/^\$\.?/, '').matchAll(PATH_STEP)) {
    prefix += step.startsWith('[') || step.startsWith('.') ? step : `.${step}`;
    if (readPath(value, prefix) === null) return true;
  }
  return false;
}

/**
 * Where a read of a listing paged by position stands: its number (from 1), the URL it began at,
 * the digest of the previous complete read (null after the first), the running digest of this one,
 * its pages so far and the digest of its last page's records (`pageDigest`).
 */
interface ReadState {
  n: number;
  start: string;
  prev: string | null;
  acc: string;
  pages: number;
  last?: string;
}

/**
 * A catch-up pass of a newest-first listing (see catchUpOn): its number (from 1), the change time
 * (ISO) it reads down to (`head`: it ends at the first record older than that), the newest change
 * time its first page showed (`top`, the next catch-up's `head`), the digests of its records at or
 * after `head` (`acc`) and at or after `top` (`upper`), the previous catch-up's `upper` (`prev`,
 * none for the first), and its pages so far.
 */
interface CatchUp {
  n: number;
  head: string;
  top?: string;
  acc: string;
  upper: string;
  prev?: string;
  pages: number;
}

/**
 * A page token: the exact URL to fetch, for position paging the read it belongs to, and the digest
 * of its listing. By keyset (`order: 'change_ascending'`): on a step whose provider was taken as
 * inclusive, the change time (ISO) the page before it ended at (`lastAt`); once the provider's
 * `since` was seen to leave out that time, `exclusive` (every step is then asked one unit earlier).
 * By a provider's links or cursors, while every record the pass has listed came in non-increasing
 * change-time order: the newest change time its first page showed (`head`), the change time of the
 * last record listed (`low`), whether one came strictly older than the one before (`falling`) and
 * the digest of those at or after `head` (`upper`); on the pages of a catch-up pass, where it
 * stands (`catchup`).
 */
interface Token extends Partial<Newest> {
  url: string;
  read?: ReadState;
  listing?: string;
  lastAt?: string;
  exclusive?: true;
  catchup?: CatchUp;
  /** How often this pass started again from its first page (see POSITION_GONE). */
  restarts?: number;
  /** On the first page of a pass started again: it is that pass's first page. */
  first?: true;
}

/** A pass's records listed so far came newest first: see fallingOn. */
interface Newest {
  head: string;
  low: string;
  upper: string;
  falling?: true;
}

/**
 * The next token of a listing paged by position, the `since` value its cursor must not pass (a
 * block read once), and, for a read that disagreed with the one before it `max_reads` times, the
 * message the task fails with once this page is stored (the token then starts that read again).
 */
type PositionNext = Token & { hold?: string; unsettled?: string };

const encodeToken = (token: Token) => encodePageToken(token);

function decodeToken(token: string): Token {
  try {
    const body = pageTokenBody(token) as Token;
    const read = body.read;
    const readOk =
      read === undefined ||
      (read !== null && typeof read === 'object' && Number.isInteger(read.n) && typeof read.start === 'string' && (read.prev === null || typeof read.prev === 'string') &&
        typeof read.acc === 'string' && Number.isInteger(read.pages) && (read.last === undefined || typeof read.last === 'string'));
    const time = (value: unknown) => value === undefined || (typeof value === 'string' && !Number.isNaN(Date.parse(value)));
    const keysetOk = time(body.lastAt) && (body.exclusive === undefined || body.exclusive === true);
    // Written since newest-first listings are caught up with; a token without them goes on as before.
    const up = body.catchup;
    const catchupOk =
      up === undefined ||
      (up !== null && typeof up === 'object' && Number.isInteger(up.n) && up.n >= 1 && typeof up.head === 'string' && time(up.head) && time(up.top) &&
        typeof up.acc === 'string' && typeof up.upper === 'string' && (up.prev === undefined || typeof up.prev === 'string') && Number.isInteger(up.pages));
    const restartOk = (body.restarts === undefined || (Number.isInteger(body.restarts) && body.restarts >= 1)) && (body.first === undefined || body.first === true);
    const newestOk =
      (body.head === undefined || (time(body.head) && typeof body.low === 'string' && time(body.low) && typeof body.upper === 'string')) &&
      (body.falling === undefined || body.falling === true) && catchupOk;
    if (typeof body.url === 'string' && readOk && (body.listing === undefined || typeof body.listing === 'string') && keysetOk && newestOk && restartOk) return body;
  } catch {
    // below
  }
  throw new Permanent(`http connector: invalid page token '${token}'`);
}

/**
 * Refuses URLs outside `base_url`'s origin: we would be sending the credentials there. The URL a
 * refusal quotes is provider text (a Link or a body's next URL, as long as a page may be, echoing
 * what it was sent): quoted through `redact`, which redacts the secrets first, then cuts.
 */
function sameOrigin(url: string, cfg: HttpConfig, what: string, redact: (text: string) => string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Permanent(`http connector: invalid URL in ${what}: '${redact(url)}'`);
  }
  if (parsed.origin !== new URL(cfg.base_url).origin) {
    throw new Permanent(`http connector: refusing to follow ${what} URL '${redact(url)}' outside ${cfg.base_url}`);
  }
  return parsed.href;
}

/**
 * `url` (the next page's, from `source`) when it is at most MAX_NEXT_URL_CHARS long (see there: it
 * becomes the page token); quoted through `redact` (redacted, then cut) otherwise.
 */
function boundedNext(url: string, source: string, redact: (text: string) => string): string {
  if (url.length <= MAX_NEXT_URL_CHARS) return url;
  throw new Permanent(
    `http connector: the next URL from the ${source} is ${url.length} characters, more than ${MAX_NEXT_URL_CHARS} (the longest next URL the connector follows); ` +
      `not followed: '${redact(url)}'`,
  );
}

const DAY_MS = 86_400_000;

/**
 * The `since` value asking for the records changed at or after `since`. A date is the UTC day
 * before `since`'s: a provider reads a date in its own zone, whose day begins within a day of
 * midnight UTC (up to 12 hours after it west of UTC), so asked for `since`'s UTC day it would leave
 * out what changed between `since` and its own midnight. Records changed before `since` that the
 * earlier day brings are left out by the connector (and storing one again writes nothing).
 */
function formatSince(since: Date, format: z.output<typeof sinceSchema>['format']): string {
  switch (format) {
    case 'epoch_seconds':
      return String(Math.floor(since.getTime() / 1000));
    case 'epoch_millis':
      return String(since.getTime());
    case 'date':
      return new Date(since.getTime() - DAY_MS).toISOString().slice(0, 10);
    default:
      return since.toISOString();
  }
}

/**
 * Text that is an epoch number (providers sending every number as a string): the widths epoch
 * times of this era are written in, 10 digits (seconds, 2001 to 2286), 13 (milliseconds), 16
 * (microseconds) or 19 (nanoseconds), so no compact calendar text reads as one: an ISO basic date
 * (`20240101`), `yyyyMMddHHmm` (12 digits, read as milliseconds: 1976) or `yyyyMMddHHmmss` (14:
 * year 2611) keeps no change time, as before.
 */
const EPOCH_TEXT = /^(?:\d{10}|\d{13}|\d{16}|\d{19})(?:\.\d+)?$/;

/**
 * A change time as the platform stores it (`storableChangeTime`): strings as given when RFC 3339
 * names a real time, else as the instant they parse to; numbers, and text of one (EPOCH_TEXT), as
 * epoch seconds (< 1e11), milliseconds (< 1e14, year 5138), microseconds (< 1e17) or nanoseconds. Null when there is none, or it lies outside years 1-9999 (Postgres could not take it).
 */
function changeTime(given: unknown): string | null {
  if (typeof given === 'string' && !EPOCH_TEXT.test(given)) return storableChangeTime(given);
  const text = given instanceof JsonNumber ? given.text : typeof given === 'string' ? given : typeof given === 'number' ? String(given) : null;
  const value = text === null ? Number.NaN : Number(text);
  if (!Number.isFinite(value)) return null;
  if (value >= 1e14) {
    // Microseconds, or nanoseconds from 1e17: to the microsecond (Postgres's resolution) when
    // given as an integer, whose digits say it past 2^53 too.
    const digits = /^\d+$/.test(text!) ? (value >= 1e17 ? text!.slice(0, -3) : text!) : null;
    if (digits !== null && digits.length > 6) {
      const seconds = new Date(Number(digits.slice(0, -6)) * 1000);
      return Number.isNaN(seconds.getTime()) ? null : storableChangeTime(seconds.toISOString().replace(/\.\d{3}Z$/, `.${digits.slice(-6)}Z`));
    }
  }
  const ms = value < 1e11 ? value * 1000 : value < 1e14 ? value : value < 1e17 ? value / 1000 : value / 1e6;
  const instant = new Date(ms);
  return Number.isNaN(instant.getTime()) ? null : storableChangeTime(instant.toISOString());
}

/**
 * The first page's URL of a resource: base URL + path, fixed params, `since`, the pagination's
 * start. A backfill (`earlier`) asks `since` one unit of its format's resolution before the
 * window's start (`sinceBefore`): the start is the user's (a whole second or day, where providers
 * stamp changes), and a provider whose `since` is exclusive would leave out what changed exactly
 * there; for a date, one read as "after this day" west of UTC, what changed before its own midnight.
 * An inclusive provider then also lists the unit before the start, which the window leaves out.
 */
function firstUrl(cfg: HttpConfig, resource: Resource, pagination: Pagination, since: Date | null, earlier: boolean): string {
  const url = new URL(cfg.base_url.replace(/\/+$/, '') + resource.path);
  for (const [key, value] of Object.entries(resource.params ?? {})) url.searchParams.set(key, value);
  if (since !== null && resource.since) {
    const { param, format } = resource.since;
    const value = formatSince(since, format);
    url.searchParams.set(param, earlier ? sinceBefore(value, format) : value);
  }
  if (pagination.type === 'page_number') {
    url.searchParams.set(pagination.param, String(pagination.start));
    if (pagination.size_param && pagination.size) url.searchParams.set(pagination.size_param, String(pagination.size));
  } else if (pagination.type === 'offset') {
    url.searchParams.set(pagination.param, '0');
    url.searchParams.set(pagination.limit_param, String(pagination.limit));
  }
  return url.href;
}

/**
 * The next page's URL as a page token holds it (withoutSecrets), or null when this page was the
 * last. A relative link or next URL is relative to `answered`, the URL that answered (a same-origin
 * redirect may have moved it from `url`, the one asked for); a cursor goes into `url`.
 */
function nextUrl(cfg: HttpConfig, pagination: Pagination, url: string, answered: string, headers: Headers, body: unknown, auth: Auth, redact: (text: string) => string): string | null {
  /** A provider's next URL from `source`, as a page token holds it. */
  const follow = (next: string, source: string) => withoutSecrets(boundedNext(sameOrigin(next, cfg, source, redact), source, redact), auth, source, redact);
  switch (pagination.type) {
    case 'none':
      return null;
    case 'link_header': {
      const next = nextLink(headers.get('link'), answered);
      return next === null ? null : follow(next, 'Link header');
    }
    case 'next_url': {
      const next = readPath(body, pagination.path);
      if (next === undefined || next === null || next === '') return null;
      if (typeof next !== 'string') throw new Permanent(`http connector: the next URL at '${pagination.path}' is not a string`);
      return follow(new URL(next, answered).href, `body '${pagination.path}'`);
    }
    case 'cursor': {
      const cursor = readPath(body, pagination.path);
      if (cursor === undefined || cursor === null || cursor === '' || cursor === false) return null;
      if (typeof cursor !== 'string' && typeof cursor !== 'number' && !(cursor instanceof JsonNumber)) {
        throw new Permanent(`http connector: the cursor at '${pagination.path}' is not a string or number`);
      }
      // A cursor 0 is the end (Twitter's `next_cursor: 0`, SCAN-style cursors): as the position
      // after a page it can only be where the listing starts, whose pages would come round again.
      if ((typeof cursor === 'string' ? cursor : numberValueText(cursor)) === '0') return null;
      const next = new URL(url);
      // A numeric cursor by its value's digits (`numberValueText`): an int64 position past 2^53 is
      // sent back as it came, and one value is one position however it is spelled (`2.0` is `2`).
      next.searchParams.set(pagination.param, typeof cursor === 'string' ? cursor : numberValueText(cursor));
      const source = `cursor at '${pagination.path}'`;
      return withoutSecrets(boundedNext(next.href, source, redact), auth, source, redact);
    }
    case 'page_number':
    case 'offset':
      throw new Error('position paging goes through positionNext');
  }
}

type PositionPagination = Extract<Pagination, { type: 'page_number' | 'offset' }>;

/**
 * The URL of the next position after `url`'s, whose page served `served` records: the next page
 * number, or the offset `served` on (not `limit` on: a provider capping the page below `limit`
 * would have the records between skipped).
 */
function nextPosition(url: string, pagination: PositionPagination, served: number): string {
  const next = new URL(url);
  const at = Number(next.searchParams.get(pagination.param) ?? (pagination.type === 'page_number' ? pagination.start : 0));
  next.searchParams.set(pagination.param, String(at + (pagination.type === 'page_number' ? 1 : served)));
  return next.href;
}

/**
 * The earliest change time a provider asked for the `since` value `value` may list: the value's
 * time, or for a date the midnight UTC of the day before (a day begins up to 14 hours before
 * midnight UTC east of UTC).
 */
const earliestListed = (value: string, format: z.output<typeof sinceSchema>['format']): number => sinceMillis(value, format) - (format === 'date' ? DAY_MS : 0);

/** One unit of each `since` format's resolution, in milliseconds. */
const SINCE_UNIT_MS: Record<z.output<typeof sinceSchema>['format'], number> = { iso8601: 1, epoch_millis: 1, epoch_seconds: 1000, date: DAY_MS };

/** The `since` value one unit of its format's resolution before `value` (a millisecond, a second, a day). */
function sinceBefore(value: string, format: z.output<typeof sinceSchema>['format']): string {
  const ms = sinceMillis(value, format) - SINCE_UNIT_MS[format];
  switch (format) {
    case 'epoch_seconds':
      return String(ms / 1000);
    case 'epoch_millis':
      return String(ms);
    case 'date':
      return new Date(ms).toISOString().slice(0, 10);
    default:
      return new Date(ms).toISOString();
  }
}

/** The page size a position listing asks for (`size`, `limit`), if any. */
const askedSize = (pagination: PositionPagination): number | undefined => (pagination.type === 'page_number' ? pagination.size : pagination.limit);

/**
 * A `since` value as milliseconds, in its format's resolution (a date is its midnight UTC): what
 * orders the values the connector asks for, and where a held cursor stays (at or before the time
 * the value was formatted from).
 */
function sinceMillis(value: string, format: z.output<typeof sinceSchema>['format']): number {
  switch (format) {
    case 'epoch_seconds':
      return Number(value) * 1000;
    case 'epoch_millis':
      return Number(value);
    case 'date':
      return Date.parse(`${value}T00:00:00Z`);
    default:
      return Date.parse(value);
  }
}

/** The ids and change times of a page's items, in order. */
const pageKeys = (items: unknown[], resource: Resource): unknown[] =>
  items.map((item) => [readPath(item, resource.id), resource.updated_at ? readPath(item, resource.updated_at) : null]);

/** A digest of a page's records (ids and change times, in order): a next position serving the same ones is the end. */
const pageDigest = (items: unknown[], resource: Resource): string => digest('', pageKeys(items, resource));

/**
 * Whether `items` are the very records (ids and change times, in order) of the last page of `read`:
 * a provider that ignores the position serves its whole list on every page. Such a page is taken
 * as the empty one, the end.
 */
const repeatsLastPage = (read: ReadState | undefined, items: unknown[], resource: Resource): boolean =>
  items.length > 0 && read?.last !== undefined && read.last === pageDigest(items, resource);

/** A digest of `keys` (ids and change times, in order) after `acc`. */
function digest(acc: string, keys: unknown[]): string {
  return createHash('sha256').update(acc).update(JSON.stringify(keys)).digest('base64url').slice(0, 24);
}

/**
 * A read's running digest `acc` moved on by the records of its next page (`keys`, in order), one
 * record at a time: two reads that served the same records in the same order agree, however the
 * provider split them into pages (one answering fewer records a request than another, say).
 */
const readDigest = (acc: string, keys: unknown[]): string => keys.reduce<string>((running, key) => digest(running, [key]), acc);

/**
 * The next token of a listing paged by position (page numbers, offsets), or null at its end.
 *
 * A page with no records ends a read; any other page, however short, is followed by the next
 * position (or keyset step): a provider may serve fewer records a page than asked for.
 *
 * With `order: 'change_ascending'` (and `since`), paging is by keyset: after a page whose last
 * change time lies past the request's `since` (in its format's resolution), the next request asks
 * for `since` = that time from the first position again (records of that time are served again;
 * storing them twice writes nothing). Only a page whose records all share the `since` time moves to
 * the next position; with an upper bound `until` the pass ends at the first page that reaches it.
 * A provider that lists a record changed before `since`, or out of change-time order, contradicts
 * the declaration: that fails as Permanent, naming the key.
 *
 * A provider's `since` may be exclusive (`>`): asked for that time, it leaves out the records of
 * it, among them those after the page that ended there. So a step's first page that serves no
 * record changed at or before the time the page before it ended at (`lastAt`; none at all counts)
 * is asked again one unit of the format's resolution earlier (`sinceBefore`), and from then on
 * the pass is `exclusive`: every step asks one unit before the time, and the `since` time whose
 * records are paged by position is the one after the value asked. An inclusive provider serves
 * the record that ended the page before (unless it changed meanwhile, when the unit earlier costs
 * a request and serves nothing wrong), so it costs nothing; an exclusive one, one request a pass.
 * Each exclusive step asks a later value than the one before, so no step comes back to a URL of the
 * pass: the one exclusive value equal to an inclusive step's is another page (`pageKey`).
 *
 * A read is the pages from where it began to its end (the listing's end, or a keyset step). A read
 * of more than one page is repeated from its first URL until two reads in a row served the same
 * records in the same order; a single page is one consistent answer and needs no second read.
 * After `max_reads` reads that disagree, the next token starts the read over as read 1, marked
 * `unsettled`: the page is stored with it and the task then fails as transient, so the job's retry
 * reads from there again (a token left at the read's last page would end it disagreeing on every retry).
 */
function positionNext(
  name: string,
  resource: Resource,
  pagination: PositionPagination,
  url: string,
  read: ReadState | undefined,
  items: unknown[],
  until: Date | null,
  what: string,
  keyset: Pick<Token, 'lastAt' | 'exclusive'> = {},
): PositionNext | null {
  // Only an empty page is the end: a short one may be the provider's cap on the page size.
  const more = items.length > 0;
  const keys = pageKeys(items, resource);
  const current = read ?? { n: 1, start: url, prev: null, acc: '', pages: 0 };
  /** This page's read with `counted` of its records (from the first) taken into the read's digest. */
  const readOn = (counted: number): ReadState => ({
    ...current, acc: readDigest(current.acc, keys.slice(0, counted)), pages: current.pages + 1, ...(more && { last: digest('', keys) }),
  });
  // Every token of an exclusive pass says so.
  const mode = keyset.exclusive ? { exclusive: true as const } : {};
  let done = readOn(keys.length);
  let after: PositionNext | null = null;
  if (resource.order === 'change_ascending' && resource.since && resource.updated_at) {
    const { param, format } = resource.since;
    const sinceText = new URL(url).searchParams.get(param);
    // The `since` time asked for: for an exclusive provider, the one after the value sent.
    const floor = sinceText === null ? null : sinceMillis(sinceText, format) + (keyset.exclusive ? SINCE_UNIT_MS[format] : 0);
    let previous = Number.NEGATIVE_INFINITY;
    let first: Date | null = null;
    let last: Date | null = null;
    // The records a read by position compares: those sharing the `since` time and the first one
    // after them (where a shift while the block was paged would show). The rest of the page that
    // ends the read is one answer, and how far it goes is the provider's choice of page size:
    // two reads of unchanged records could otherwise end at other records and never agree.
    let counted = items.length;
    for (const [index, item] of items.entries()) {
      const change = changeTime(readPath(item, resource.updated_at));
      if (change === null) {
        throw new Permanent(`http connector: ${what}: record #${index} has no change time at '${resource.updated_at}', which resources.${name}.order 'change_ascending' needs`);
      }
      last = new Date(change);
      first ??= last;
      if (sinceText !== null && last.getTime() < earliestListed(sinceText, format)) {
        throw new Permanent(`http connector: ${what}: resources.${name}.order is 'change_ascending', but the provider listed a record changed before ${param}=${sinceText} (does it filter by '${param}'?)`);
      }
      if (last.getTime() < previous) {
        throw new Permanent(`http connector: ${what}: resources.${name}.order is 'change_ascending', but the provider listed record #${index} out of change-time order`);
      }
      previous = last.getTime();
      if (floor !== null && counted === items.length && sinceMillis(formatSince(last, format), format) > floor) counted = index + 1;
    }
    if (keyset.lastAt !== undefined && sinceText !== null && (first === null || first.getTime() > Date.parse(keyset.lastAt))) {
      // Nothing of the time the page before ended at: an exclusive `since` left it out (or all of
      // it changed meanwhile). The same step one unit earlier, a new read; this page's records
      // are stored, and served again there.
      const again = new URL(url);
      again.searchParams.set(param, sinceBefore(sinceText, format));
      return { url: again.href, exclusive: true };
    }
    done = readOn(counted);
    if (more && last !== null) {
      const lastText = formatSince(last, format);
      if (floor !== null && sinceMillis(lastText, format) <= floor) {
        // Within records sharing the `since` time, by position: unverified when read only once.
        return { url: nextPosition(url, pagination, items.length), read: done, ...mode, ...(pagination.max_reads <= 1 && { hold: sinceText! }) };
      }
      const step = new URL(url);
      step.searchParams.set(param, keyset.exclusive ? sinceBefore(lastText, format) : lastText);
      step.searchParams.set(pagination.param, pagination.type === 'page_number' ? String(pagination.start) : '0');
      // Ascending: what follows was changed at or after `until`, outside the window.
      after = until !== null && last.getTime() >= until.getTime() ? null : { url: step.href, ...(keyset.exclusive ? mode : { lastAt: last.toISOString() }) };
    }
  } else if (more) {
    return { url: nextPosition(url, pagination, items.length), read: done };
  }
  // This read is complete: an empty page, or (by keyset) the window's end.
  if (done.pages === 1 || pagination.max_reads <= 1 || done.prev === done.acc) return after;
  if (done.n >= pagination.max_reads) {
    // Not thrown: the task's stored token would stay at this read's last page, and every retry
    // would end this same read, disagreeing again. Stored, the token starts the read over (as it
    // first began: read 1), so a retry reads it again, the provider perhaps still by then.
    return {
      url: done.start,
      ...mode,
      unsettled:
        `http connector: ${what}: the listing changed during each of ${done.n} reads from '${done.start}' (pages shift while the provider changes; ` +
        `max_reads ${pagination.max_reads}), so a record may have been skipped; retrying later`,
    };
  }
  return { url: done.start, read: { n: done.n + 1, start: done.start, prev: done.acc, acc: '', pages: 0 }, ...mode };
}

/**
 * What a provider answers for a link, next URL or cursor it gave that no longer names a position:
 * 400 (a Stripe-style cursor naming the last record of the page before, deleted since: "No such
 * item"), 404, 410 (a cursor expired, as a pass waiting out a rate limit meets). Asked for a page
 * after the first, the pass starts again from its first page (what it stored stays, and so does a
 * full pass's seen-set: those records were alive when it read them), at most MAX_RESTARTS times;
 * a first page so answered, or a page of a pass started again that often, fails as before.
 */
const POSITION_GONE = new Set([400, 404, 410]);

/** Most times one pass starts again from its first page after a position it was given went (POSITION_GONE). */
const MAX_RESTARTS = 3;

/**
 * Most catch-up passes one pass of a newest-first listing reads in a row. After a listing changing
 * through every one of them, the task fails as transient (as for a listing paged by position that
 * never agrees, `max_reads`), its progress at a catch-up down to the last one's head: the job's
 * retry reads from there, deleting nothing before.
 */
const MAX_CATCHUP_PASSES = 5;

/** Each item's change time (milliseconds), or null where it has none. */
const itemTimes = (items: unknown[], resource: Resource): (number | null)[] =>
  items.map((item) => {
    const change = resource.updated_at ? changeTime(readPath(item, resource.updated_at)) : null;
    return change === null ? null : Date.parse(change);
  });

/**
 * Where a pass stands on whether its listing is newest first, after a page of `items` (their change
 * times `times`; `before`: what the token said, null on the pass's first page): the newest change
 * time the first page showed (`head`), the change time of the last record listed (`low`), whether
 * one came strictly older than the one before (`falling`), and the digest of the records at or
 * after `head` (`upper`, what the first catch-up compares its own with). Null once a record has no
 * change time or is newer than the one listed before it: the listing is not newest first
 * (ascending, or by id), and the pass needs no catch-up.
 */
function fallingOn(before: Newest | null, items: unknown[], times: (number | null)[], resource: Resource): Newest | null {
  if (times.length === 0) return before;
  let low = before === null ? Number.POSITIVE_INFINITY : Date.parse(before.low);
  let falling = before?.falling === true;
  for (const time of times) {
    if (time === null || time > low) return null;
    if (time < low && low !== Number.POSITIVE_INFINITY) falling = true;
    low = time;
  }
  const head = before?.head ?? new Date(times[0]!).toISOString();
  const headMs = Date.parse(head);
  const upper = readDigest(before?.upper ?? '', pageKeys(items.filter((_item, index) => times[index]! >= headMs), resource));
  return { head, low: new Date(low).toISOString(), upper, ...(falling && { falling: true as const }) };
}

/**
 * A catch-up pass after a page of `items` (their change times `times`): where it stands, and
 * whether this page reached a record older than its `head` (the catch-up's end).
 *
 * A listing newest first moves a record changed while the pass pages to its head, behind the
 * position of the pass's links or cursors: the pages still ahead never serve it. So a pass that
 * took more than one page (and listed records newest first: `fallingOn`) then reads from its first
 * URL again, down to the first record older than the newest change its first page showed (the
 * head then): every record changed since is at or above it. That catch-up pages too, and a record
 * changed again while it does moves behind it in turn; so a catch-up of more than one page is
 * followed by another, down to the newest change its own first page showed, until one takes a
 * single page (one answer: what changed since the previous one began, all of it), or serves the
 * very records (ids and change times, in order) that the previous one (for the first, the pass)
 * served at or after its head: nothing changed since that one began (a head of records sharing one
 * change time over more than a page, say). At most MAX_CATCHUP_PASSES in a row.
 */
function catchUpOn(state: CatchUp, items: unknown[], times: (number | null)[], resource: Resource): { state: CatchUp; reached: boolean } {
  const headMs = Date.parse(state.head);
  const stop = times.findIndex((time) => time !== null && time < headMs);
  const within = stop < 0 ? items.length : stop;
  const known = times.filter((time): time is number => time !== null);
  const top = state.top ?? (known.length > 0 ? new Date(Math.max(...known)).toISOString() : undefined);
  const topMs = top === undefined ? Number.POSITIVE_INFINITY : Date.parse(top);
  const keys = pageKeys(items.slice(0, within), resource);
  const upper = keys.filter((_key, index) => times[index] === null || times[index]! >= topMs);
  return {
    state: { ...state, ...(top !== undefined && { top }), acc: readDigest(state.acc, keys), upper: readDigest(state.upper, upper), pages: state.pages + 1 },
    reached: stop >= 0,
  };
}

// ---------------------------------------------------------------------------------------------
// Auth and errors

const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,200}$/;

/**
 * What is wrong with an `oauth2_client_credentials` credential (the client credentials grant: the
 * platform obtains the token, which then goes where `auth` says, e.g. `bearer`), naming the key and
 * never echoing a value, or null.
 */
export function clientCredentialsProblem(credentials: Record<string, unknown>): string | null {
  const allowed = new Set(['kind', 'token_url', 'client_id', 'client_secret', 'scopes']);
  const extra = Object.keys(credentials).find((key) => !allowed.has(key));
  if (extra !== undefined) return `${extra}: is not a client credentials key (kind, token_url, client_id, client_secret, scopes)`;
  const { token_url, client_id, client_secret, scopes } = credentials;
  if (typeof token_url !== 'string' || token_url.length > 2000 || !isBareHttpUrl(token_url)) return 'token_url: must be an http(s) URL without query, fragment or credentials (https unless PROVIDER_ALLOW_PRIVATE)';
  if (typeof client_id !== 'string' || client_id.length === 0 || client_id.length > 500) return 'client_id: must be a string of 1-500 characters';
  if (typeof client_secret !== 'string' || client_secret.length === 0 || client_secret.length > 2000) return 'client_secret: must be a string of 1-2000 characters';
  if (scopes !== undefined && (!Array.isArray(scopes) || scopes.length > 100 || !scopes.every((scope) => typeof scope === 'string' && SCOPE_TOKEN.test(scope)))) {
    return 'scopes: must be at most 100 scope tokens (no spaces or quotes)';
  }
  return null;
}

interface Auth {
  headers: Record<string, string>;
  /** A query parameter carrying the secret, added to the request URL only. */
  query: [string, string] | null;
  secrets: string[];
}

/**
 * What an HTTP header value may hold (RFC 9110 field-value, as Node checks it): tab, visible ASCII,
 * space, and bytes 0x80-0xFF. A line break or another control character can never be sent.
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** The credentials keys each auth type sends, and whether it sends them in a header. */
const AUTH_KEYS: Record<HttpConfig['auth']['type'], { keys: string[]; inHeader: boolean }> = {
  none: { keys: [], inHeader: false },
  bearer: { keys: ['token'], inHeader: true },
  header: { keys: ['token'], inHeader: true },
  basic: { keys: ['username', 'password'], inHeader: false },
  query: { keys: ['token'], inHeader: false },
};

/**
 * What `auth` cannot send of `credentials` (`key: problem`, never the value), or null: each key it
 * sends must be a non-empty string, and one sent as it is in a header (bearer, header) one a
 * header can carry. The one rule of the API's refusal and of a sync's (which fails for good).
 */
export function authCredentialsProblem(auth: HttpConfig['auth'], credentials: Record<string, unknown> | null): string | null {
  const { keys, inHeader } = AUTH_KEYS[auth.type];
  for (const key of keys) {
    const value = credentials?.[key];
    if (typeof value !== 'string' || value.trim() === '') return `${key}: a non-empty string is required for auth type '${auth.type}'`;
    if (inHeader && !HEADER_VALUE.test(value)) {
      return `${key}: auth type '${auth.type}' sends it in a header, which cannot carry a line break or another control character`;
    }
  }
  return null;
}

/** Whether `auth` sends nothing but a token (or nothing): what an OAuth grant or a client credentials grant gives. */
const sendsToken = (auth: HttpConfig['auth']): boolean => AUTH_KEYS[auth.type].keys.every((key) => key === 'token');

/** The auth of `config`, or null when this connector refuses the config (refused for itself, elsewhere). */
function configAuth(config: Record<string, unknown>): HttpConfig['auth'] | null {
  try {
    return parseHttpConfig(config).auth;
  } catch {
    return null;
  }
}

function authOf(cfg: HttpConfig, credentials: Record<string, unknown> | null): Auth {
  // A credential no request can carry fails for good, before any request (a retry would fail the same way).
  const problem = authCredentialsProblem(cfg.auth, credentials);
  if (problem) throw new Permanent(`http connector: invalid credentials: ${problem}`);
  const given = (key: string) => credentials![key] as string;
  switch (cfg.auth.type) {
    case 'none':
      return { headers: {}, query: null, secrets: [] };
    case 'bearer': {
      const token = given('token');
      return { headers: { Authorization: `Bearer ${token}` }, query: null, secrets: [token] };
    }
    case 'header': {
      const token = given('token');
      return { headers: { [cfg.auth.name]: token }, query: null, secrets: [token] };
    }
    case 'basic': {
      const user = given('username');
      const password = given('password');
      const encoded = Buffer.from(`${user}:${password}`, 'utf8').toString('base64');
      return { headers: { Authorization: `Basic ${encoded}` }, query: null, secrets: [password, encoded] };
    }
    case 'query': {
      const token = given('token');
      return { headers: {}, query: [cfg.auth.name, token], secrets: [token, encodeURIComponent(token)] };
    }
  }
}

/**
 * Secrets of fewer characters are looked for as a whole parameter name or value only: a page
 * number, a date or a cursor contains a shorter one by chance (`1` in `page=12`), and dropping that
 * parameter would page elsewhere. A provider embedding a credential in a value embeds one this long.
 */
const MIN_EMBEDDED_SECRET_CHARS = 8;

/**
 * `url` (the next page's, from `source`) without its fragment and the parameters that carry a
 * secret, for a page token: the query auth's parameter under its configured name in any case
 * (`api_key`, `API_KEY`), and any parameter whose name or value, as written or decoded, is a secret
 * (of at least MIN_SECRET_CHARS characters) or embeds one (of at least MIN_EMBEDDED_SECRET_CHARS). Every other parameter stays as the provider wrote it, in
 * its order and encoding: the next request asks for exactly the provider's next page. The query
 * secret is added again at request time under its configured name. A secret of at least
 * MIN_EMBEDDED_SECRET_CHARS elsewhere in the URL (its path) fails the task as Permanent, the URL
 * quoted through `redact`: without it the URL would name another page. A URL with userinfo
 * (`user:password@`) fails so too, quoted without it.
 */
function withoutSecrets(url: string, auth: Auth, source: string, redact: (text: string) => string): string {
  const clean = new URL(url);
  // Never sent: nothing of a fragment is the provider's page.
  clean.hash = '';
  // No provider request carries credentials in its URL, so such a next URL can never be fetched;
  // its userinfo (the connection's own password, echoed and percent-encoded, as likely as not) is
  // neither stored nor quoted.
  if (clean.username || clean.password) {
    clean.username = '';
    clean.password = '';
    throw new Permanent(`http connector: the next URL from ${source} carries credentials (user:password@; not stored, not followed): '${redact(clean.href)}'`);
  }
  // Outside the query, a secret cannot go without naming another page.
  const outside = [clean.pathname, decodedText(clean.pathname)];
  if (auth.secrets.some((secret) => secret.length >= MIN_EMBEDDED_SECRET_CHARS && outside.some((text) => text.includes(secret)))) {
    throw new Permanent(`http connector: the next URL from ${source} carries a credential outside its query (not stored, not followed): '${redact(url)}'`);
  }
  const name = auth.query?.[0].toLowerCase();
  const params = queryParts(clean);
  const kept = params.filter(({ part, key, value }) => {
    const at = part.indexOf('=');
    const texts = [key, value, at < 0 ? part : part.slice(0, at), at < 0 ? '' : part.slice(at + 1)];
    const carries = (secret: string) =>
      secret.length >= MIN_SECRET_CHARS && (texts.includes(secret) || (secret.length >= MIN_EMBEDDED_SECRET_CHARS && texts.some((text) => text.includes(secret))));
    return key.toLowerCase() !== name && !auth.secrets.some(carries);
  });
  if (kept.length === params.length) return clean.href;
  clean.search = kept.map((param) => param.part).join('&');
  return clean.href;
}

/** `text` percent-decoded, or as it is when it is no valid percent-encoding. */
function decodedText(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The parameters of `url`'s query, each as written (`part`) and with its name and value decoded as
 * a form decodes them. Editing a query through `searchParams` would write every parameter again in
 * the form encoding (`,` as `%2C`, a space as `+`): another URL to a provider that signs its URLs
 * or reads `+` as a plus.
 */
function queryParts(url: URL): { part: string; key: string; value: string }[] {
  if (url.search === '') return [];
  return url.search.slice(1).split('&').map((part) => {
    const [key = '', value = ''] = [...new URLSearchParams(part)][0] ?? [];
    return { part, key, value };
  });
}

/**
 * The `message`, `error` or `detail` of an error body, when it is JSON with one, else the trimmed
 * text: whole, cut later, after redaction (a secret split by a cut would leak its prefix).
 */
function bodyMessage(text: string): string {
  try {
    const body = JSON.parse(text) as unknown;
    for (const key of ['message', 'error', 'detail']) {
      const value = body && typeof body === 'object' ? (body as Record<string, unknown>)[key] : undefined;
      if (typeof value === 'string') return value;
    }
  } catch {
    // not JSON
  }
  return text.trim();
}

function errorFor(status: number, headers: Headers, text: string, what: string, limits: RateLimitHeaders, redact: (s: string) => string): ConnectorError {
  // Redacted first, then cut (`redact` does both).
  const message = redact(bodyMessage(text));
  const detail = message ? `: ${message}` : '';
  // Waits are counted from the provider's clock (its answer's Date), as its reset and dates are its own.
  const now = answeredAtMs(headers.get('date'), Date.now());
  const retryAfter = parseRetryAfter(headers.get('retry-after'), now);
  const stated = readRateLimit(headers, limits);
  const untilReset = stated.reset === null ? undefined : Math.max(0, Math.ceil('at' in stated.reset ? (stated.reset.at.getTime() - now) / 1000 : stated.reset.inSeconds));
  if (status === 429 || (status === 403 && (retryAfter !== undefined || stated.remaining === 0))) {
    return new RateLimited(`http connector: rate limited on ${what} (${status})${detail}`, retryAfter ?? untilReset ?? DEFAULT_RATE_LIMIT_WAIT_SECONDS);
  }
  // A 503 with Retry-After: the provider says when it expects to be back (RFC 9110), a maintenance
  // window, say. Waited for as a rate limit (durably, by the job), not retried within seconds as a
  // transient failure, which would meet the same 503, fail the job and count toward its breaker.
  if (status === 503 && retryAfter !== undefined) {
    return new RateLimited(`http connector: the provider is unavailable for ${what} (503, asked to retry after ${retryAfter} s)${detail}`, retryAfter);
  }
  if (status === 401) return new Unauthorized(`http connector: the provider rejected the credentials for ${what} (${status})${detail}`);
  if (status === 403) return new Permanent(`http connector: the provider rejected the credentials for ${what} (${status})${detail}`);
  if (status >= 500 || status === 408) return new Transient(`http connector: the provider answered ${status} for ${what}${detail}`);
  return new Permanent(`http connector: the provider answered ${status} for ${what}${detail}`);
}

/**
 * A record of `resource` from one item of the provider's JSON (read by `parseExactJson`), or null
 * when `exclude_when_present` leaves it out. A numeric id is its value's digits (`numberValueText`),
 * an integer past 2^53 (an int64 snowflake id, say) included: two ids that differ in their last
 * digits are two records, and one value spelled otherwise (`10.0`, `1e1`) is the one record `10`.
 */
function recordOf(item: unknown, resource: Resource, what: string): ConnectorRecord | null {
  if (!item || typeof item !== 'object' || Array.isArray(item)) throw new Permanent(`http connector: ${what} is not an object`);
  // A field is there when it has a value: one a provider always sends, null where it does not apply, is not.
  if (resource.exclude_when_present?.some((path) => readPath(item, path) != null)) return null;
  const id = readPath(item, resource.id);
  if ((typeof id !== 'string' || id === '') && typeof id !== 'number' && !(id instanceof JsonNumber)) {
    throw new Permanent(`http connector: ${what} has no string or number id at '${resource.id}'`);
  }
  const updatedAt = resource.updated_at ? changeTime(readPath(item, resource.updated_at)) : null;
  return { externalId: `${resource.id_prefix ?? ''}${typeof id === 'string' ? id : numberValueText(id)}`, updatedAt, data: item as Record<string, unknown> };
}

/**
 * One GET of `url` through the connectors' HTTP path: its query as written (a provider may sign its
 * next URLs, or read `+` as a plus), the query secret appended to the request only, in place of any
 * parameter of its name. A body is read in the resource's `charset` (else the connection's) when
 * it is not UTF-8 and its Content-Type names none.
 */
function get(cfg: HttpConfig, resource: Resource, auth: Auth, url: string, what: string, opts: Pick<FetchPageInput, 'signal' | 'policy' | 'budget'>) {
  const requestUrl = new URL(url);
  if (auth.query) {
    const [name, token] = auth.query;
    const kept = queryParts(requestUrl).filter((param) => param.key !== name).map((param) => param.part);
    requestUrl.search = [...kept, `${encodeURIComponent(name)}=${encodeURIComponent(token)}`].join('&');
  }
  const limits: RateLimitHeaders = cfg.rate_limit
    ? { remaining: cfg.rate_limit.remaining_header, reset: cfg.rate_limit.reset_header, resetFormat: cfg.rate_limit.reset_format }
    : GITHUB_RATE_LIMIT_HEADERS;
  const charset = resource.charset ?? cfg.charset;
  return providerGet(requestUrl.href, {
    headers: { Accept: 'application/json', 'User-Agent': USER_AGENT, ...cfg.headers, ...auth.headers },
    secrets: auth.secrets,
    context: `http connector: fetching ${what}`,
    ...(opts.policy ? { policy: opts.policy } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.budget ? { budget: opts.budget } : {}),
    rateLimitHeaders: limits,
    ...(charset !== undefined && { charset }),
  });
}

/**
 * How messages name the page at `url` of resource `name`: its path, which a provider's Link or next
 * URL gives (up to MAX_NEXT_URL_CHARS), redacted with `secrets`, then cut to 200 characters.
 */
const pageWhat = (name: string, url: string, secrets: readonly string[]): string => `'${name}' (${cutText(redactSecrets(new URL(url).pathname, secrets), 200)})`;

/**
 * The JSON body of a page or record answer (2xx). One whose bytes could not all be read (not
 * UTF-8, and in no charset it or the config names that holds them: `undecodable`) fails for good: read with
 * U+FFFD in their place, its records would be stored with text the provider never sent, and the
 * provider answers every retry alike. `redact` quotes the provider's Content-Type.
 */
function jsonOf(answer: { status: number; text: string; undecodable?: string }, what: string, redact: (text: string) => string): unknown {
  if (answer.undecodable !== undefined) {
    throw new Permanent(
      `http connector: ${what}: ${redact(answer.undecodable)}; read anyway, its records would hold U+FFFD where the provider sent those bytes ` +
        '(JSON is UTF-8, RFC 8259): the provider must answer in UTF-8 or name the charset it answers in (e.g. application/json; charset=windows-1252), ' +
        "or the resource's `charset` setting (or the connection's) name the one it answers in without naming it",
    );
  }
  return jsonBody(answer, `http connector: unreadable JSON for ${what}`);
}

// ---------------------------------------------------------------------------------------------
// The connector

/** The declarative http provider: see the module comment and `httpConfigSchema`. */
/**
 * What `resourceType` lists under the parsed config `cfg` (the connector's `listing`), or null for
 * a resource it does not configure. Pagination, `item` and rate limits change how a listing is
 * read, not what it serves.
 */
function listingOf(cfg: HttpConfig, resourceType: string): string | null {
  const resource = Object.hasOwn(cfg.resources, resourceType) ? cfg.resources[resourceType] : undefined;
  if (!resource) return null;
  const sorted = (record: Record<string, string> | undefined) => Object.entries(record ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([
    cfg.base_url, sorted(cfg.headers), resource.path, sorted(resource.params), resource.records, resource.id, resource.id_prefix ?? null,
    resource.updated_at ?? null, resource.since ?? null, resource.exclude_when_present ?? [], resource.order,
  ]);
}

/**
 * The digest a page token of `resourceType` (configured in `cfg`) carries: of what its listing
 * serves (listingOf) and of how it is paged (the resource's pagination, every setting, defaults
 * applied). A token of another digest starts the pass again from its first page: its URL and read
 * were made by the old paging, which the new one would continue (a page number counted from
 * another start, a page of another size), skipping or repeating records. A token written before
 * the pagination was part of the digest starts its pass again once.
 */
function tokenDigest(cfg: HttpConfig, resourceType: string, resource: Resource): string {
  const pagination = resource.pagination ?? cfg.pagination;
  const paging = Object.entries(pagination).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash('sha256').update(JSON.stringify([listingOf(cfg, resourceType), paging])).digest('base64url').slice(0, 16);
}

export const httpConnector: Connector = {
  slug: 'http',

  resourceTypes(config) {
    return Object.keys(parseHttpConfig(config).resources);
  },

  endpoint(config) {
    return { key: 'base_url', url: parseHttpConfig(config).base_url };
  },

  writeProblem(config) {
    // Fixed headers are stored and shown as they are (GET /connections answers them, and they
    // travel with every job): a credential there would be plaintext at rest and in answers. The
    // credentials hold it, sealed, and `auth` sends it (bearer, basic, or a header of its name).
    const cfg = parseHttpConfig(config);
    const carrier = cfg.auth.type === 'header' ? cfg.auth.name.toLowerCase() : null;
    for (const name of Object.keys(cfg.headers ?? {})) {
      const lower = name.toLowerCase();
      if (lower === 'authorization' || lower === carrier) {
        return `headers.${name}: a credential may not be a fixed header (stored and shown as it is): set \`auth\` (bearer, basic or header) and put it in the connection's credentials, sealed at rest and never shown`;
      }
    }
    // So are fixed query parameters: one named as a query auth's token is that credential.
    if (cfg.auth.type === 'query') {
      for (const [resource, { params }] of Object.entries(cfg.resources)) {
        if (params && Object.hasOwn(params, cfg.auth.name)) {
          return `resources.${resource}.params.${cfg.auth.name}: a credential may not be a fixed query parameter (stored and shown as it is): \`auth\` sends it, from the connection's credentials, sealed at rest and never shown`;
        }
      }
    }
    return null;
  },

  credentialsProblem(credentials, config) {
    const clientCredentials = credentials.kind === 'oauth2_client_credentials';
    if ('kind' in credentials && !clientCredentials) return "kind: must be 'oauth2_client_credentials', or left out";
    const problem = clientCredentials ? clientCredentialsProblem(credentials) : null;
    if (problem) return problem;
    // What the config's auth sends must be there (a config this connector refuses is refused for itself).
    const auth = config ? configAuth(config) : null;
    if (!auth) return null;
    // A kind the platform turns into a token (the connector then sees `{token}`); others as given.
    if (clientCredentials) {
      return sendsToken(auth) ? null : `kind: a client credentials grant gives a token, which auth type '${auth.type}' does not send (bearer, header or query send it)`;
    }
    return authCredentialsProblem(auth, credentials);
  },

  tokenProblem(config) {
    const auth = configAuth(config);
    return !auth || sendsToken(auth) ? null : `auth type '${auth.type}' sends a username and password (bearer, header or query send a token)`;
  },

  listing(config, resourceType) {
    return listingOf(parseHttpConfig(config), resourceType);
  },

  credentialUse(config) {
    const { auth } = parseHttpConfig(config);
    // Header names are case-insensitive; query parameter names are not.
    if (auth.type === 'header') return `header ${auth.name.toLowerCase()}`;
    if (auth.type === 'query') return `query ${auth.name}`;
    return auth.type;
  },

  consistentListing(config, resource) {
    const cfg = parseHttpConfig(config);
    const pagination = (Object.hasOwn(cfg.resources, resource) ? cfg.resources[resource]?.pagination : undefined) ?? cfg.pagination;
    switch (pagination.type) {
      case 'none':
        return true;
      case 'page_number':
      case 'offset':
        return pagination.max_reads > 1;
      default:
        return pagination.stable;
    }
  },

  /**
   * Looks up the deletion candidates of a full pass one by one at the resource's `item.path`: an
   * answer is alive, 404 or 410 is gone (so is an answer that `exclude_when_present` leaves out,
   * that holds null at `item.record`, or that names another id; so is an id without the resource's `id_prefix`, with no request). An id
   * `.` or `..` (after the prefix), which no URL path can carry, is neither, with no request.
   * Without `item`, nothing can be looked up: a consistent listing's word stands (every id is
   * reported gone, with no request), and otherwise only ids without the prefix are. (A pass
   * of this connector holds a cursor only where its listing is not consistent, so a held pass,
   * which the platform lets delete only what is confirmed gone, never gets "all gone" here.)
   */
  async recheck({ resource: name, externalIds, config, credentials, signal, policy, budget }) {
    const cfg = parseHttpConfig(config);
    const resource = Object.hasOwn(cfg.resources, name) ? cfg.resources[name] : undefined;
    if (!resource) throw new Permanent(`http connector: unknown resource '${name}' (configured: ${Object.keys(cfg.resources).join(', ')})`);
    // An id without the resource's `id_prefix` is no record of its listing under this config (the
    // prefix changed since it was stored): gone, with no request.
    const prefix = resource.id_prefix ?? '';
    const foreign = externalIds.filter((id) => !id.startsWith(prefix));
    const ours = externalIds.filter((id) => id.startsWith(prefix));
    if (!resource.item) {
      // A consistent listing's word, for these ids and for any past the deletion step's re-checks.
      if (httpConnector.consistentListing!(config, name)) return { alive: [], gone: [...externalIds], listingWord: true };
      return { alive: [], gone: foreign };
    }
    const auth = authOf(cfg, credentials);
    const redact = (text: string) => providerText(text, auth.secrets);
    const limits: RateLimitHeaders = cfg.rate_limit
      ? { remaining: cfg.rate_limit.remaining_header, reset: cfg.rate_limit.reset_header, resetFormat: cfg.rate_limit.reset_format }
      : GITHUB_RATE_LIMIT_HEADERS;
    const alive: ConnectorRecord[] = [];
    const gone: string[] = [...foreign];
    for (const externalId of ours) {
      signal?.throwIfAborted();
      const id = externalId.slice(prefix.length);
      // `.` and `..` are no path segment a URL can carry (the URL parser removes them, `%2e` too):
      // the request would go to another path, whose 404 would say a live record is gone. Such an
      // id cannot be looked up, so it stays as it is.
      if (id === '.' || id === '..') continue;
      const path = resource.item.path.replaceAll('{id}', encodeURIComponent(id));
      const url = new URL(cfg.base_url.replace(/\/+$/, '') + path).href;
      const what = pageWhat(name, url, auth.secrets);
      const answer = await get(cfg, resource, auth, url, what, { signal, policy, budget });
      if (answer.status === 404 || answer.status === 410) {
        gone.push(externalId);
        continue;
      }
      if (answer.status < 200 || answer.status >= 300) throw errorFor(answer.status, answer.headers, answer.text, what, limits, redact);
      const body = jsonOf(answer, what, redact);
      const found = readPath(body, resource.item.record);
      // Null where the record would be names no record (`{"data": null}`, as GraphQL APIs and many
      // JSON wrappers answer a missing one): gone. Absent still fails: a path that names nothing is
      // more likely the config's mistake, and read as gone it would tombstone live records.
      if (found === null) {
        gone.push(externalId);
        continue;
      }
      const record = recordOf(found, resource, `${what}: the record at '${resource.item.record}'`);
      if (record === null || record.externalId !== externalId) gone.push(externalId);
      else alive.push(record);
    }
    return { alive, gone };
  },

  pageKey(token) {
    const { url, read, listing, exclusive, catchup, restarts } = decodeToken(token);
    // The listing belongs to the page: a pass started again for another listing may ask the same URL.
    // So does the provider's `since` found exclusive: the URL of an inclusive step, asked so, is the step after it.
    // So does a catch-up pass, which asks the URLs of the pass (and of the catch-up before it) again.
    // So does a pass started again from its first page (POSITION_GONE), which asks its URLs again.
    const again = catchup ? ` (catch-up pass ${catchup.n})` : '';
    const over = restarts ? ` (started again ${restarts})` : '';
    return `${read ? `${url} (read ${read.n})` : url}${exclusive ? ' (since exclusive)' : ''}${again}${over}${listing === undefined ? '' : ` (listing ${listing})`}`;
  },

  async fetchPage(input: FetchPageInput): Promise<FetchPageResult> {
    const { resource: name, until, pageToken, config, credentials, signal, policy, budget } = input;
    // One listing per resource: the partition ''.
    const since = sinceOf(input, '');
    signal?.throwIfAborted();
    const cfg = parseHttpConfig(config);
    const resource = Object.hasOwn(cfg.resources, name) ? cfg.resources[name] : undefined;
    if (!resource) throw new Permanent(`http connector: unknown resource '${name}' (configured: ${Object.keys(cfg.resources).join(', ')})`);
    const pagination = resource.pagination ?? cfg.pagination;
    // A backfill: a window's start (an incremental pass has cursors; a full pass no `since`). Its
    // first request asks one unit earlier (firstUrl). An incremental pass asks its cursor as it is:
    // an exclusive provider leaves out only a change stamped at the cursor after the pass that set
    // it, which the cursor's clock-skew margin makes a provider clock that far behind.
    const firstPage = (): string => firstUrl(cfg, resource, pagination, since, input.cursors === undefined && since !== null);
    const auth = authOf(cfg, credentials);
    // Redacted first (the exact secrets and `Bearer|token <value>` forms), then cut.
    const redact = (text: string) => providerText(text, auth.secrets);
    const limits: RateLimitHeaders = cfg.rate_limit
      ? { remaining: cfg.rate_limit.remaining_header, reset: cfg.rate_limit.reset_header, resetFormat: cfg.rate_limit.reset_format }
      : GITHUB_RATE_LIMIT_HEADERS;

    // A token of another listing or pagination (a config change since it was written) starts the
    // pass again from the first page. Its digest comes from the config parsed above: a page parses
    // its config once.
    const listing = tokenDigest(cfg, name, resource);
    const stored = pageToken === null ? null : decodeToken(pageToken);
    const resumed = stored !== null && (stored.listing === undefined || stored.listing === listing) ? stored : null;
    const token: Token = resumed ?? { url: firstPage() };
    const url = resumed === null ? token.url : boundedNext(sameOrigin(token.url, cfg, 'page token', redact), 'page token', redact);
    const what = pageWhat(name, url, auth.secrets);
    const sinceMs = since?.getTime() ?? null;
    const untilMs = until?.getTime() ?? null;
    // This page is the pass's first (none resumed, or the first of a pass started again).
    const starting = resumed === null || token.first === true;
    // A page the provider's link, next URL or cursor named (not the pass's first): see POSITION_GONE.
    const linked = pagination.type === 'link_header' || pagination.type === 'next_url' || pagination.type === 'cursor';
    const restartsOnGone = linked && !starting && url !== firstPage() && (token.restarts ?? 0) < MAX_RESTARTS;
    // Carried by every later token of a pass started again.
    const carried = token.restarts === undefined ? {} : { restarts: token.restarts };
    /**
     * One page: the provider's answer, its body, its items and the records kept of them; null when
     * `mayGo` and the provider says the position went (POSITION_GONE).
     */
    const load = async (pageUrl: string, mayGo: boolean) => {
      const answer = await get(cfg, resource, auth, pageUrl, what, { signal, policy, budget });
      if (answer.status < 200 || answer.status >= 300) {
        if (mayGo && POSITION_GONE.has(answer.status)) return null;
        throw errorFor(answer.status, answer.headers, answer.text, what, limits, redact);
      }
      const body = jsonOf(answer, what, redact);
      // `null` there, or where an object on the way would be (`{"data": null}` for `data.items`), is
      // an empty list: a provider written in Go marshals one (a nil slice or pointer) so. Absent
      // stays a failure: a path that names nothing is more likely the config's mistake, and read as
      // empty it would have a full pass tombstone every record.
      const items = nullOnPath(body, resource.records) ? [] : readPath(body, resource.records);
      if (!Array.isArray(items)) throw new Permanent(`http connector: ${what}: no array of records at '${resource.records}'`);
      const records: ConnectorRecord[] = [];
      items.forEach((item, index) => {
        const record = recordOf(item, resource, `${what}: record #${index}`);
        if (record === null) return;
        const updatedMs = record.updatedAt === null ? Number.NaN : Date.parse(record.updatedAt);
        // The provider's own filter may be coarser (a date) or missing: bounds are applied here too.
        if (sinceMs !== null && updatedMs < sinceMs) return;
        if (untilMs !== null && (Number.isNaN(updatedMs) || updatedMs >= untilMs)) return;
        records.push(record);
      });
      return { answer, body, items: items as unknown[], records };
    };
    const loaded = await load(url, restartsOnGone);
    if (loaded === null) {
      // The position the provider gave went (POSITION_GONE): the pass from its first page again.
      return { records: [], nextPageToken: encodeToken({ url: firstPage(), listing, first: true, restarts: (token.restarts ?? 0) + 1 }) };
    }
    const { answer, body } = loaded;
    let { items, records } = loaded;

    if (pagination.type === 'page_number' || pagination.type === 'offset') {
      // The read's previous page again (however full it was): the end.
      if (repeatsLastPage(token.read, items, resource)) {
        items = [];
        records = [];
      }
      // Built from our own URL (the secret is added to the request only): nothing to clean.
      let next = positionNext(name, resource, pagination, url, token.read, items, until, what, token);
      const holds = new Set<string>();
      if (next?.hold !== undefined) holds.add(next.hold);
      // A short, non-empty page is the end or the provider's cap on the page size: the next
      // position is asked for now, so that the usual end (a short page, then an empty one) stays
      // one page of the task (its page limit counts pages, not requests). Its records join these.
      const size = askedSize(pagination);
      const sameRead = next !== null && next.read !== undefined && next.read.pages > 0;
      if (sameRead && size !== undefined && items.length > 0 && items.length < size) {
        signal?.throwIfAborted();
        // Our own next position, never one the provider gave: never null.
        const after = (await load(next!.url, false))!;
        // The short page's records again: the end.
        const again = repeatsLastPage(next!.read, after.items, resource);
        if (!again) records.push(...after.records);
        next = positionNext(name, resource, pagination, next!.url, next!.read, again ? [] : after.items, until, what, next!);
        if (next?.hold !== undefined) holds.add(next.hold);
      }
      const holdCursors = resource.since
        ? [...holds].map((hold) => ({ partition: '', at: new Date(sinceMillis(hold, resource.since!.format)).toISOString() }))
        : [];
      const held = holdCursors.length > 0 ? { holdCursors } : {};
      if (next === null) return { records, nextPageToken: null, ...held };
      const { hold: _hold, unsettled, ...nextToken } = next;
      return { records, nextPageToken: encodeToken({ ...nextToken, listing }), ...held, ...(unsettled !== undefined && { retryLater: unsettled }) };
    }
    const next = nextUrl(cfg, pagination, url, answer.url, answer.headers, body, auth, redact);
    // A page with no records whose next page is itself is the listing's end: a provider whose every
    // page names the position after its last record (the tail, to poll from later) gives an empty
    // page's own position back. Followed, it would serve that same page again. A page with records
    // pointing at itself still goes on, for the paging loop's guard to refuse.
    const ends = next === null || (items.length === 0 && next === url);
    // A listing newest first is caught up with at its end (catchUpOn): by stable links or cursors
    // (positions that shift are no consistent listing anyway), with change times, and without an
    // upper bound (a backfill window's pass deletes nothing, and a record changed while it pages
    // is newer than the connection's cursor: the next incremental pass brings it).
    const catchesUp = pagination.type !== 'none' && pagination.stable && resource.updated_at !== undefined && until === null;
    const times = catchesUp ? itemTimes(items, resource) : [];
    const again = (head: string, prev?: string): FetchPageResult => ({
      records,
      nextPageToken: encodeToken({ url: firstPage(), listing, ...carried, catchup: { n: (token.catchup?.n ?? 0) + 1, head, acc: '', upper: '', ...(prev !== undefined && { prev }), pages: 0 } }),
    });
    // A catch-up resumed under a config that no longer catches up (`stable: false` since): the
    // pass was read to its end before it began.
    if (token.catchup && !catchesUp) return { records, nextPageToken: null };
    if (token.catchup) {
      const { state, reached } = catchUpOn(token.catchup, items, times, resource);
      if (!reached && !ends) return { records, nextPageToken: encodeToken({ url: next, listing, ...carried, catchup: state }) };
      // One answer, or the records the catch-up before it (or the pass) served at or after its head: nothing moved behind it.
      if (state.pages === 1 || state.top === undefined || state.acc === state.prev) return { records, nextPageToken: null };
      if (state.n >= MAX_CATCHUP_PASSES) {
        // Not thrown, as for a listing paged by position that never agrees: stored, the token starts
        // the catch-up over (down to this one's head), so the job's retry reads from there.
        return {
          records,
          nextPageToken: encodeToken({ url: firstPage(), listing, ...carried, catchup: { n: 1, head: state.head, acc: '', upper: '', pages: 0 } }),
          retryLater:
            `http connector: ${what}: the listing changed during each of ${state.n} reads of its head (catch-up passes of a newest-first listing, each down to the newest change ` +
            'the one before it began with), so a record changed meanwhile may have been missed; retrying later',
        };
      }
      return again(state.top, state.upper);
    }
    // Whether the records listed so far came newest first; not known from a token written before
    // this was noted (its pass goes on as it did).
    const before: Newest | null = token.head !== undefined ? { head: token.head, low: token.low!, upper: token.upper!, ...(token.falling && { falling: token.falling }) } : null;
    const newest = !catchesUp ? null : starting ? fallingOn(null, items, times, resource) : before !== null ? fallingOn(before, items, times, resource) : null;
    if (ends) {
      // More than one page (this one was not the first), newest first: the head once more.
      if (!starting && newest?.falling === true) return again(newest.head, newest.upper);
      return { records, nextPageToken: null };
    }
    return { records, nextPageToken: encodeToken({ url: next, listing, ...carried, ...newest }) };
  },
};
