import type { Client } from '@temporalio/client';
import { countStaleConnections } from '../db/models/connections';
import { allConnectionsInUse, ping, pingBeside, type Pool } from '../db/pool';
import { singleFlight } from '../lib/single-flight';

/** What a readiness check reaches: the process's pool and Temporal client. */
export interface ReadinessDeps {
  pool: Pool;
  temporal: Client;
  /** DEFAULT_INTERVAL_SECONDS: the interval of a connection without its own (the freshness count). */
  defaultIntervalSeconds?: number;
}

/** How long a readiness answer is reused: probes come every few seconds from every balancer. */
export const READINESS_CACHE_MS = 5000;

const CHECK_TIMEOUT_MS = 2000;
/** DEFAULT_INTERVAL_SECONDS's own default, for callers that do not pass theirs. */
const DEFAULT_INTERVAL_SECONDS = 900;

/**
 * Whether a dependency answered: `ok`, or `unreachable` (the reason stays in the server log); for
 * Postgres also `busy`: no connection of the process's pool came free within the check's time
 * while every one was in use (Postgres answers them: the process is loaded, not cut off).
 */
export type Check = 'ok' | 'unreachable' | 'busy';

/** What readiness reports beside its checks (absent when Postgres did not answer). */
export interface ReadinessDetails {
  /** Active connections whose last successful sync is older than twice their interval. */
  stale_connections: number;
}

/**
 * Readiness of a process: can it reach Postgres and Temporal, each within 2 s (Postgres asked by
 * one ping at a time, given that time to answer; Temporal asked as temporalAnswers asks it, the
 * call itself given that deadline)? With Postgres up,
 * also how many connections are stale (a detail: it does not make the process unready). A pool
 * with every connection in use is `busy` and still ready when Postgres answers a connection of
 * the check's own: taking every loaded process out of the balancer would turn load into an
 * outage; its requests answer 503 busy until one comes free. When that connection gets no answer
 * either, the pool's connections are stuck on a server that answers nothing: `unreachable`.
 */
export async function checkReadiness(
  deps: ReadinessDeps,
): Promise<{ ready: boolean; checks: { postgres: Check; temporal: Check }; details?: ReadinessDetails }> {
  // A pool with every connection in use may be loaded or stuck on a server that answers nothing:
  // a ping over a connection of its own tells which (asked at once when the pool is full now).
  const beside = allConnectionsInUse(deps.pool) ? probe(() => pingBesideOnce(deps.pool)) : undefined;
  const [pinged, temporal] = await Promise.all([
    probe(() => pingOnce(deps.pool)),
    // Read inside the check: whatever reading the client's connection throws is `unreachable`, never an error answer.
    temporalAnswers(() => deps.temporal.connection),
  ]);
  const full = pinged === 'unreachable' && allConnectionsInUse(deps.pool);
  const postgres: Check = full ? ((await (beside ?? probe(() => pingBesideOnce(deps.pool)))) === 'ok' ? 'busy' : 'unreachable') : pinged;
  let details: ReadinessDetails | undefined;
  if (postgres === 'ok') {
    let stale: number | undefined;
    await probe(async () => (stale = await staleConnections(deps)));
    if (stale !== undefined) details = { stale_connections: stale };
  }
  return { ready: postgres !== 'unreachable' && temporal === 'ok', checks: { postgres, temporal }, ...(details && { details }) };
}

/** Each pool's readiness ping (in the pool, and beside it), and its freshness count, that has not answered yet. */
const pendingPings = new WeakMap<Pool, Promise<void>>();
const pendingPingsBeside = new WeakMap<Pool, Promise<void>>();
const pendingCounts = new WeakMap<Pool, Promise<{ provider: string; n: number }[]>>();

/**
 * `send`'s statement on `pool`, at most one outstanding per pool in `pending` however often
 * readiness asks: a check while an earlier one has not answered sends none of its own and waits
 * for that one (its answer within the check counts). A check's own deadline only stops waiting:
 * without this, every check would leave one more statement holding a connection of the pool, and
 * checks every few seconds would take the pool its requests need.
 */
