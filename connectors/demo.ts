// The `demo` connector: deterministic synthetic data with no network, for the local
// default, tests and benchmarks. Everything it serves is a pure function of the connection config,
// so a test can state exactly what a sync must produce (see `demoRecords`). The module holds no
// state: each connector `createDemoConnector` makes keeps its own failure counters behind
// `fail.times`, its own "worlds" (datasets a test mutates between or during passes) and, only when
// asked for (tests), a bounded fetch log. The platform registers one only when DEMO_CONNECTOR is
// on (`npm start`, tests), never by default.
//
// Paging is keyset pagination in both modes: records are ordered by (updatedAt, externalId) and a
// page token carries the key of the last record served, so the next page is "everything after
// that key". Unlike offsets, this never skips or repeats an unchanged record when other records
// change or disappear between pages (see DemoWorld for the exact semantics).
import { z } from 'zod';
import { keyPath } from './config-errors';
import { encodePageToken, pageTokenBody } from './page-token';
import {
  Permanent,
  RateLimited,
  Transient,
  type Connector,
  type ConnectorRecord,
  type FetchPageInput,
  type FetchPageResult,
} from './types';

const SECOND_MS = 1000;
const DAY_MS = 86_400 * SECOND_MS;

// ---------------------------------------------------------------------------------------------
// Config

const nonNegativeInt = (rule: string) => z.number({ error: rule }).int(rule).min(0, rule);

// Caps keep every generated timestamp a valid Date (and setTimeout exact); they are far beyond
// anything a test or benchmark needs.
const MAX_RECORDS = 10_000_000;
const MAX_REVISION = 1_000_000;
const MAX_LATENCY_MS = 2_147_483_647; // setTimeout fires at once for longer delays

const recordCount = nonNegativeInt(`must be an integer between 0 and ${MAX_RECORDS}`).max(
  MAX_RECORDS,
  `must be an integer between 0 and ${MAX_RECORDS}`,
);
const indexList = z.array(nonNegativeInt('must be an integer record index ≥ 0'), {
  error: 'must be an array of record indexes',
});
const perResource = <T extends z.ZodType>(value: T) =>
  z.record(z.string(), value, { error: 'must be an object of resource type → value' });

const failSchema = z.object(
  {
    resource: z.string({ error: 'must be a resource type' }).min(1, 'must be a resource type'),
    at_page: z.number({ error: 'must be an integer ≥ 1' }).int('must be an integer ≥ 1').min(1, 'must be an integer ≥ 1'),
    kind: z.enum(['transient', 'permanent', 'rate_limited'], {
      error: "must be one of 'transient', 'permanent', 'rate_limited'",
    }),
    retry_after_seconds: z.number({ error: 'must be a number ≥ 0' }).min(0, 'must be a number ≥ 0').optional(),
    times: nonNegativeInt('must be an integer ≥ 0').optional(),
  },
  { error: 'must be an object { resource, at_page, kind, retry_after_seconds?, times? }' },
);

/**
 * The demo connection config. Every key is optional; unknown keys are ignored because a
 * connection's config may carry keys meant for other parts of the platform.
 */
export const demoConfigSchema = z.object({
  /** Serve a test's in-process DemoWorld (of the same connector) instead of generated records. */
  world: z
    .string({ error: 'must be a demo world id' })
    .min(1, 'must be a demo world id')
    .meta({ description: 'The id of a dataset a test registered in the same process; an unknown id is refused' })
    .optional(),
  resource_types: z
    .array(z.string({ error: 'must contain resource type names' }).min(1, 'must not contain empty names'), {
      error: 'must be an array of resource type names',
    })
    .max(50, 'must name at most 50 resource types')
    .refine((names) => new Set(names).size === names.length, 'must not contain duplicates')
    .meta({ uniqueItems: true })
    .optional(),
  records_per_resource: z
    .union([recordCount, perResource(recordCount)], {
      error: `must be an integer between 0 and ${MAX_RECORDS}, or an object of resource type → such an integer`,
    })
    .default(100),
  page_size: z
    .number({ error: 'must be an integer between 1 and 1000' })
    .int('must be an integer between 1 and 1000')
    .min(1, 'must be an integer between 1 and 1000')
    .max(1000, 'must be an integer between 1 and 1000')
    .default(100),
  latency_ms: nonNegativeInt(`must be an integer between 0 and ${MAX_LATENCY_MS}`)
    .max(MAX_LATENCY_MS, `must be an integer between 0 and ${MAX_LATENCY_MS}`)
    .default(0),
  seed: z.string({ error: 'must be a string' }).default('demo'),
  revision: nonNegativeInt(`must be an integer between 0 and ${MAX_REVISION}`)
    .max(MAX_REVISION, `must be an integer between 0 and ${MAX_REVISION}`)
    .default(0),
  changes: z
    .object(
      {
        deleted: perResource(indexList).default({}),
        changed: perResource(indexList).default({}),
      },
      { error: 'must be an object { deleted?, changed? }' },
    )
    .default({ deleted: {}, changed: {} }),
  base_time: z.iso
    .datetime({ offset: true, error: 'must be an ISO 8601 date-time such as 2025-01-01T00:00:00Z' })
    .default('2025-01-01T00:00:00Z'),
  fail: z.union([failSchema, z.array(failSchema)]).optional(),
});

