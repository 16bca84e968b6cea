// Requests of one tenant whose clients go away while GET /connections/{id} waits on its state
// query outside the tenant's turn (or while they wait for a turn) leave no turn held: the query
// ends, the request takes a turn again, ends and gives it back. The tenant's later requests are
// answered at once. Real API over HTTP on 127.0.0.1, real Postgres and a Temporal dev server with
// no worker polling the queue (each query waits its full 3 s).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { listen, type HttpServer } from '../lib/http';
import { ensureConnectionWorkflow } from '../temporal/client';
import { connectionWorkflowId } from '../temporal/ids';
import { apiAppOnTemporal, callApi } from './helpers/api';
import { useServers } from './helpers/stack';

/** Two connections: a tenant's share is one. */
const API_POOL_MAX = 2;
const TASK_QUEUE = 'nobody-polls-aborted-queries';

describe("aborted GET /connections/{id} and the tenant's turns (real API, Postgres, Temporal)", () => {
  const servers = useServers('dev-server');
  let apiPool: Pool;
  let server: HttpServer;
  const workflows: string[] = [];

  beforeAll(async () => {
    apiPool = createPool(servers.db.url, API_POOL_MAX);
    server = await listen(apiAppOnTemporal(apiPool, servers.env.client, TASK_QUEUE), '127.0.0.1', 0);
  });
  afterAll(async () => {
    for (const id of workflows) await servers.env.client.workflow.getHandle(id).terminate('test over').catch(() => undefined);
    await server?.close();
    await apiPool?.end();
  });

  it('gives back every turn of requests whose clients went away during their queries or their waits', async () => {
    const alpha = (await createApiKey(servers.db, 'aborter')).secret;
    const { rows } = await servers.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('aborter', 'demo', 'queried', 'active') returning id`,
    );
    const id = rows[0]!.id;
    await ensureConnectionWorkflow(servers.env.client, TASK_QUEUE, { id, tenantId: 'aborter', providerSlug: 'demo' });
    workflows.push(connectionWorkflowId(id));

    const aborted: Promise<unknown>[] = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 8; i++) {
        const stop = new AbortController();
        // Some go away while they wait for a turn, the rest while their queries wait.
        setTimeout(() => stop.abort(), i % 2 === 0 ? 5 : 700);
        aborted.push(fetch(`${server.url}/connections/${id}`, { headers: { authorization: `Bearer ${alpha}` }, signal: stop.signal }).then((r) => r.text()).catch(() => 'aborted'));
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    await Promise.all(aborted);
    // Every query ends at its 3 s deadline; the requests then take a turn, end and give it back.
    await new Promise((resolve) => setTimeout(resolve, 4_000));

    const began = Date.now();
    const answers = await Promise.all([1, 2, 3].map(() => callApi(server.url, alpha, 'GET', '/connections')));
    for (const answer of answers) expect(answer.status, answer.text).toBe(200);
    expect(Date.now() - began).toBeLessThan(2_000);
    // A GET of the connection (its query unanswered) still answers after its 3 s, with no live state.
    const detail = await callApi(server.url, alpha, 'GET', `/connections/${id}`);
    expect(detail.status, detail.text).toBe(200);
    expect(detail.body.live).toBeNull();
  }, 90_000);
});
