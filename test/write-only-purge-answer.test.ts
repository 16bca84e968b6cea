// What a tenant key with the `write` scope alone gets back from DELETE /connections/{id}: the
// purge it started (or, repeated while that purge is still open, the same purge), by its id and
// status, never how far it got (`deleted_rows`, what only GET /purges/{id} with the `read` scope
// shows). A key that reads, and the admin, get the whole purge. Real API app, real Postgres and a
// Temporal dev server with no worker polling the queue (the purge stays open).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../commands/tenancy';
import { connectionPurgeWorkflowId } from '../temporal/purge';
import { apiAppOnTemporal, TEST_API_KEY } from './helpers/api';
import { useServers } from './helpers/stack';

const TASK_QUEUE = 'write-only-purge-answer';

describe('DELETE /connections/{id} answered to a write-only key', () => {
  const servers = useServers('dev-server');
  let app: ReturnType<typeof apiAppOnTemporal>;
  const purgeIds: string[] = [];

  beforeAll(() => {
    app = apiAppOnTemporal(servers.db.pool, servers.env.client, TASK_QUEUE);
  });
  afterAll(async () => {
    // Nothing polls the queue: the purge workflows are ended here, not left running on a server torn down.
    for (const id of purgeIds) await servers.env.client.workflow.getHandle(connectionPurgeWorkflowId(id)).terminate('test over').catch(() => undefined);
  });

  const remove = async (key: string, id: string) => {
    const res = await app.request(`/connections/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } });
    const text = await res.text();
    return { status: res.status, text, body: JSON.parse(text) };
  };

  it('answers the open purge without deleted_rows to a key lacking the read scope, repeated or not', async () => {
    const tenant = 'purge-writer';
    const { rows } = await servers.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'purged', 'active') returning id`,
      [tenant],
    );
    const connectionId = rows[0]!.id;
    const writer = (await createApiKey(servers.db, tenant, { scopes: ['write'] })).secret;

    const first = await remove(writer, connectionId);
    expect(first.status, first.text).toBe(202);
    const purgeId = first.body.id as string;
    purgeIds.push(purgeId);
    expect(first.body).toMatchObject({ id: purgeId, connection_id: connectionId, tenant_id: tenant, workflow_id: connectionPurgeWorkflowId(purgeId) });

    // The purge has deleted rows since (as its batches do); the DELETE is sent again while it is open.
    await servers.db.pool.query('update connection_purges set deleted_rows = 4321 where id = $1', [purgeId]);
    const again = await remove(writer, connectionId);
    expect(again.status, again.text).toBe(202);
    expect(again.body).toMatchObject({ id: purgeId, connection_id: connectionId, tenant_id: tenant, status: expect.any(String) });
    expect(again.text).not.toContain('4321');
    expect(again.body, again.text).not.toHaveProperty('deleted_rows');
    // Nor does the DELETE that started it say how far it got (its answer has one shape for such a key).
    expect(first.body, first.text).not.toHaveProperty('deleted_rows');

    // A key that reads, and the admin, see the whole purge.
    const both = (await createApiKey(servers.db, tenant, { scopes: ['read', 'write'] })).secret;
    for (const key of [both, TEST_API_KEY]) {
      const full = await remove(key, connectionId);
      expect(full.status, full.text).toBe(202);
      expect(full.body).toMatchObject({ id: purgeId, deleted_rows: 4321 });
    }
  }, 60_000);
});
