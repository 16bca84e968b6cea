import type { PoolClient } from 'pg';
import type { Pool } from './pool';

/**
 * Runs `fn` in one transaction on one pooled connection: commit on success, rollback on throw.
 * `snapshot` makes it a read-only REPEATABLE READ transaction: every statement sees the database
 * as of the first one.
 */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>, opts: { snapshot?: boolean } = {}): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(opts.snapshot ? 'begin isolation level repeatable read read only' : 'begin');
    const result = await fn(client);
    await client.query('commit');
    return result;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
