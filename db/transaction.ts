import type { PoolClient } from 'pg';
import { isNoAnswer, type Pool } from './pool';

/**
 * Runs `fn` in one transaction on one pooled connection: commit on success, rollback on throw.
 * `snapshot` makes it a read-only REPEATABLE READ transaction: every statement sees the database
 * as of the first one.
 */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>, opts: { snapshot?: boolean } = {}): Promise<T> {
  const client = await pool.connect();
  // A connection whose rollback failed, or whose statement got no answer, is in an unknown state
  // (lost, or a statement of it still unanswered): released as broken, the pool discards it
  // instead of handing it out again.
  let broken: Error | undefined;
  try {
    await client.query(opts.snapshot ? 'begin isolation level repeatable read read only' : 'begin');
    const result = await fn(client);
    await client.query('commit');
    return result;
  } catch (err) {
    // A statement the server never answered is still in flight: a rollback would queue behind it
    // and wait out a second no-answer period. The connection is discarded instead, and the server
    // rolls back a transaction whose connection is gone.
    if (isNoAnswer(err)) broken = err as Error;
    else {
      await client.query('rollback').catch((rollbackErr: unknown) => {
        broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
      });
    }
    throw err;
  } finally {
    client.release(broken);
  }
}
