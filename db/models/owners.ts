// Which tenant owns a resource: what a tenant API key is checked against before any route runs.
import type { Queryable } from '../queryable';

/** The lookup of the tenant of a row of `table` by id: null when there is none. */
function tenantOf(table: string) {
  return async (db: Queryable, id: string): Promise<string | null> => {
    const { rows } = await db.query<{ tenant_id: string }>(`select tenant_id from ${table} where id = $1`, [id]);
    return rows[0]?.tenant_id ?? null;
  };
}

/** The tenant of connection `id`, or null when there is none. */
export const connectionTenant = tenantOf('connections');

/** The tenant of job `id`, or null when there is none. */
export const jobTenant = tenantOf('sync_jobs');

/** The tenant of webhook `id`, or null when there is none. */
export const webhookTenant = tenantOf('webhooks');

/** The tenant of purge `id`, or null when there is none. */
export const purgeTenant = tenantOf('connection_purges');

/** The tenant of OAuth app `id`, or null when there is none. */
export const oauthAppTenant = tenantOf('oauth_apps');

/** The tenant of webhook delivery `id` (its webhook's), or null when there is none. */
export async function deliveryTenant(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ tenant_id: string }>('select w.tenant_id from webhook_deliveries d join webhooks w on w.id = d.webhook_id where d.id = $1', [id]);
  return rows[0]?.tenant_id ?? null;
}
