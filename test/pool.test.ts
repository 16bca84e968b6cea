// The connection pool against a real Postgres: a server that drops a connection while the process
// holds it (a Postgres restart, `pg_terminate_backend`) costs that one transaction, never the
// process. pg emits such an error on the checked-out client, and with no listener there Node
// throws it as an unhandled 'error' event and the worker or API process dies.
import net, { type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createPool } from '../db/pool';
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

/**
 * A TCP proxy to the test database that can turn into a black hole: from `blackHole()` on, the
 * connections it holds forward nothing either way and stay open (a server or network that stops
 * answering without closing anything), while connections made after `restore()` forward again.
 */
async function blackHoleProxy(databaseUrl: string) {
  const target = new URL(databaseUrl);
  let holing = false;
  const held = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    held.add(client).add(upstream);
    let holed = holing;
    const forward = (from: net.Socket, to: net.Socket) => from.on('data', (chunk) => {
      if (!holed) to.write(chunk);
    });
    forward(client, upstream);
    forward(upstream, client);
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    holes.push(() => (holed = true));
  });
  const holes: (() => void)[] = [];
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as AddressInfo).port);
  return {
    url: url.toString(),
    blackHole() {
      holing = true;
      for (const hole of holes) hole();
    },
    restore() {
      holing = false;
    },
    async close() {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('a server that stops answering (black-holed) with queries in flight', () => {
  const db = useTestDatabase();

  it('a query and a transaction fail instead of hanging; the pool keeps no connection stuck behind them, so once the server answers again so does the pool', async () => {
    const proxy = await blackHoleProxy(db.url);
    // Two connections, both open before the server stops answering: a connection left stuck in
    // the pool would hold up every later query that gets it.
    const pool = createPool(proxy.url, 2, { statementTimeoutMs: 300, noAnswerTimeoutMs: 600 });
    try {
      await Promise.all([pool.query('select pg_sleep(0.05)'), pool.query('select pg_sleep(0.05)')]);
      expect(pool.totalCount).toBe(2);
      const issued: string[] = []; // the statements given to connections from here on
      pool.on('acquire', (client) => {
        const query = client.query.bind(client) as (...args: unknown[]) => unknown;
        (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
          issued.push(String(args[0]));
          return query(...args);
        };
      });
      proxy.blackHole();
      await expect(pool.query('select 1')).rejects.toThrow(/timeout/i);
      // The other open connection: its `begin` goes unanswered, and so would a rollback, which
      // would wait a second no-answer period queued behind it: none is issued, the connection is
      // discarded instead (the server rolls back a transaction whose connection is gone).
      await expect(withTransaction(pool, (tx) => tx.query('select 1'))).rejects.toThrow(/timeout/i);
      expect(issued).toContain('begin');
      expect(issued).not.toContain('rollback');
      expect(pool.totalCount).toBe(0);
      proxy.restore();
      expect((await pool.query<{ ok: number }>('select 2 as ok')).rows).toEqual([{ ok: 2 }]);
      expect((await withTransaction(pool, (tx) => tx.query<{ ok: number }>('select 3 as ok'))).rows).toEqual([{ ok: 3 }]);
    } finally {
      await pool.end().catch(() => undefined);
      await proxy.close();
    }
  });
});