/** A validated demo config, defaults applied. */
export type DemoConfig = z.output<typeof demoConfigSchema>;
/** One injected failure (`fail` in the config). */
export type DemoFailure = z.output<typeof failSchema>;

/**
 * `key: problem` lines for one zod issue. A union (`fail`: one object or an array) reports the
 * branch whose shape matched, so the message names `fail.at_page` rather than just "fail".
 */
function describeIssue(issue: z.core.$ZodIssue, prefix: readonly PropertyKey[]): string[] {
  const path = [...prefix, ...issue.path];
  if (issue.code === 'invalid_union') {
    const matched = issue.errors.find((branch) => branch.length > 0 && branch.every((inner) => inner.path.length > 0));
    if (matched) return matched.flatMap((inner) => describeIssue(inner, path));
  }
  return [`${keyPath(path)}: ${issue.message}`];
}

/**
 * Validates a connection's demo config and applies the defaults. Throws `Permanent` naming the
 * offending key, because retrying cannot fix a config.
 */
export function parseDemoConfig(config: Record<string, unknown>, worlds: Worlds = NO_WORLDS): DemoConfig {
  const parsed = demoConfigSchema.safeParse(config ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.flatMap((issue) => describeIssue(issue, []));
    throw new Permanent(`demo connector: invalid config: ${problems.join('; ')}`);
  }
  if (parsed.data.world !== undefined && !worlds.has(parsed.data.world)) {
    throw new Permanent(`demo connector: invalid config: world: unknown demo world '${parsed.data.world}'`);
  }
  return parsed.data;
}

/** The resource types of a parsed config (see the connector's `resourceTypes`). */
function resourceTypesOf(cfg: DemoConfig, worlds: Worlds): string[] {
  if (cfg.resource_types) return [...cfg.resource_types];
  if (cfg.world !== undefined) return [...worldOf(cfg, worlds).resources.keys()];
  return ['issues', 'pull_requests', 'users'];
}

// ---------------------------------------------------------------------------------------------
// Generated records

/** How many records (before deletions) the generated mode has for `resource`. */
function countOf(cfg: DemoConfig, resource: string): number {
  const n = cfg.records_per_resource;
  return typeof n === 'number' ? n : (n[resource] ?? 100);
}

const ADJECTIVES = ['Brisk', 'Calm', 'Dusty', 'Eager', 'Fuzzy', 'Gentle', 'Hollow', 'Icy', 'Jolly', 'Keen', 'Lucky', 'Misty', 'Noble', 'Odd', 'Proud', 'Quiet'];
const NOUNS = ['otter', 'harbor', 'lantern', 'meadow', 'comet', 'falcon', 'glacier', 'island', 'kettle', 'lagoon', 'maple', 'nebula', 'orchard', 'pebble', 'quartz', 'river'];

/** FNV-1a (32 bit): tiny, stable across platforms and Node versions, good enough for labels. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/**
 * The deterministic title of record `index`: a function of seed, resource, index and the revision
 * at which it last changed (0 when it never did), so a change is visible in the data too.
 */
