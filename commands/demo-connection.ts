import { anyConnectionExists } from '../db/models/connections';
import { createConnection } from './connections';
import type { CommandDeps } from './deps';
import { CommandRefused } from './errors';

/** Tenant and app key of the demo connection `npm start` creates. */
export const DEMO = { tenantId: 'demo-tenant', appKey: 'demo', providerSlug: 'demo', intervalSeconds: 60 } as const;

/**
 * Creates a demo connection (demo provider, 60 s interval) through the ordinary create command
 * when the database has no connection at all, so a newcomer sees live runs in the Web UI at once.
 * Returns its id, or null when connections already exist.
 */
export async function createDemoConnectionIfEmpty(deps: CommandDeps): Promise<string | null> {
  if (await anyConnectionExists(deps.pool)) return null;
  try {
    const row = await createConnection(deps, {
      tenantId: DEMO.tenantId,
      appKey: DEMO.appKey,
      provider: DEMO.providerSlug,
      config: { resource_types: ['issues', 'pull_requests', 'users'] },
      credentials: null,
      schedule: { interval_seconds: DEMO.intervalSeconds },
      status: 'active',
    });
    return row.id;
  } catch (err) {
    // Another process created it first.
    if (err instanceof CommandRefused && err.reason === 'conflict') return null;
    throw err;
  }
}