function oneOutstanding<T>(pending: WeakMap<Pool, Promise<T>>, pool: Pool, send: () => Promise<T>): Promise<T> {
  const outstanding = pending.get(pool);
  if (outstanding) return outstanding;
  const sent = send();
  pending.set(pool, sent);
  void sent.then(
    () => undefined,
    () => undefined,
  ).finally(() => {
    if (pending.get(pool) === sent) pending.delete(pool);
  });
  return sent;
}

/**
 * A ping of `pool`, one at a time (oneOutstanding). It gives its connection up after the check's
 * time without an answer, so a silent server holds no connection behind it; one still waiting for
 * a connection (a server that takes none in) stays the one ping until the pool's connect limit
 * ends it.
 */
function pingOnce(pool: Pool): Promise<void> {
  return oneOutstanding(pendingPings, pool, () => ping(pool, CHECK_TIMEOUT_MS));
}

/** A ping of `pool`'s server over a connection of its own (pingBeside), one at a time, given the check's time. */
function pingBesideOnce(pool: Pool): Promise<void> {
  return oneOutstanding(pendingPingsBeside, pool, () => pingBeside(pool, CHECK_TIMEOUT_MS));
}

/** The readiness result of `checkReadiness`. */
export type Readiness = Awaited<ReturnType<typeof checkReadiness>>;

/**
 * `checkReadiness` behind a cache of `ttlMs` and one in-flight check: however many probes arrive
 * (`/readyz` needs no key), they cost at most one Postgres query and one Temporal call per period.
 */
export function readinessProbe(
  deps: ReadinessDeps,
  ttlMs = READINESS_CACHE_MS,
): () => Promise<Readiness> {
  return singleFlight(() => checkReadiness(deps), ttlMs);
}

/** The freshness count per pool and when it was read: probes come every few seconds, the count changes slowly. */
const staleCounts = new WeakMap<object, { readAt: number; value: number }>();
const STALE_COUNT_TTL_MS = 30_000;

/**
 * Stale connections, read at most every 30 s per pool (the query scans every active connection),
 * and one count at a time (oneOutstanding): a count that waits (the table locked by a migration,
 * a loaded server) holds one connection of the pool, not one more every check.
 */
async function staleConnections(deps: Pick<ReadinessDeps, 'pool' | 'defaultIntervalSeconds'>): Promise<number> {
  const cached = staleCounts.get(deps.pool);
  if (cached && Date.now() - cached.readAt < STALE_COUNT_TTL_MS) return cached.value;
  const rows = await oneOutstanding(pendingCounts, deps.pool, () => countStaleConnections(deps.pool, new Date(), deps.defaultIntervalSeconds ?? DEFAULT_INTERVAL_SECONDS));
  const value = rows.reduce((sum, row) => sum + row.n, 0);
  staleCounts.set(deps.pool, { readAt: Date.now(), value });
  return value;
}

/** A Temporal connection readiness can ask: a client's, or a worker's own NativeConnection. */
export interface TemporalConnectionLike {
  workflowService: { getSystemInfo(request: object): Promise<unknown> };
  withDeadline<R>(deadline: number, fn: () => Promise<R>): Promise<R>;
}

/**
 * Whether Temporal answers a call made over `connection` within 2 s (the call itself is given
 * that deadline, so a server that does not answer leaves no call behind): the one Temporal check
 * of every readiness, the API's over its client's connection and a worker's. Over a worker's own
 * connection, this is whether its polls can reach the server: the SDK's pollers retry without
 * end while they cannot, and the worker stays RUNNING meanwhile.
 */
export function temporalAnswers(connection: TemporalConnectionLike | (() => TemporalConnectionLike)): Promise<Check> {
  return probe(() => {
    const over = typeof connection === 'function' ? connection() : connection;
    return over.withDeadline(Date.now() + CHECK_TIMEOUT_MS, () => over.workflowService.getSystemInfo({}));
  });
}

async function probe(check: () => Promise<unknown>): Promise<Check> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return 'ok';
  } catch {
    return 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}
