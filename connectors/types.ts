// The connector contract: a provider exposes resource types and pages of records.
// Connectors do I/O only through fetchPage (and recheck) and never retry on their own: the central
// policy (activities + workflow) decides what a failure means.
//
// What a connector must guarantee, so that incremental passes lose nothing and full passes delete
// only what the provider deleted:
// - Partitions. What the connector pages separately (GitHub: each repository) is a partition, and
//   every record names its own (`ConnectorRecord.partition`; '' for a connector with one listing).
//   The platform keeps one cursor per (connection, resource type, partition); a partition without
//   a cursor (new, or never read to its end) is read from nothing. A connector reads partition p's
//   lower bound with `sinceOf(input, p)`, never from `input.since` alone.
// - Cursor. A partition's cursor moves only when a pass read that partition to its end (the page
//   that ends it says so in `completedPartitions`; the last page of a pass ends every partition),
//   to min(newest `updatedAt` seen there, any `holdCursors` of the pass, pass start − clock skew),
//   never backwards (but back to the change time of a record a pass could not store because a later
//   tombstone stands in its way, so that the next pass reads it again). An incremental
//   pass must serve every record of a partition changed at or after its cursor (inclusive: the
//   platform de-duplicates).
// - Paging under change. A pass must serve every record that exists, unchanged, for the whole pass
//   (records changed or created meanwhile may be served or not: the next pass has them). Page
//   numbers or offsets over a listing ordered by change time do not guarantee this (an item edited
//   mid-pass moves to the end and the next one slides into a page already read): page by keyset
//   (`since` = the last change time served, inclusive, de-duplicated) or by a provider cursor.
// - Deletion detection. A full pass tombstones a record it did not see only when the connector
//   declares its listing consistent (`consistentListing`: what it lacks was absent from the
//   provider at some time during the pass, and the pass held no cursor), or when `recheck`
//   confirms the record gone. Candidates past the re-checks of a pass are left for a later full
//   pass when `recheck` looks records up and found one of those it checked alive. Without either, the platform deletes nothing it cannot confirm. Records whose change time is at or
//   after the pass start are never tombstoned on the pass's word, nor those another job's page
//   wrote or served unchanged and stored after the pass start (found alive after the listing went by).
// - Conditional requests. A stored validator (ETag) may skip only the page it validates: the
//   connector stores with it what comes after that page (`next`), and on a 304 continues there.

export type { ConnectorRecord, StoredValidator } from '../policy/records';
import type { ConnectorRecord, StoredValidator } from '../policy/records';
import type { ProviderAnswer } from '../policy/rate-budget';

/** What fetchPage needs. */
export interface FetchPageInput {
  resource: string;
  /**
   * The lower bound of every partition: only records changed at or after this time. A backfill
   * window's start, or in an incremental pass the cursor of partition ''; null for a full fetch.
   * Read a partition's bound with `sinceOf(input, partition)`, which prefers `cursors`.
   */
  since: Date | null;
  /**
   * Incremental passes (no window): the cursor of each partition that has one. A partition absent
   * from it is read from nothing (since = null): it is new, or was never read to its end.
   */
  cursors?: ReadonlyMap<string, Date>;
  /**
   * Only records changed before this time (exclusive: a record changed exactly at `until` is
   * left out, so adjacent windows [a, b) and [b, c) never both serve it). Null: no upper bound.
   * A provider without such a parameter filters client-side. A record without a change time cannot
   * be placed before `until`, so it is left out too.
   */
  until: Date | null;
  /** The token of the page to fetch; null for the first page. */
  pageToken: string | null;
  config: Record<string, unknown>;
  credentials: Record<string, unknown> | null;
  signal?: AbortSignal;
  /**
   * Where and how much a connector may fetch (hosts, timeouts, byte caps; see ProviderPolicy).
   * The strict DEFAULT_PROVIDER_POLICY of connectors/provider-http.ts when absent.
   */
  policy?: ProviderPolicy;
  /**
   * Validators stored by earlier passes, by page URL. A connector may send a conditional request
   * with one; a 304 skips that page only: the pass goes on with what the validator's `next` says
   * follows it. Given only to incremental passes without an upper bound.
   */
  validators?: ReadonlyMap<string, StoredValidator>;
  /** The shared rate budget of this connection's credential; every request asks it first. */
  budget?: RequestBudget;
}

/**
 * The shared rate budget of one credential. `acquire` resolves when a request may go (it may wait
 * a moment) or throws `RateLimited` with the wait when the budget is down to its reserve; `report`
 * hands it what the provider answered (a 304 costs nothing) and what it said about its limit.
 */
