import { AsyncLocalStorage } from 'node:async_hooks';
import type { Pool, PoolClient } from 'pg';
import { TenantTurns } from '../lib/tenant-turns';
import { tenantShareOfPool } from '../policy/tenant-limits';

/**
 * The tenant whose work runs in this async context: a scheduled activity's, set around its run by
 * the worker's activity interceptor (workers/lane-gate.ts); '' or unset for work of no tenant.
 */
export const workingFor = new AsyncLocalStorage<string>();

/**
 * `pool` with its connections shared between tenants by turns (TenantTurns): a statement
 * (`query`) or a checked-out connection (`connect`, until its release) of a tenant's work
 * (`workingFor`) takes one of the tenant's places first, at most its share of the pool
 * (`tenantShareOfPool`) at once, and tenants in flight leave the last free place to a tenant with
 * none; more wait in the process, holding no connection, and are never refused. So one tenant's
 * many running tasks (page writes waiting on a lock, long deletions) cannot keep another tenant's
 * statements waiting for a connection until the pool's connection timeout fails them. Work of no
 * tenant is not held. Promise forms only (no callbacks), as every caller uses them.
 */
export function tenantTurnsPool(pool: Pool): Pool {
  const places = pool.options.max ?? 10;
  const turns = new TenantTurns(places, tenantShareOfPool(places));
  const turn = async (): Promise<() => void> => {
    const tenant = workingFor.getStore();
    if (!tenant) return () => undefined;
    const end = await turns.take(tenant);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      end();
    };
  };
  const connect = async (): Promise<PoolClient> => {
    const done = await turn();
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      done();
      throw err;
    }
    // pg gives a checked-out client a new release each time it hands it out.
    const release = client.release;
    client.release = (err?: Error | boolean) => {
      done();
      release.call(client, err);
    };
    return client;
  };
  const query = async (...args: unknown[]): Promise<unknown> => {
    const done = await turn();
    try {
      return await (pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
    } finally {
      done();
    }
  };
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === 'connect') return connect;
      if (prop === 'query') return query;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
