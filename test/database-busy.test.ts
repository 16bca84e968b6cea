// A database pool with every connection busy is not a database that is down: a request that waits
// past the pool's connection timeout answers 503 `busy` ("the database is busy"), with
// Retry-After, while a Postgres that cannot be reached answers 503 `unavailable`. Against the real
// API app over HTTP on 127.0.0.1 and a real pool of one connection on a real Postgres.
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { listen } from '../lib/http';
import { apiAppWithoutTemporal, callApi, TEST_API_KEY } from './helpers/api';
import { ownPool, useTestDatabase } from './helpers/database';

describe('a busy database pool (real API app over HTTP, real Postgres)', () => {
  const db = useTestDatabase();

  it('answers 503 busy with Retry-After while every pooled connection is held, and serves again once one is free', async () => {
    const pool = ownPool({ connectionString: db.url, max: 1, connectionTimeoutMillis: 300 });
    const server = await listen(apiAppWithoutTemporal(pool, 'database-busy'), '127.0.0.1', 0);
    try {
      const held = await pool.connect();
      let released = false;
      try {
        const res = await fetch(`${server.url}/jobs`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
        const body = (await res.json()) as { error: unknown };
        expect([res.status, body]).toEqual([503, { error: { code: 'busy', message: expect.stringMatching(/^the database is busy/) } }]);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        held.release();
        released = true;
        expect((await callApi(server.url, TEST_API_KEY, 'GET', '/jobs')).status).toBe(200);
      } finally {
        if (!released) held.release();
      }
    } finally {
      await server.close();
      await pool.end();
    }
  });

  it('still answers 503 unavailable ("Postgres is unreachable") when Postgres cannot be reached', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none', max: 1, connectionTimeoutMillis: 300 });
    const server = await listen(apiAppWithoutTemporal(pool, 'database-busy'), '127.0.0.1', 0);
    try {
      const res = await callApi(server.url, TEST_API_KEY, 'GET', '/jobs');
      expect([res.status, res.body]).toEqual([503, { error: { code: 'unavailable', message: 'Postgres is unreachable; try again shortly' } }]);
    } finally {
      await server.close();
      await pool.end();
    }
  });
});
