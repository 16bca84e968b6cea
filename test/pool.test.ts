// The connection pool against a real Postgres: a server that drops a connection while the process
// holds it (a Postgres restart, `pg_terminate_backend`) costs that one transaction, never the
// process. pg emits such an error on the checked-out client, and with no listener there Node
// throws it as an unhandled 'error' event and the worker or API process dies.
import { describe, expect, it } from 'vitest';
import { withTransaction } from '../db/transaction';
import { useTestDatabase } from './helpers/database';

describe('createPool', () => {
  const db = useTestDatabase();

  it('survives the server ending a connection in the middle of a transaction, and the next transaction works', async () => {
    const failed = withTransaction(db.pool, async (tx) => {
      const { rows } = await tx.query<{ pid: number }>('select pg_backend_pid() as pid');
      // Another session ends this one between two statements: no query of ours is in flight.
      await db.pool.query('select pg_terminate_backend($1)', [rows[0]!.pid]);
      await new Promise((resolve) => setTimeout(resolve, 300));
      return tx.query('select 1');
    });
    await expect(failed).rejects.toThrow(/not queryable|terminat/i);
    const { rows } = await withTransaction(db.pool, (tx) => tx.query<{ ok: number }>('select 1 as ok'));
    expect(rows).toEqual([{ ok: 1 }]);
  });
});
