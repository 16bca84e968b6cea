import pg from 'pg';

/**
 * Creates the process-wide connection pool. Connections are opened with TCP keepalive and a
 * 30-second limit on getting a connection, so a vanished server fails a query instead of hanging it.
 */
export function createPool(databaseUrl: string, max = 10): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    application_name: 'synctide',
    keepAlive: true,
    connectionTimeoutMillis: 30_000,
  });
  // An idle client losing its connection (server restart) must not crash the process.
  pool.on('error', () => undefined);
  // Nor may a checked-out one: pg emits a connection lost between two queries of a transaction on
  // the client, where nothing listens, and Node would throw it. The client is then unusable, so
  // the transaction's next query fails (and is retried by its activity) and release discards it.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

export type Pool = pg.Pool;

/** One round trip to the server: resolves when Postgres answers. */
export async function ping(db: Pick<pg.Pool, 'query'>): Promise<void> {
  await db.query('select 1');
}
