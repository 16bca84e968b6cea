import type { Queryable } from './queryable';
import { CONNECTION_COLUMNS, type ConnectionRow } from './connection-row';

/** A new connection. */
export interface NewConnection {
  tenantId: string;
  providerSlug: string;
  appKey: string;
  config: Record<string, unknown>;
  credentials: Record<string, unknown> | null;
  /** Written to `metadata.sync` (interval_seconds | cron). */
  schedule: Record<string, unknown> | null;
}

/**
 * Inserts a connection; null when (tenant_id, app_key) is taken. `metadata.sync.first_activated_at`
 * is stamped now, the reference of its first scheduled run.
 */
export async function insertConnection(db: Queryable, input: NewConnection): Promise<ConnectionRow | null> {
  const { rows } = await db.query<ConnectionRow>(
    `insert into connections as c (tenant_id, provider_slug, app_key, config, credentials, metadata)
     values ($1, $2, $3, $4, $5, jsonb_build_object('sync', $6::jsonb || jsonb_build_object('first_activated_at', now())))
     on conflict (tenant_id, app_key) do nothing
     returning ${CONNECTION_COLUMNS}`,
    [input.tenantId, input.providerSlug, input.appKey, input.config, input.credentials, input.schedule ?? {}],
  );
  return rows[0] ?? null;
}
