// An immediate sync's request waits on its Temporal workflow for up to IMMEDIATE_SYNC_TIMEOUT
// holding no database connection: meanwhile it holds no place of its tenant's turns at the API's
// pool either, so other tenants' requests are not held back behind other tenants' immediate syncs.
// Real API app, real Postgres and a Temporal dev server with no worker polling the queue (each
// immediate sync waits until its deadline).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { immediateSyncWorkflowId } from '../temporal/ids';
import { apiAppOnTemporal } from './helpers/api';
import { useServers } from './helpers/stack';
import { eventually } from './helpers/worker';

/** The API's pool: two connections, so a tenant's share is one and two tenants' requests take both places. */
const API_POOL_MAX = 2;
/** Long enough that an immediate sync with nobody to run it is still waiting when the other tenant asks. */
const IMMEDIATE_TIMEOUT_MS = 20_000;

describe("immediate syncs and other tenants' turns (real API app, Postgres, Temporal)", () => {
  const servers = useServers('dev-server');
  let apiPool: Pool;
  let app: ReturnType<typeof apiAppOnTemporal>;

  beforeAll(() => {
    apiPool = createPool(servers.db.url, API_POOL_MAX);
    app = apiAppOnTemporal(apiPool, servers.env.client, 'nobody-polls-immediate', { immediateSyncTimeoutMs: IMMEDIATE_TIMEOUT_MS });
  });
  afterAll(async () => {
    await apiPool?.end();
  });

  const send = async (key: string, method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await app.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, text: await res.text() };
  };

  it("answers a third tenant while two tenants' immediate syncs wait on their workflows", async () => {
    const keys = {
      alpha: (await createApiKey(servers.db, 'alpha')).secret,
      beta: (await createApiKey(servers.db, 'beta')).secret,
      gamma: (await createApiKey(servers.db, 'gamma')).secret,
    };
    const connections: string[] = [];
    for (const tenant of ['alpha', 'beta']) {
      const { rows } = await servers.db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'now', 'active') returning id`,
        [tenant],
      );
      connections.push(rows[0]!.id);
    }
    const immediate = (['alpha', 'beta'] as const).map((tenant) =>
      send(keys[tenant], 'POST', '/sync', { app_key: 'now', immediate: true }).then((answer) => ({ who: tenant, answer })),
    );
    // Both are counted against their tenants and waiting on their workflows.
    await eventually(async () => {
      const { rows } = await servers.db.pool.query<{ n: number }>('select count(*)::int as n from immediate_sync_leases where expires_at > now()');
      return rows[0]!.n === 2 ? true : undefined;
    });
    const other = send(keys.gamma, 'GET', '/connections').then((answer) => ({ who: 'gamma', answer }));
    const first = await Promise.race([other, ...immediate]);
    // Every request is answered before anything is judged, and the cancelled workflows (which no
    // worker closes) are ended, their leases released: nothing is left calling servers torn down.
    const ended = await Promise.all(immediate);
    for (const id of connections) await servers.env.client.workflow.getHandle(immediateSyncWorkflowId(id)).terminate('test over');
    await eventually(async () => {
      const { rows } = await servers.db.pool.query<{ n: number }>('select count(*)::int as n from immediate_sync_leases');
      return rows[0]!.n === 0 ? true : undefined;
    });
    expect(first.who, JSON.stringify(first.answer)).toBe('gamma');
    expect(first.answer.status, first.answer.text).toBe(200);
    // The immediate syncs end at their deadline (504: nothing ran them), each answered.
    expect(ended.map((e) => e.answer.status)).toEqual([504, 504]);
  }, 120_000);
});
