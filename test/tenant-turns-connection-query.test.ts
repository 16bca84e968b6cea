// GET /connections/{id} asks the connection's workflow for its live state (a Temporal query, which
// a worker must answer; up to 3 s) holding no database connection: while it waits for that answer
// it holds no place of its tenant's turns at the API's pool either, so other tenants' requests are
// not held back behind queries no worker answers (workers down or busy). Real API app, real
// Postgres and a Temporal dev server with no worker polling the queue.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { ensureConnectionWorkflow } from '../temporal/client';
import { connectionWorkflowId } from '../temporal/ids';
import { apiAppOnTemporal } from './helpers/api';
import { useServers } from './helpers/stack';

/** The API's pool: two connections, so a tenant's share is one and two tenants' requests take both places. */
const API_POOL_MAX = 2;
const TASK_QUEUE = 'nobody-polls-connection-queries';

describe("connection state queries and other tenants' turns (real API app, Postgres, Temporal)", () => {
  const servers = useServers('dev-server');
  let apiPool: Pool;
  let app: ReturnType<typeof apiAppOnTemporal>;
  const workflows: string[] = [];

  beforeAll(() => {
    apiPool = createPool(servers.db.url, API_POOL_MAX);
    app = apiAppOnTemporal(apiPool, servers.env.client, TASK_QUEUE);
  });
  afterAll(async () => {
    for (const id of workflows) await servers.env.client.workflow.getHandle(id).terminate('test over').catch(() => undefined);
    await apiPool?.end();
  });

  const send = async (key: string, path: string) => {
    const began = Date.now();
    const res = await app.request(path, { headers: { authorization: `Bearer ${key}` } });
    return { status: res.status, text: await res.text(), ms: Date.now() - began };
  };

  it("answers a third tenant while two tenants' GET /connections/{id} wait on queries no worker answers", async () => {
    const keys = {
      alpha: (await createApiKey(servers.db, 'alpha')).secret,
      beta: (await createApiKey(servers.db, 'beta')).secret,
      gamma: (await createApiKey(servers.db, 'gamma')).secret,
    };
    const connections: Record<'alpha' | 'beta', string> = { alpha: '', beta: '' };
    for (const tenant of ['alpha', 'beta'] as const) {
      const { rows } = await servers.db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'queried', 'active') returning id`,
        [tenant],
      );
      connections[tenant] = rows[0]!.id;
      // Its workflow runs, on a queue no worker polls: a query of it waits for its deadline.
      await ensureConnectionWorkflow(servers.env.client, TASK_QUEUE, { id: rows[0]!.id, tenantId: tenant, providerSlug: 'demo' });
      workflows.push(connectionWorkflowId(rows[0]!.id));
    }
    const described = (['alpha', 'beta'] as const).map((tenant) => send(keys[tenant], `/connections/${connections[tenant]}`).then((answer) => ({ who: tenant, answer })));
    // Both have read their rows and wait on their queries (a request reads one statement at a time).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const other = send(keys.gamma, '/connections').then((answer) => ({ who: 'gamma', answer }));
    const first = await Promise.race([other, ...described]);
    const ended = await Promise.all(described);
    expect(first.who, JSON.stringify(first.answer)).toBe('gamma');
    expect(first.answer.status, first.answer.text).toBe(200);
    // The queries were not answered: each GET waited for its deadline and answered without live state.
    for (const { answer } of ended) {
      expect(answer.status, answer.text).toBe(200);
      expect(answer.ms).toBeGreaterThanOrEqual(2_500);
    }
  }, 60_000);
});