export function demoTitle(seed: string, resource: string, index: number, revision: number): string {
  const hash = fnv1a(`${seed}\u0000${resource}\u0000${index}\u0000${revision}`);
  return `${ADJECTIVES[hash & 15]} ${NOUNS[(hash >>> 4) & 15]} ${hash.toString(16).padStart(8, '0')}`;
}

/** The externalId of generated record `index`. */
export const demoExternalId = (resource: string, index: number): string => `${resource}-${index}`;

// ---------------------------------------------------------------------------------------------
// Keyset ordering

/** The sort key: records are served in ascending (updatedAt, externalId) order. */
interface Key {
  ms: number;
  externalId: string;
}

// Code-unit order, as Postgres compares under the "C" collation: locale-independent and stable.
const compareIds = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const compareKeys = (a: Key, b: Key) => a.ms - b.ms || compareIds(a.externalId, b.externalId);

/**
 * What a page may contain: updatedAt ≥ sinceMs (incremental), updatedAt < untilMs (a window's
 * end, exclusive) and key > after (keyset).
 */
interface Bounds {
  sinceMs: number | null;
  untilMs: number | null;
  after: Key | null;
}

const passes = (key: Key, bounds: Bounds) =>
  (bounds.sinceMs === null || key.ms >= bounds.sinceMs) &&
  (bounds.untilMs === null || key.ms < bounds.untilMs) &&
  (bounds.after === null || compareKeys(key, bounds.after) > 0);

interface Candidate extends Key {
  build(): ConnectorRecord;
}

/**
 * The first `limit` generated records within `bounds`, in key order, without materialising the
 * whole resource: unchanged records form one strictly increasing sequence (base + i s) and changed
 * ones another (base + revision days + i s), so each starts at an index computed arithmetically,
 * and the two are merged up to `bounds.untilMs`. Only the (config-sized) deleted/changed lists are
 * scanned.
 */
function generatedCandidates(cfg: DemoConfig, resource: string, bounds: Bounds, limit: number): Candidate[] {
  const n = countOf(cfg, resource);
  const deleted = new Set(cfg.changes.deleted[resource] ?? []);
  const changedSet = new Set((cfg.changes.changed[resource] ?? []).filter((i) => i < n && !deleted.has(i)));
  const changed = [...changedSet].sort((a, b) => a - b);
  const baseMs = Date.parse(cfg.base_time);
  const changedBaseMs = baseMs + cfg.revision * DAY_MS;

  /** Smallest index whose key (offsetMs + i s, `${resource}-${i}`) passes the lower bounds. */
  const firstIndex = (offsetMs: number): number => {
    let start = 0;
    if (bounds.sinceMs !== null) start = Math.max(start, Math.ceil((bounds.sinceMs - offsetMs) / SECOND_MS));
    if (bounds.after !== null) {
      let i = Math.max(0, Math.ceil((bounds.after.ms - offsetMs) / SECOND_MS));
      // Same timestamp as the last key served: only a later externalId comes after it.
      if (offsetMs + i * SECOND_MS === bounds.after.ms && compareIds(demoExternalId(resource, i), bounds.after.externalId) <= 0) i++;
      start = Math.max(start, i);
    }
    return start;
  };

  const candidate = (index: number, isChanged: boolean): Candidate => {
    const ms = (isChanged ? changedBaseMs : baseMs) + index * SECOND_MS;
    const externalId = demoExternalId(resource, index);
    const revision = isChanged ? cfg.revision : 0;
    return {
      ms,
      externalId,
      build: () => ({
        externalId,
        updatedAt: new Date(ms).toISOString(),
        data: { id: externalId, resource, index, title: demoTitle(cfg.seed, resource, index, revision), revision },
      }),
    };
  };

  const out: Candidate[] = [];
  let i = firstIndex(baseMs);
  const nextOriginal = (): Candidate | null => {
    while (i < n && (deleted.has(i) || changedSet.has(i))) i++;
    return i < n ? candidate(i, false) : null;
  };
  const changedStart = firstIndex(changedBaseMs);
  let c = changed.findIndex((index) => index >= changedStart);
  if (c < 0) c = changed.length;

  let original = nextOriginal();
  while (out.length < limit) {
    const changedIndex = changed[c];
    const next = changedIndex === undefined ? null : candidate(changedIndex, true);
    let chosen: Candidate;
    if (original !== null && (next === null || compareKeys(original, next) < 0)) {
      chosen = original;
      i++;
      original = nextOriginal();
    } else if (next !== null) {
      chosen = next;
      c++;
    } else break;
    // Keys only grow from here: the first one at or after `until` ends the merge.
    if (bounds.untilMs !== null && chosen.ms >= bounds.untilMs) break;
    out.push(chosen);
  }
  // firstIndex bounds each sequence exactly, but a final filter keeps the contract obvious.
  return out.filter((cand) => passes(cand, bounds));
}

