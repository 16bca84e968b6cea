// A request's deadline for its calls to Temporal (API_TEMPORAL_TIMEOUT_SECONDS) bounds the time
// Temporal takes, not the request's other waits: a pause that waited on a row lock longer than that
// deadline, and a pause that waited as long for its tenant's turn behind it, each still signal
// their workflows (Temporal answers at once) and are answered 200, not 503 "Temporal is
// unreachable". Real API over HTTP on 127.0.0.1, real Postgres and a Temporal dev server (nothing
// polls the queue: a signal is accepted all the same).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { createPool, type Pool } from '../db/pool';
import { listen, type HttpServer } from '../lib/http';
import { connectionWorkflowId } from '../temporal/ids';
import { apiAppOnTemporal, callApi } from './helpers/api';
import { useServers } from './helpers/stack';

/** Two connections: a tenant's share is one. */
const API_POOL_MAX = 2;
const TEMPORAL_TIMEOUT_MS = 1_000;
const LOCK_HELD_MS = 2_500;
const TASK_QUEUE = 'nobody-polls-deadline-after-turn';

describe("the Temporal deadline and a request's waits on the database (real API, Postgres, Temporal)", () => {
  const servers = useServers('dev-server');
  let apiPool: Pool;
  let server: HttpServer;
  const ids: string[] = [];

  beforeAll(async () => {
    apiPool = createPool(servers.db.url, API_POOL_MAX);
    server = await listen(apiAppOnTemporal(apiPool, servers.env.client, TASK_QUEUE, { temporalTimeoutMs: TEMPORAL_TIMEOUT_MS }), '127.0.0.1', 0);
  });
  afterAll(async () => {
    for (const id of ids) await servers.env.client.workflow.getHandle(connectionWorkflowId(id)).terminate('test over').catch(() => undefined);
    await server?.close();
    await apiPool?.end();
  });

  it('answers pauses that waited past the deadline on a row lock and for their turn', async () => {
    const key = (await createApiKey(servers.db, 'waiter')).secret;
    for (const appKey of ['locked', 'queued']) {
      const { rows } = await servers.db.pool.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key, status) values ('waiter', 'demo', $1, 'active') returning id`,
        [appKey],
      );
      ids.push(rows[0]!.id);
    }
    const [locked, queued] = ids as [string, string];
    const holder = await servers.db.pool.connect();
    let first: Promise<{ status: number; text: string }>;
    let second: Promise<{ status: number; text: string; ms: number }>;
    try {
      await holder.query('begin');
      await holder.query('select 1 from connections where id = $1 for update', [locked]);
      // Takes the tenant's only turn, then waits on the row lock.
      first = callApi(server.url, key, 'POST', `/connections/${locked}/pause`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const began = Date.now();
      // Waits for the tenant's turn, longer than the deadline.
      second = callApi(server.url, key, 'POST', `/connections/${queued}/pause`).then((a) => ({ ...a, ms: Date.now() - began }));
      await new Promise((resolve) => setTimeout(resolve, LOCK_HELD_MS));
    } finally {
      await holder.query('commit');
      holder.release();
    }
    const queuedAnswer = await second;
    const lockedAnswer = await first;
    expect(queuedAnswer.ms).toBeGreaterThan(TEMPORAL_TIMEOUT_MS);
    expect(queuedAnswer.status, queuedAnswer.text).toBe(200);
    expect(lockedAnswer.status, lockedAnswer.text).toBe(200);
    const { rows } = await servers.db.pool.query<{ status: string }>('select status from connections where id = any($1) order by app_key', [ids]);
    expect(rows.map((r) => r.status)).toEqual(['paused', 'paused']);
  }, 60_000);
});
