import type { Pool, PoolClient } from 'pg';
import { TenantTurns, workingFor } from '../lib/tenant-turns';
import { tenantShareOfPool } from '../policy/tenant-limits';

export { workingFor };

/**
 * `pool` with its connections shared between tenants by turns (TenantTurns): a statement
 * (`query`) or a checked-out connection (`connect`, until its release) of a tenant's work
 * (`workingFor`) takes one of the tenant's places first, at most its share of the pool
 * (`tenantShareOfPool`) at once, and tenants in flight leave the last free place to a tenant with
 * none; more wait in the process, holding no connection (at most TURN_WAIT_LIMIT_MS). So one tenant's
 * many running tasks (page writes waiting on a lock, long deletions) cannot keep another tenant's
 * statements waiting for a connection until the pool's connection timeout fails them. Work of no
 * tenant is not held. Promise forms only (no callbacks), as every caller uses them.
 */
/**
 * How long a tenant's statement may wait for its turn: a safety bound, not a share. Past it the
 * statement fails as the pool's own connection wait does (its activity retries), so no work waits
 * for ever, as a statement waiting for a second connection while its tenant's places were all
 * held by such statements would. Far longer than a page write, and than the heartbeat timeout
 * that interrupts a task whose statements wait that long anyway.
 */
const TURN_WAIT_LIMIT_MS = 5 * 60_000;

export function tenantTurnsPool(pool: Pool): Pool {
  const places = pool.options.max ?? 10;
  const turns = new TenantTurns(places, tenantShareOfPool(places));
  const turn = async (): Promise<() => void> => {
    const tenant = workingFor.getStore();
    if (!tenant) return () => undefined;
    const signal = AbortSignal.timeout(TURN_WAIT_LIMIT_MS);
    const end = await turns.take(tenant, signal).catch((err: unknown) => {
      throw signal.aborted ? new Error(`timeout exceeded when trying to connect (no turn of the tenant's within ${TURN_WAIT_LIMIT_MS / 1000} s)`) : err;
    });
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
