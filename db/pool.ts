import pg from 'pg';

/** Server-side limits set on every connection of a pool (0 or absent: none). */
export interface PoolLimits {
  /** `statement_timeout`: a statement running longer is cancelled (SQLSTATE 57014). */
  statementTimeoutMs?: number;
  /** `idle_in_transaction_session_timeout`: a session idle that long inside a transaction is ended. */
  idleInTransactionTimeoutMs?: number;
  /**
   * How long the client waits for an answer to a statement before it takes the server for gone
   * (pg's client-side `query_timeout`); only with a statement timeout, and by default that timeout
   * plus the larger of itself and 5 s, so the server's own cancellation always comes first.
   */
  noAnswerTimeoutMs?: number;
  /** `application_name`, to tell the API's connections from the worker's in pg_stat_activity. */
  applicationName?: string;
}

/** pg's error for a statement given up on under `noAnswerTimeoutMs`: the server stopped answering. */
export function isNoAnswer(err: unknown): boolean {
  return err instanceof Error && err.message === 'Query read timeout';
}

/**
 * Creates a connection pool. Connections are opened with TCP keepalive and a 30-second limit on
 * getting a connection, so a vanished server fails a query instead of hanging it, and with the
 * server-side `limits` (sent in the startup packet: no extra round trip). With a statement
 * timeout, the client also gives up on a statement it has had no answer to well after that time
 * (`noAnswerTimeoutMs`): the server would have cancelled it by then, so the server or the network
 * has stopped answering (black-holed, not closed: TCP alone notices only after many minutes). The
 * statement fails and its connection is discarded, never handed out again (`withTransaction`
 * sends no rollback after such a failure and releases the connection as broken).
 */
export function createPool(databaseUrl: string, max = 10, limits: PoolLimits = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    application_name: limits.applicationName ?? 'synctide',
    keepAlive: true,
    connectionTimeoutMillis: 30_000,
    ...(limits.statementTimeoutMs
      ? { statement_timeout: limits.statementTimeoutMs, query_timeout: limits.noAnswerTimeoutMs ?? limits.statementTimeoutMs + Math.max(limits.statementTimeoutMs, 5_000) }
      : {}),
    ...(limits.idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: limits.idleInTransactionTimeoutMs } : {}),
  });
  // An idle client losing its connection (server restart) must not crash the process.
  pool.on('error', () => undefined);
  // Nor may a checked-out one: pg emits a connection lost between two queries of a transaction on
  // the client, where nothing listens, and Node would throw it. The client is then unusable, so
  // the transaction's next query fails (and is retried by its activity) and release discards it.
  const open = new Set<pg.PoolClient>();
  connectedClients.set(pool, open);
  pool.on('connect', (client) => {
    open.add(client);
    client.on('error', () => undefined);
  });
  // Which connections are checked out now: what cancelCheckedOut cancels at shutdown.
  const out = new Set<pg.PoolClient>();
  checkedOutClients.set(pool, out);
  pool.on('remove', (client) => {
    open.delete(client);
    out.delete(client);
  });
  pool.on('acquire', (client) => out.add(client));
  pool.on('release', (_err, client) => out.delete(client));
  return pool;
}

/** The checked-out clients of each pool `createPool` made ('acquire' to 'release' or 'remove'). */
const checkedOutClients = new WeakMap<pg.Pool, Set<pg.PoolClient>>();

/**
 * Cancels what the connections checked out of `pool` are doing, for a shutdown whose grace is
 * over: the statement each one runs is cancelled on the server (pg_cancel_backend from a
 * connection of its own, given at most `timeoutMs` to connect and answer), then every connection
 * still checked out is closed, so `pool.end()` need not wait for their statements, and a
 * transaction one has open is rolled back by the server. A write is one transaction, so what it
 * did is either committed before this or not at all. Resolves with how many connections were
 * checked out; never rejects (a database that does not answer leaves only the closing).
 */
export async function cancelCheckedOut(pool: pg.Pool, timeoutMs: number): Promise<number> {
  const out = [...(checkedOutClients.get(pool) ?? [])];
  if (out.length === 0) return 0;
  const pids = out.map((client) => (client as unknown as { processID: number | null }).processID).filter((pid): pid is number => typeof pid === 'number');
  if (pids.length > 0) {
    // The pool's own settings (address, TLS, role), without its statement limits.
    const { statement_timeout: _statement, query_timeout: _query, ...settings } = pool.options as pg.PoolConfig;
    const canceller = new pg.Client({ ...settings, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs, application_name: `${settings.application_name ?? 'synctide'}-shutdown` });
    canceller.on('error', () => undefined);
    try {
      await canceller.connect();
      await canceller.query('select pg_cancel_backend(pid) from unnest($1::int[]) as pid', [pids]);
    } catch {
      // Unreachable, or slow: closing the connections below still ends the wait.
    } finally {
      void canceller.end().catch(() => undefined);
    }
  }
  for (const client of out) {
    if (checkedOutClients.get(pool)?.has(client)) void (client as unknown as pg.Client).end().catch(() => undefined);
  }
  return out.length;
}

/**
 * One round trip to the server of `pool` over a connection of its own, outside the pool (its
 * address, TLS and role, without its statement limits), given `timeoutMs` to connect and as long
 * to answer, then closed: whether Postgres answers when every connection of the pool is in use.
 * Resolves when it answers, also when it refuses the connection for having no connection slot
 * left (too_many_connections: it answers, it is full); rejects otherwise (a server that answers
 * nothing, or refuses for another reason).
 */
export async function pingBeside(pool: pg.Pool, timeoutMs: number): Promise<void> {
  const { statement_timeout: _statement, query_timeout: _query, ...settings } = pool.options as pg.PoolConfig;
  const client = new pg.Client({ ...settings, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs, application_name: `${settings.application_name ?? 'synctide'}-readiness` });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
  } catch (err) {
    if ((err as { code?: unknown }).code !== TOO_MANY_CONNECTIONS) throw err;
  } finally {
    void client.end().catch(() => undefined);
  }
}

/** SQLSTATE of a connection refused because the server has no connection slot left. */
const TOO_MANY_CONNECTIONS = '53300';

/** The connected clients of each pool `createPool` made ('connect' to 'remove'; one being opened is not among them). */
const connectedClients = new WeakMap<pg.Pool, Set<pg.PoolClient>>();

/**
 * Whether every connection `pool` may open is connected and checked out: Postgres answers the
 * pool, which has none free (a pool still opening connections, perhaps to a server that does not
 * answer, is not). False for a pool `createPool` did not make.
 */
export function allConnectionsInUse(pool: pg.Pool): boolean {
  const open = connectedClients.get(pool);
  return open !== undefined && open.size >= (pool.options.max ?? 10) && pool.idleCount === 0;
}

export type Pool = pg.Pool;

/**
 * One round trip to the server: resolves when Postgres answers. With `noAnswerMs`, the statement
 * fails if no answer came within that time, and a pool discards the connection it ran on (never
 * handed out again), so a server that stopped answering keeps no connection behind a ping.
 */
export async function ping(db: Pick<pg.Pool, 'query'>, noAnswerMs?: number): Promise<void> {
  // pg reads a statement's own `query_timeout` (its types leave it out of QueryConfig).
  await db.query(noAnswerMs ? ({ text: 'select 1', query_timeout: noAnswerMs } as pg.QueryConfig) : 'select 1');
}
