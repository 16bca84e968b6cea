import { createHash } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import { cutText, DEFAULT_PROVIDER_POLICY, providerText, redactSecrets } from './provider-http';
import { Permanent, Transient, type Connector, type ConnectorRecord, type FetchPageInput, type FetchPageResult } from './types';
import { storableChangeTime } from '../policy/change-time';
import { exactJson, JsonNumber, setOwn, STORED_MAX_FRACTION_DIGITS, STORED_MAX_WHOLE_DIGITS, storedSize } from '../policy/exact-json';
import { storableText } from '../policy/storable-text';

/** What a task already fetched before this run of its paging loop (a resumed task counts on). */
export interface PagingProgress {
  pages: number;
  records: number;
}

/**
 * `value` with every string and key made storable (`storableText`): Postgres text and jsonb refuse
 * a NUL, and jsonb refuses a UTF-16 surrogate without its pair (a provider that cut a string
 * between the halves of an emoji), which is replaced as a UTF-8 decoder would replace it.
 */
export function storableValue<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (value instanceof JsonNumber) return value;
  if (Array.isArray(value)) return value.map(storableValue) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) setOwn(out, storableText(key), storableValue(inner));
    return out as T;
  }
  return value;
}

/** True when JSON text may hold what `storableText` changes (a NUL, or a surrogate JSON escapes: a lone one). */
const MAY_NEED_CHANGE = /\\u0000|\\ud[89a-f]/i;

/**
 * Provider records made safe to store, or a `Permanent` failure: every string is made storable
 * (`storableValue`: a provider may send `\u0000` or a lone surrogate, which Postgres refuses), a
 * change time is stored as the instant the connector read (`storableChangeTime`: Postgres refuses
 * some text JavaScript reads, such as an impossible day, or reads it otherwise; no change time when
 * it lies outside years 1-9999), and a record larger than `maxRecordBytes` as JSON with its numbers
 * written out in full (`storedSize`), or holding a number the database cannot store, fails the task
 * (one oversized record must not fill a worker's memory and the database; retrying would fetch it
 * again). Every record a task stores passes here: a listing's pages (`pagesOf`) and the records a
 * full pass's deletion step finds alive by looking them up (`recheck`), which would otherwise fail
 * that step on every retry. So does an id longer than MAX_EXTERNAL_ID_BYTES, which no index row holds.
 * A failure names the record by `quotedId`, redacted with `secrets()` (read only then).
 */
export function storableRecords(records: ConnectorRecord[], maxRecordBytes: number, resource: string, secrets: () => readonly string[] = () => []): ConnectorRecord[] {
  return records.map((record) => {
    const json = recordJson(record, resource, secrets);
    const size = storedSize(json);
    if ('unstorable' in size) {
      throw new Permanent(
        `record '${quotedId(record, secrets)}' of '${resource}' holds a number the database cannot store ` +
          `(more than ${STORED_MAX_WHOLE_DIGITS} digits before the point or ${STORED_MAX_FRACTION_DIGITS} after it): ${cutText(size.unstorable, 40)}`,
      );
    }
    if (size.bytes > maxRecordBytes) {
      throw new Permanent(`record '${quotedId(record, secrets)}' of '${resource}' exceeds ${maxRecordBytes} bytes (PROVIDER_MAX_RECORD_BYTES)`);
    }
    const id = String(record.externalId);
    const idBytes = Buffer.byteLength(storableText(id), 'utf8');
    if (idBytes > MAX_EXTERNAL_ID_BYTES) {
      throw new Permanent(
        `record '${quotedId(record, secrets)}' of '${resource}' has an id of ${idBytes} bytes, more than ${MAX_EXTERNAL_ID_BYTES} (the longest id the database indexes)`,
      );
    }
    const updatedAt = record.updatedAt === null ? null : storableChangeTime(record.updatedAt);
    const mayNeedChange = MAY_NEED_CHANGE.test(json) || storableText(id) !== id;
    if (mayNeedChange) return { ...record, externalId: storableValue(record.externalId), updatedAt, data: storableValue(record.data) };
    return updatedAt === record.updatedAt ? record : { ...record, updatedAt };
  });
}

