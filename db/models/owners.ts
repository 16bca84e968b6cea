// Which tenant owns a resource: what a tenant API key is checked against before any route runs.
import type { Queryable } from '../queryable';

/** The tenant of connection `id`, or null when there is none. */
export async function connectionTenant(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ tenant_id: string }>('select tenant_id from connections where id = $1', [id]);
  return rows[0]?.tenant_id ?? null;
}

/** The tenant of job `id`, or null when there is none. */
export async function jobTenant(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ tenant_id: string }>('select tenant_id from sync_jobs where id = $1', [id]);
  return rows[0]?.tenant_id ?? null;
}

/** The tenant of webhook `id`, or null when there is none. */
export async function webhookTenant(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ tenant_id: string }>('select tenant_id from webhooks where id = $1', [id]);
  return rows[0]?.tenant_id ?? null;
}

/** The tenant of purge `id`, or null when there is none. */
export async function purgeTenant(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ tenant_id: string }>('select tenant_id from connection_purges where id = $1', [id]);
  return rows[0]?.tenant_id ?? null;
}

/** The tenant of OAuth app `id`, or null when there is none. */
export async function oauthAppTenant(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ tenant_id: string }>('select tenant_id from oauth_apps where id = $1', [id]);
  return rows[0]?.tenant_id ?? null;
}