export interface RequestBudget {
  acquire(signal?: AbortSignal): Promise<void>;
  report(answer: ProviderAnswer): Promise<void>;
}


/**
 * The bounds of every provider request and paging loop, from configuration (PROVIDER_* variables).
 * A hostile or broken provider can cost a worker at most these.
 */
export interface ProviderPolicy {
  /** Host names (lower case) provider URLs may name: PROVIDER_HOSTS. */
  allowedHosts: readonly string[];
  /**
   * PROVIDER_ALLOW_PRIVATE, for test servers only: plain http, and loopback, private and
   * link-local addresses (as literals or `localhost`, besides allowedHosts; names resolving there).
   */
  allowPrivate: boolean;
  /** Largest response body, after decompression (PROVIDER_MAX_RESPONSE_BYTES). */
  maxResponseBytes: number;
  /** Time for one request, body included (PROVIDER_REQUEST_TIMEOUT_SECONDS). */
  timeoutMs: number;
  /** Largest record, as JSON (PROVIDER_MAX_RECORD_BYTES). */
  maxRecordBytes: number;
  /** Most pages one task (or one resource of an immediate sync) may fetch (PROVIDER_MAX_PAGES_PER_TASK). */
  maxPagesPerTask: number;
  /** Most records one task may fetch (PROVIDER_MAX_RECORDS_PER_TASK). */
  maxRecordsPerTask: number;
}

/** One page of records and where the next one starts (null when this was the last). */
export interface FetchPageResult {
  records: ConnectorRecord[];
  nextPageToken: string | null;
  /**
   * Validators to store in this page's transaction: the ETag of each page URL whose records this
   * result carries (or that answered 304), with what follows that page.
   */
  validators?: ({ url: string } & StoredValidator)[];
  /** The provider answered 304 Not Modified for a conditional request: that page is unchanged. */
  notModified?: boolean;
  /**
   * Partitions this pass read to their end with this page: their cursors may move (in this page's
   * transaction). The last page of a pass (no next token) ends every partition.
   */
  completedPartitions?: string[];
  /**
   * Partitions whose cursor this pass may not move past `at` (ISO), whatever newer change times it
   * saw: the connector could not read past `at` consistently (e.g. it paged by number among more
   * records changed in one second than a page holds, where an edit shifts the rest). The next
   * pass reads from there again.
   */
  holdCursors?: { partition: string; at: string }[];
  /**
   * The pass cannot go on now (e.g. a listing that kept changing while it was read again and
   * again): this page is stored with `nextPageToken`, where a retry of the task starts again,
   * and then the task fails as transient with this message (the job retries it). A connector
   * that threw instead would leave the task's stored token before this page, where a retry would
   * meet the same end and fail again, however still the provider had become.
   */
  retryLater?: string;
}

/** What `recheck` needs: the ids to look up one by one, and the request context of fetchPage. */
export type RecheckInput = Pick<FetchPageInput, 'resource' | 'config' | 'credentials' | 'signal' | 'policy' | 'budget'> & {
  externalIds: readonly string[];
};

/** What `recheck` found: records alive now (to store), and ids the provider says are gone. */
export interface RecheckResult {
  alive: ConnectorRecord[];
  /** Ids the provider answered "not found"/"gone" for. An id in neither list stays as it is. */
  gone: string[];
  /**
   * True when nothing was looked up: every id is reported gone on a consistent listing's word (a
   * connector that cannot look records up for this resource). The deletion step then lets that word
   * stand for candidates past its re-checks too; otherwise those stay live for a later full pass.
   */
  listingWord?: boolean;
}