/**
 * The longest id a record may have, in UTF-8 bytes (id prefix included): the records' primary key
 * (connection, resource type, id) must fit one btree index row (2704 bytes, of which a resource type
 * of 64 characters and the row's own fields take up to about 300). A longer id would fail the page's
 * write with Postgres's own error, untyped and so retried on every run; the provider serves it again
 * on each, so it fails the task for good, naming the record.
 */
export const MAX_EXTERNAL_ID_BYTES = 2000;

/** Most characters of a record's id a failure quotes. */
const MAX_QUOTED_ID = 200;

/**
 * A record's id as a failure quotes it: redacted with `secrets` (and known token shapes) first,
 * then cut to MAX_QUOTED_ID characters. The id is the provider's text (an http connection's
 * `id_field` may hold anything); cut first, a secret across the cut would leave its prefix, which
 * the redaction of the failure then misses.
 */
const quotedId = (record: ConnectorRecord, secrets: () => readonly string[]): string => cutText(redactSecrets(String(record.externalId), secrets()), MAX_QUOTED_ID);

/**
 * Arrays wrapped around a record's data when it is first written out: what writes or serves it
 * later wraps it in a few levels of its own (the upsert's page, the feed's answer), and each must
 * still be able to write it out. One `exactJson` either way.
 */
const NESTING_HEADROOM = 16;
const HEADROOM_OPEN = '['.repeat(NESTING_HEADROOM);

/**
 * `record.data` as JSON, its numbers as the provider wrote them (`exactJson`, as the upsert writes
 * it). Data nested more deeply than that can go (thousands of levels, less the headroom) fails for
 * good: retrying would fetch it again.
 */
function recordJson(record: ConnectorRecord, resource: string, secrets: () => readonly string[]): string {
  let wrapped: unknown = record.data;
  for (let i = 0; i < NESTING_HEADROOM; i++) wrapped = [wrapped];
  let json: string;
  try {
    json = exactJson(wrapped);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    throw new Permanent(`record '${quotedId(record, secrets)}' of '${resource}' is nested too deeply to store (more than about 4,000 levels of arrays and objects)`);
  }
  return json.startsWith(HEADROOM_OPEN) ? json.slice(NESTING_HEADROOM, json.length - NESTING_HEADROOM) : json;
}

/** The page a token stands for (the connector's own description, e.g. its URL), for loop detection and messages. */
function pageKey(connector: Connector, token: string): string {
  try {
    return connector.pageKey?.(token) ?? token;
  } catch {
    return token;
  }
}

/**
 * What the paging loop keeps of a page it fetched, to know it again: the SHA-256 of its key, a
 * fixed 43 characters however long the key is. A key is as long as the provider's next page makes
 * it (the http connector's next URL, up to 16 KiB), and a task may fetch PROVIDER_MAX_PAGES_PER_TASK
 * pages (100,000 by default): kept whole, the keys could fill gigabytes of a worker's memory.
 */
const fingerprint = (key: string): string => createHash('sha256').update(key, 'utf8').digest('base64url');

/**
 * The page a token stands for, as a message quotes it: redacted with `secrets` (and known token
 * shapes) first, then cut (about 500 characters), as other provider text is (`providerText`), since
 * it is built from what the provider answered (a next URL of up to 16 KiB, say). Cut first, a
 * secret across the cut would leave its prefix, which the redaction of the failure then misses.
 */
const quotedPage = (key: string, secrets: readonly string[]): string => providerText(key, secrets);

/**
 * Pages through one resource of a connector, starting at `pageToken` (null: the first page) and
 * following each page's `nextPageToken` until there is none. Every page is asked for with the same
 * bounds (`request.since`, `request.until`). Stops with the signal's reason before a fetch once
 * `request.signal` has aborted. The one paging loop of job tasks and immediate syncs, so its
 * limits hold for both (`request.policy`, else the defaults): at most `maxPagesPerTask` pages and
 * `maxRecordsPerTask` records, counting what `done` says earlier runs of the task fetched, and no
 * record over `maxRecordBytes`; exceeding one fails with `Permanent`. Records come out storable
 * (NUL characters stripped, lone surrogates replaced), and each page says when its request began (`fetchedAt`,
 * read from `clock` just before the request: the activities read the database's clock, the one a
 * full pass's tombstones are written in, so a page and a tombstone are ordered whatever the clock
 * of the worker that fetched the page).
 *
 * A page that says `retryLater` is handed out (to be stored with its next token), and then the loop
 * fails with a `Transient` error of that message.
 *
 * Guards: a next page this loop has already fetched (a provider whose Link or cursor points back
 * to an earlier page) fails with a `Permanent` error naming the connector and the page: retrying
 * would only page in the same circle. A page a message names is quoted redacted with `secrets()`
 * (the credential values the run sent, as they are when the guard fails), then cut.
 */
