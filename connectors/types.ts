// The connector contract: a provider exposes resource types and pages of records.
// Connectors do I/O only through fetchPage and never retry on their own: the central policy
// (activities + workflow) decides what a failure means.

/** One record as a provider returns it. */
export interface ConnectorRecord {
  /** The provider's stable id of the record within its resource type. */
  externalId: string;
  /** When the provider last changed it (ISO 8601), if the provider says. */
  updatedAt: string | null;
  data: Record<string, unknown>;
}

/** What fetchPage needs. */
export interface FetchPageInput {
  resource: string;
  /** Incremental fetches: only records changed at or after this time. Null for a full fetch. */
  since: Date | null;
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
   * Validators stored by earlier passes: the ETag of each first-page URL. A connector may send a
   * conditional request with one (an unchanged first page then answers 304 and ends that part of
   * the pass). Given only to incremental passes without an upper bound.
   */
  validators?: ReadonlyMap<string, string>;
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
  report(answer: { status: number; remaining: number | null; resetAt: Date | null }): Promise<void>;
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
   * Validators to store together with this page: the ETag of a first-page URL whose part of the
   * pass ended with this page (stored only then, so a 304 never hides records not yet stored).
   */
  validators?: { url: string; etag: string }[];
  /** The provider answered 304 Not Modified for a conditional request: nothing changed there. */
  notModified?: boolean;
}

/** A provider connector. */
export interface Connector {
  slug: string;
  /** The resource types a connection of this provider syncs, given its config. */
  resourceTypes(config: Record<string, unknown>): string[];
  fetchPage(input: FetchPageInput): Promise<FetchPageResult>;
  /**
   * Where a connection's requests go, for connectors that use the network: the config key that
   * names it and the URL (defaults applied). Credentials are bound to its origin: a config change
   * that moves it drops credentials not given again, and its host must be an allowed one.
   * Throws like resourceTypes on an invalid config.
   */
  endpoint?(config: Record<string, unknown>): { key: string; url: string };
  /** What is wrong with `credentials` (e.g. a token of the wrong shape, naming its key), or null. */
  credentialsProblem?(credentials: Record<string, unknown>): string | null;
  /**
   * The page a token fetches, in words a person can check (e.g. its URL). Two tokens of the same
   * page give the same key: the paging loop detects a provider paging in circles by it.
   */
  pageKey?(token: string): string;
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