// ---------------------------------------------------------------------------------------------
// Worlds (tests)

/** One record of a DemoWorld. `updatedAt` is normalised to an ISO string. */
export interface DemoWorldRecord {
  updatedAt: string;
  data: Record<string, unknown>;
}

/**
 * A mutable in-memory dataset a test controls; a connection whose config has `world: "<id>"`
 * serves its current records with the same ordering, `since`, `until` and keyset paging rules as
 * the generated mode.
 *
 * Semantics when records change while a pass is between pages (keyset on (updatedAt, externalId),
 * with a test clock that only moves forward):
 * - a record not yet served that changes moves to a later key, still after the cursor: it is served
 *   exactly once, in its new version;
 * - a record not yet served that is removed is never served (so a full sync deletes it);
 * - a record already served that changes moves to a key after the cursor, so it is served AGAIN
 *   later in the same pass, in its new version (never twice within one page). This at-least-once
 *   behaviour is deliberate: it is what real updatedAt-ordered providers do, upserts make it
 *   harmless, and the alternative (pinning a snapshot at the first page) would either drop the
 *   change from this pass or let the sync cursor jump past it, losing it for good;
 * - a record whose updatedAt moves backwards behind the cursor is not served in this pass.
 */
export class DemoWorld {
  /** resource → externalId → record. */
  readonly resources = new Map<string, Map<string, DemoWorldRecord>>();

  constructor(readonly id: string) {}

  /** Declares a resource type (so resourceTypes lists it) even before it has records. */
  addResource(resource: string): Map<string, DemoWorldRecord> {
    let records = this.resources.get(resource);
    if (!records) this.resources.set(resource, (records = new Map()));
    return records;
  }

  /** Inserts or replaces a record. `updatedAt` must be a valid date; it is stored as ISO. */
  upsert(resource: string, externalId: string, data: Record<string, unknown>, updatedAt: string | Date): void {
    const ms = updatedAt instanceof Date ? updatedAt.getTime() : Date.parse(updatedAt);
    if (Number.isNaN(ms)) throw new Error(`DemoWorld.upsert: invalid updatedAt ${String(updatedAt)}`);
    this.addResource(resource).set(externalId, { updatedAt: new Date(ms).toISOString(), data: structuredClone(data) });
  }

  /** Removes a record; true when it existed. */
  remove(resource: string, externalId: string): boolean {
    return this.resources.get(resource)?.delete(externalId) ?? false;
  }
}

/** The worlds a config's `world` key can name: those of one connector (in-process, for tests). */
type Worlds = ReadonlyMap<string, DemoWorld>;

/** No worlds: what a config is checked against without a connector. */
const NO_WORLDS: Worlds = new Map();

function worldOf(cfg: DemoConfig, worlds: Worlds): DemoWorld {
  const world = cfg.world === undefined ? undefined : worlds.get(cfg.world);
  // parseDemoConfig checked it, but a test may have dropped the world since.
  if (!world) throw new Permanent(`demo connector: invalid config: world: unknown demo world '${String(cfg.world)}'`);
  return world;
}

function worldCandidates(cfg: DemoConfig, worlds: Worlds, resource: string, bounds: Bounds, limit: number): Candidate[] {
  const records = worldOf(cfg, worlds).resources.get(resource) ?? new Map<string, DemoWorldRecord>();
  const out: Candidate[] = [];
  for (const [externalId, record] of records) {
    const key = { ms: Date.parse(record.updatedAt), externalId };
    if (!passes(key, bounds)) continue;
    // Cloned when served, so a test mutating data it got back cannot alter the world (and
    // upsert replaces the stored object, so a served page never changes afterwards either).
    out.push({ ...key, build: () => ({ externalId, updatedAt: record.updatedAt, data: structuredClone(record.data) }) });
  }
  return out.sort(compareKeys).slice(0, limit);
}