/** A provider connector. */
export interface Connector {
  slug: string;
  /** The resource types a connection of this provider syncs, given its config. */
  resourceTypes(config: Record<string, unknown>): string[];
  /**
   * What a config about to be stored breaks of the rules only a new or changed config is held to
   * (a stored one still syncs), naming the key and never quoting a value; null when nothing. The
   * http connector's: no credential among the fixed request headers.
   */
  writeProblem?(config: Record<string, unknown>): string | null;
  fetchPage(input: FetchPageInput): Promise<FetchPageResult>;
  /**
   * Where a connection's requests go, for connectors that use the network: the config key that
   * names it and the URL (defaults applied). Credentials are bound to its origin: a config change
   * that moves it drops credentials not given again, and its host must be an allowed one.
   * Throws like resourceTypes on an invalid config.
   */
  endpoint?(config: Record<string, unknown>): { key: string; url: string };
  /**
   * How the credentials are presented to the provider given `config` (the auth scheme, and the
   * header or query parameter carrying the secret), as a string compared for equality: a config
   * change that alters it drops credentials not given again, as an origin move does. Unset: one
   * way only. Throws like resourceTypes on an invalid config.
   */
  credentialUse?(config: Record<string, unknown>): string;
  /**
   * What keeps a token the platform obtains for a connection (an OAuth 2 grant) from being sent
   * with `config` (an auth that sends a username and password), or null; none for a config this
   * connector refuses (refused for itself).
   */
  tokenProblem?(config: Record<string, unknown>): string | null;
  /**
   * What is wrong with `credentials` (e.g. a token of the wrong shape, naming its key, never its
   * value), or null; with the connection's `config`, also what it would not send of them.
   */
  credentialsProblem?(credentials: Record<string, unknown>, config?: Record<string, unknown>): string | null;
  /**
   * The page a token fetches, in words a person can check (e.g. its URL). Two tokens of the same
   * page give the same key: the paging loop detects a provider paging in circles by it.
   */
  pageKey?(token: string): string;
  /**
   * What decides which records a listing of `resourceType` serves under `config`, and under which
   * ids (where it asks, with which fixed parameters, where the records and their ids and change
   * times are), as a string compared for equality; null for a resource type the config does not
   * list. A config change that alters it drops the resource's cursors and ETags: they say nothing
   * of what the new listing serves, which is then read whole. Throws like resourceTypes on an
   * invalid config. Unset: no config change alters a listing (a partition change is handled by
   * `partitions`).
   */
  listing?(config: Record<string, unknown>, resourceType: string): string | null;
  /**
   * `next`, a config about to be stored over `current`, with each name the provider takes as one
   * already configured (GitHub's repositories, whose names ignore letter case) spelled as
   * `current` spells it: records' ids and partitions' cursors name it, so another spelling of the
   * same thing would store its records again under other ids. Unset (or either config not
   * readable): `next` as given.
   */
  keepSpelling?(current: Record<string, unknown>, next: Record<string, unknown>): Record<string, unknown>;
  /** The partitions a connection's config reads separately (GitHub: its repositories); absent: one, ''. */
  partitions?(config: Record<string, unknown>): string[];
  /**
   * What the external id of every record of partition `partition` starts with, and no other
   * partition's does (GitHub: `owner/name#`): a config change that stops naming the partition
   * tombstones the records it finds by it. Required with `partitions`.
   */
  partitionIdPrefix?(partition: string): string;
  /**
   * Whether a full pass over `resource` is a consistent listing: a record it did not serve was
   * absent from the provider at some moment of the pass (keyset or provider-cursor paging, or an
   * order in which changes only move items to pages not yet read). Unset: false.
   */
  consistentListing?(config: Record<string, unknown>, resource: string): boolean;
  /**
   * Looks records up by id, one by one (each costs a request): which are alive (with their current
   * data) and which the provider says are gone. The deletion step confirms candidates with it
   * (bounded in number: those past the bound wait for a later full pass) before it tombstones them.
   */
  recheck?(input: RecheckInput): Promise<RecheckResult>;
}

/**
 * The lower bound of partition `partition` in a fetch: its cursor in an incremental pass (null
 * when it has none: read it from nothing), else `since` (a window's start, or null).
 */
export function sinceOf(input: Pick<FetchPageInput, 'since' | 'cursors'>, partition: string): Date | null {
  if (input.cursors) return input.cursors.get(partition) ?? null;
  return input.since;
}

/** Base of the typed connector failures. `kind` survives serialisation into activity failures. */
export class ConnectorError extends Error {
  constructor(
    readonly kind: 'rate_limited' | 'transient' | 'permanent',
    message: string,
  ) {
    super(message);
  }
}

/** The provider asked us to slow down; `retryAfterSeconds` is its hint, when it gave one. */
export class RateLimited extends ConnectorError {
  override name = 'RateLimited';
  constructor(message: string, readonly retryAfterSeconds?: number) {
    super('rate_limited', message);
  }
}

/** A failure worth retrying (network error, 5xx). */
export class Transient extends ConnectorError {
  override name = 'Transient';
  constructor(message: string) {
    super('transient', message);
  }
}

/** A failure retrying cannot fix (bad credentials, unknown repository, invalid config). */
export class Permanent extends ConnectorError {
  override name = 'Permanent';
  constructor(message: string) {
    super('permanent', message);
  }
}

/**
 * The provider refused the credential (401). Permanent for a static token; for an OAuth 2
 * credential the activity refreshes once and retries the request once (see
 * activities/credential-provider.ts).
 */
export class Unauthorized extends Permanent {
  override name = 'Unauthorized';
}