export async function* pagesOf(
  connector: Connector,
  request: Omit<FetchPageInput, 'pageToken'>,
  pageToken: string | null,
  done: PagingProgress = { pages: 0, records: 0 },
  secrets: () => readonly string[] = () => [],
  clock: () => Promise<Date> = async () => new Date(),
): AsyncGenerator<FetchPageResult & { fetchedAt: Date }> {
  const policy = request.policy ?? DEFAULT_PROVIDER_POLICY;
  let pages = done.pages;
  let records = done.records;
  let token = pageToken;
  // Fingerprints of the pages fetched (`fingerprint`).
  const fetched = new Set<string>();
  if (token !== null) fetched.add(fingerprint(pageKey(connector, token)));
  do {
    request.signal?.throwIfAborted();
    if (pages >= policy.maxPagesPerTask) {
      throw new Permanent(
        `${connector.slug} connector: ${request.resource}: more than ${policy.maxPagesPerTask} pages in one task (PROVIDER_MAX_PAGES_PER_TASK); ` +
          `stopped before page ${token === null ? '(first)' : `'${quotedPage(pageKey(connector, token), secrets())}'`}`,
      );
    }
    const fetchedAt = await clock();
    const page = await connector.fetchPage({ ...request, pageToken: token });
    pages += 1;
    records += page.records.length;
    if (records > policy.maxRecordsPerTask) {
      throw new Permanent(`${connector.slug} connector: ${request.resource}: more than ${policy.maxRecordsPerTask} records in one task (PROVIDER_MAX_RECORDS_PER_TASK)`);
    }
    yield { ...page, records: storableRecords(page.records, policy.maxRecordBytes, request.resource, secrets), fetchedAt };
    // Stored (with its next token, where a retry starts again): now the task fails, to be retried.
    if (page.retryLater !== undefined) throw new Transient(page.retryLater);
    token = page.nextPageToken;
    if (token !== null) {
      const key = pageKey(connector, token);
      const print = fingerprint(key);
      if (fetched.has(print)) {
        throw new Permanent(
          `${connector.slug} connector: ${request.resource}: paging loop: page ${pages} points back to '${quotedPage(key, secrets())}', ` +
            'which this task already fetched; stopped instead of paging forever',
        );
      }
      fetched.add(print);
    }
  } while (token);
}

/**
 * The pages of `pages`, each next one asked for just after the previous one is handed out: a
 * page is fetched while the consumer stores the one before it. The next fetch begins only once
 * the consumer's synchronous start on the page has run (its statement is on the wire before the
 * fetch's own work, e.g. parsing or generating records, takes the thread). Pages still come out
 * one at a time and in order, and a fetch's failure comes out only after every earlier page (so
 * a consumer that stores each page before taking the next stores exactly what it did without the
 * overlap). At most one fetch runs ahead; when the consumer stops (done, or a throw), no further
 * fetch begins and the one in flight is awaited and its outcome dropped, so none outlives the
 * loop.
 */
export async function* fetchingAhead<T>(pages: AsyncGenerator<T>): AsyncGenerator<T> {
  let stopped = false;
  const ask = (): Promise<IteratorResult<T>> => {
    // Node's check phase: after this turn's promise jobs and I/O callbacks.
    const next = setImmediate().then(() => (stopped ? { done: true as const, value: undefined } : pages.next()));
    // Observed here so a failure while the consumer stops is no unhandled rejection; awaited below.
    next.catch(() => undefined);
    return next;
  };
  let next = pages.next();
  next.catch(() => undefined);
  try {
    for (;;) {
      const page = await next;
      if (page.done) return;
      next = ask();
      yield page.value;
    }
  } finally {
    stopped = true;
    await next.catch(() => undefined);
    await pages.return(undefined).catch(() => undefined);
  }
}
