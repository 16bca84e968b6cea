import type { Client } from '@temporalio/client';
import type { Pool } from '../db/pool';
import { ensureConnectionWorkflow } from './connection-workflows';

/** Tenant and app key of the demo connection `npm start` creates. */
export const DEMO = { tenantId: 'demo-tenant', appKey: 'demo', providerSlug: 'demo', intervalSeconds: 60 } as const;

/**
 * Creates a demo connection (demo provider, 60 s interval) when the database has no connection at
 * all, and starts its workflow, so a newcomer sees live runs in the Web UI at once. Returns its id,
 * or null when connections already exist.
 */
export async function createDemoConnectionIfEmpty(pool: Pool, temporal: Client, taskQueue: string): Promise<string | null> {
  const { rows } = await pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config, metadata)
     select $1, $2, $3, '{"resource_types": ["issues", "pull_requests", "users"]}',
            jsonb_build_object('sync', jsonb_build_object('interval_seconds', $4::int))
      where not exists (select 1 from connections)
     on conflict do nothing
     returning id`,
    [DEMO.tenantId, DEMO.providerSlug, DEMO.appKey, DEMO.intervalSeconds],
  );
  const id = rows[0]?.id;
  if (!id) return null;
  await ensureConnectionWorkflow(temporal, taskQueue, { id, tenantId: DEMO.tenantId, providerSlug: DEMO.providerSlug });
  return id;
}
