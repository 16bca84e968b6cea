import pg from 'pg';

/** Creates the process-wide connection pool. */
export function createPool(databaseUrl: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max, application_name: 'synctide' });
  // An idle client losing its connection (server restart) must not crash the process.
  pool.on('error', () => undefined);
  return pool;
}

export type Pool = pg.Pool;
