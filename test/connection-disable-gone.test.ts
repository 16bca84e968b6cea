// POST /connections/:id/disable of a connection deleted while the request ran (its purge completed
// between the request's first read and its write) writes nothing and answers 404 `not_found`, as
// a pause or resume does then, never 200 `disabled` for a connection that no longer exists.
// The command on real Postgres; Temporal is a stand-in in which no workflow runs.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { disableConnection, pauseConnection } from '../commands/connections';
import type { Pool } from '../db/pool';
import { useTestDatabase } from './helpers/database';
import { testCommandDeps } from './helpers/deps';
import { fakeTemporal } from './helpers/fake-temporal';

const db = useTestDatabase();

/** `pool`, calling `before` once before it lends its next client (the start of a command's transaction). */
function poolDeletingFirst(pool: Pool, before: () => Promise<void>): Pool {
  let pending: (() => Promise<void>) | null = before;
  return new Proxy(pool, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (key === 'connect') {
        return async () => {
          const hook = pending;
          pending = null;
          if (hook) await hook();
          return target.connect();
        };
      }
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

async function connection(): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
    [`app_${randomUUID().slice(0, 8)}`, { resource_types: ['items'] }],
  );
  return rows[0]!.id;
}

const deleted = (id: string) => async () => {
  await db.pool.query('delete from connections where id = $1', [id]);
};

describe('a status change of a connection deleted while the request ran', () => {
  it('disable: refused not_found, nothing written', async () => {
    const id = await connection();
    const deps = testCommandDeps(poolDeletingFirst(db.pool, deleted(id)), fakeTemporal().client);
    await expect(disableConnection(deps, id)).rejects.toMatchObject({ code: 'not_found' });
    expect((await db.pool.query('select 1 from connections where id = $1', [id])).rows).toEqual([]);
  });

  it('pause (as before): refused not_found', async () => {
    const id = await connection();
    const deps = testCommandDeps(poolDeletingFirst(db.pool, deleted(id)), fakeTemporal().client);
    await expect(pauseConnection(deps, id)).rejects.toMatchObject({ code: 'not_found' });
  });
});