function candidates(cfg: DemoConfig, worlds: Worlds, resource: string, bounds: Bounds, limit: number): Candidate[] {
  return cfg.world !== undefined ? worldCandidates(cfg, worlds, resource, bounds, limit) : generatedCandidates(cfg, resource, bounds, limit);
}

// ---------------------------------------------------------------------------------------------
// Page tokens

const tokenSchema = z.object({
  r: z.string(), // resource: a token replayed against another resource is a bug, not "page 1"
  u: z.iso.datetime(), // updatedAt of the last record served
  e: z.string(), // its externalId
  p: z.number().int().min(2), // 1-based number of the page this token fetches (for `fail.at_page`)
});

function encodeToken(resource: string, last: Key, page: number): string {
  const body = { r: resource, u: new Date(last.ms).toISOString(), e: last.externalId, p: page };
  return encodePageToken(body);
}

function decodeToken(token: string, resource: string): { after: Key; page: number } {
  const parsed = tokenSchema.safeParse(pageTokenBody(token));
  if (!parsed.success) throw new Permanent(`demo connector: invalid page token '${token}'`);
  if (parsed.data.r !== resource) {
    throw new Permanent(`demo connector: page token of resource '${parsed.data.r}' used for '${resource}'`);
  }
  return { after: { ms: Date.parse(parsed.data.u), externalId: parsed.data.e }, page: parsed.data.p };
}

// ---------------------------------------------------------------------------------------------
// Test hooks: injected failure counters and the fetch log

/** One fetchPage call, as tests observe it. `at` is Date.now() when the call started. */
export interface DemoFetchLogEntry {
  resource: string;
  pageToken: string | null;
  at: number;
}

/** The most entries a fetch log keeps by default; older ones are dropped, so it can never grow without bound. */
export const DEMO_FETCH_LOG_LIMIT = 100_000;

/** A demo connector with what it keeps between calls, for the tests that read or reset it. */
export interface DemoConnector extends Connector {
  /** The worlds its configs' `world` key can name. */
  readonly worlds: Map<string, DemoWorld>;
  /** Creates (or replaces with an empty one) world `id` of this connector. */
  createWorld(id: string): DemoWorld;
  /**
   * Every fetchPage call, successful or not, appended when the call starts (only while recording,
   * and only the latest `limit`): tests use it to prove that no page was fetched twice or after a
   * cancellation. Emptied in place, so references stay valid.
   */
  readonly fetchLog: DemoFetchLogEntry[];
  /** Turns recording into `fetchLog` on or off, keeping at most `limit` entries. */
  recordFetches(on: boolean, limit?: number): void;
  resetFetchLog(): void;
  /** Forgets how often each injected failure has fired, so `times` counts from zero again. */
  resetFailures(): void;
  /** `demoRecords` with this connector's worlds. */
  records(config: Record<string, unknown>, resource: string, since?: Date | null, until?: Date | null): ConnectorRecord[];
}

/** Throws the configured failure for this page, unless its `times` budget is spent. */
function injectFailure(failureCounts: Map<string, number>, cfg: DemoConfig, resource: string, page: number): void {
  const rules = cfg.fail === undefined ? [] : Array.isArray(cfg.fail) ? cfg.fail : [cfg.fail];
  const rule = rules.find((r) => r.resource === resource && r.at_page === page);
  if (!rule) return;
  // Keyed by world/seed too, so two demo connections in one process do not share a budget.
  const key = JSON.stringify([cfg.world ?? null, cfg.seed, resource, page]);
  const fired = failureCounts.get(key) ?? 0;
  if (rule.times !== undefined && fired >= rule.times) return;
  failureCounts.set(key, fired + 1);
  const what = `demo connector: injected ${rule.kind} failure fetching page ${page} of '${resource}'`;
  switch (rule.kind) {
    case 'rate_limited':
      throw new RateLimited(what, rule.retry_after_seconds);
    case 'transient':
      throw new Transient(what);
    case 'permanent':
      throw new Permanent(what);
  }
}

