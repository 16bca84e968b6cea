// Answers of the real API app (on Postgres, no Temporal: every request here is answered before
// one would reach it) held to the OpenAPI document it serves: the status is one the operation
// declares, and an error's code one the document shows for that status (the document gives an
// example of every code a status can carry, which a client generator and a reader go by).
import { beforeAll, describe, expect, it } from 'vitest';
import { useApiWithoutTemporal } from './helpers/api';

type Json = Record<string, any>;

describe('answers the document declares (real API app, real Postgres)', () => {
  const api = useApiWithoutTemporal('openapi-answers');
  let doc: Json;

  beforeAll(async () => {
    doc = (await (await api.app.request('/openapi.json')).json()) as Json;
  });

  /** The error codes the document shows for `status` of `method path` (none when the status is not declared). */
  function documentedCodes(method: string, path: string, status: number): string[] {
    const response = doc.paths[path]?.[method.toLowerCase()]?.responses?.[String(status)];
    if (!response) return [];
    return Object.keys(response.content?.['application/json']?.examples ?? {});
  }

  it('refuses a sync of a connection whose OAuth grant was refused (needs_reauth) with a documented 409 that says to give it new credentials', async () => {
    const { rows } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('acme', 'demo', 'reauth', 'needs_reauth') returning id`,
    );
    const id = rows[0]!.id;
    const window = { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' };
    const requests: [string, string, string, unknown][] = [
      ['POST', '/connections/{id}/sync', `/connections/${id}/sync`, { mode: 'full' }],
      ['POST', '/sync', '/sync', { app_key: 'reauth', tenant_id: 'acme' }],
      ['POST', '/jobs/schedule', '/jobs/schedule', { pairId: id, window }],
    ];
    for (const [method, documented, path, body] of requests) {
      const answer = await api.call(method, path, body);
      expect(answer.status, `${method} ${path}`).toBe(409);
      expect(answer.body.error.code, `${method} ${path}`).toBe('connection_needs_reauth');
      // A resume would not help: the grant stays refused until new credentials come.
      expect(answer.body.error.message, `${method} ${path}`).not.toContain('resume');
      expect(answer.body.error.message, `${method} ${path}`).toContain('credentials');
      expect(documentedCodes(method, documented, 409), `${method} ${documented}: the codes its 409 shows`).toContain('connection_needs_reauth');
    }
    const { rows: jobs } = await api.db.pool.query('select 1 from sync_jobs where connection_id = $1', [id]);
    expect(jobs).toEqual([]);
  });

  it('refuses a backfill of a connection being deleted with a documented 409 purge_in_progress', async () => {
    const { rows } = await api.db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('acme', 'demo', 'purging', 'disabled') returning id`,
    );
    const id = rows[0]!.id;
    const { rows: purges } = await api.db.pool.query<{ id: string }>(`insert into connection_purges (connection_id, tenant_id) values ($1, 'acme') returning id`, [id]);
    const answer = await api.call('POST', '/jobs/schedule', { pairId: id, window: { start: '2025-01-01T00:00:00Z', end: '2025-01-02T00:00:00Z' } });
    expect(answer.status).toBe(409);
    expect(answer.body.error).toMatchObject({ code: 'purge_in_progress', purge_id: purges[0]!.id });
    expect(documentedCodes('POST', '/jobs/schedule', 409)).toContain('purge_in_progress');
  });

  it('the probes document the refusal they answer: a URL holding NUL is a 400 whose message the example shows', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const answer = await api.app.request(`${path}?x=%00`);
      expect(answer.status, path).toBe(400);
      const body = (await answer.json()) as Json;
      const examples = doc.paths[path].get.responses['400'].content['application/json'].examples as Record<string, { value: Json }>;
      expect(Object.values(examples).map((e) => e.value), path).toEqual([body]);
    }
  });
});
