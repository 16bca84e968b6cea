import type { ScheduleSettings } from '../policy/schedule';
import type { ActivityDeps } from './deps';

/** What a connection workflow needs to plan its next run. Times are epoch milliseconds. */
export interface ConnectionContext {
  connectionId: string;
  tenantId: string;
  providerSlug: string;
  status: 'active' | 'paused' | 'disabled';
  /** Raw `metadata.sync`; validated by the pure planner, which warns about bad values. */
  sync: unknown;
  createdAt: number;
  /** Finish time of the latest finished incremental job, ignoring abandoned ones. */
  lastFinishedAt: number | null;
  /** Circuit-breaker pause still in force at `at`, if any. */
  pausedUntil: number | null;
  /** The worker's configured schedule bounds; recorded in history, so replay stays deterministic. */
  settings: ScheduleSettings;
}

/** Reads one connection's scheduling context; null when the connection no longer exists. */
export function loadConnectionContext({ pool, settings }: ActivityDeps) {
  return async (connectionId: string, at: number): Promise<ConnectionContext | null> => {
    const { rows } = await pool.query(
      `select c.id, c.tenant_id, c.provider_slug, c.status, c.metadata -> 'sync' as sync, c.created_at,
              (select max(j.finished_at) from sync_jobs j
                where j.connection_id = c.id and j.job_type = 'incremental'
                  and j.status in ('completed', 'failed') and j.abandoned_at is null) as last_finished_at,
              (select max(f.paused_until) from connector_failure_stats f
                where f.connection_id = c.id and f.paused_until > $2) as paused_until
         from connections c where c.id = $1`,
      [connectionId, new Date(at)],
    );
    const row = rows[0];
    if (!row) return null;
    return {
      connectionId: row.id,
      tenantId: row.tenant_id,
      providerSlug: row.provider_slug,
      status: row.status,
      sync: row.sync ?? undefined,
      createdAt: row.created_at.getTime(),
      lastFinishedAt: row.last_finished_at?.getTime() ?? null,
      pausedUntil: row.paused_until?.getTime() ?? null,
      settings,
    };
  };
}