/** Waits `ms`, rejecting with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  signal?.throwIfAborted();
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

// ---------------------------------------------------------------------------------------------
// The connector

/** `since` or `until` in ms (null: unbounded); throws Permanent naming it when it is no valid Date. */
function timeBound(name: 'since' | 'until', value: Date | null | undefined): number | null {
  if (value === null || value === undefined) return null;
  const ms = value instanceof Date ? value.getTime() : Number.NaN;
  if (Number.isNaN(ms)) throw new Permanent(`demo connector: invalid ${name} ${String(value)}`);
  return ms;
}

function assertResource(cfg: DemoConfig, worlds: Worlds, resource: string): void {
  const types = resourceTypesOf(cfg, worlds);
  if (!types.includes(resource)) {
    throw new Permanent(`demo connector: unknown resource '${resource}' (configured: ${types.join(', ') || 'none'})`);
  }
}

/**
 * Every record a full pass over `resource` serves, in order — what a sync of this config must
 * produce. With `since`, what an incremental pass serves; with `until` too, what a backfill of the
 * window [since, until) serves. Throws like fetchPage on bad input. `worlds`: those a `world` key
 * may name (a connector's `records` passes its own).
 */
export function demoRecords(
  config: Record<string, unknown>,
  resource: string,
  since: Date | null = null,
  until: Date | null = null,
  worlds: Worlds = NO_WORLDS,
): ConnectorRecord[] {
  const cfg = parseDemoConfig(config, worlds);
  assertResource(cfg, worlds, resource);
  const bounds = { sinceMs: timeBound('since', since), untilMs: timeBound('until', until), after: null };
  return candidates(cfg, worlds, resource, bounds, Number.POSITIVE_INFINITY).map((c) => c.build());
}

/**
 * A demo provider (see the module comment and `demoConfigSchema` for what it serves) with its own
 * worlds and failure counters, recording no fetch log until told to.
 */
export function createDemoConnector(): DemoConnector {
  const worlds = new Map<string, DemoWorld>();
  const failureCounts = new Map<string, number>();
  const fetchLog: DemoFetchLogEntry[] = [];
  let recording = false;
  let limit = DEMO_FETCH_LOG_LIMIT;
  const logFetch = (entry: DemoFetchLogEntry) => {
    if (!recording) return;
    if (fetchLog.length >= limit) fetchLog.splice(0, fetchLog.length - limit + 1);
    fetchLog.push(entry);
  };

  return {
    slug: 'demo',
    worlds,
    fetchLog,

    createWorld(id) {
      const world = new DemoWorld(id);
      worlds.set(id, world);
      return world;
    },
    recordFetches(on, max = DEMO_FETCH_LOG_LIMIT) {
      recording = on;
      limit = max;
    },
    resetFetchLog() {
      fetchLog.length = 0;
    },
    resetFailures() {
      failureCounts.clear();
    },
    records(config, resource, since = null, until = null) {
      return demoRecords(config, resource, since, until, worlds);
    },

    resourceTypes(config) {
      return resourceTypesOf(parseDemoConfig(config, worlds), worlds);
    },

    // Keyset paging on (updatedAt, externalId): a record unchanged for the whole pass is served.
    consistentListing() {
      return true;
    },

    async fetchPage({ resource, since, until, pageToken, config, signal }: FetchPageInput): Promise<FetchPageResult> {
      logFetch({ resource, pageToken, at: Date.now() });
      signal?.throwIfAborted();
      const cfg = parseDemoConfig(config, worlds);
      assertResource(cfg, worlds, resource);
      const { after, page } = pageToken === null ? { after: null, page: 1 } : decodeToken(pageToken, resource);
      const sinceMs = timeBound('since', since);
      const untilMs = timeBound('until', until);

      // Latency first, then the failure: like a real request that takes time and then fails.
      await sleep(cfg.latency_ms, signal);
      injectFailure(failureCounts, cfg, resource, page);

      // One extra candidate tells whether another page exists, so the last page says so itself
      // (no trailing empty page).
      const found = candidates(cfg, worlds, resource, { sinceMs, untilMs, after }, cfg.page_size + 1);
      const pageRecords = found.slice(0, cfg.page_size);
      const last = pageRecords[pageRecords.length - 1];
      const nextPageToken = found.length > cfg.page_size && last ? encodeToken(resource, last, page + 1) : null;
      return { records: pageRecords.map((c) => c.build()), nextPageToken };
    },
  };
}
