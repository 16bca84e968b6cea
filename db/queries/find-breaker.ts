import type { Queryable } from './queryable';

/** The circuit-breaker state of a connection and its open breaker alert, if any. */
export interface BreakerState {
  consecutive_failures: number;
  paused_until: Date | null;
  last_failure_at: Date | null;
  /** The open `sync_circuit_breaker` alert: its id, severity, context and time. */
  alert: { id: string; severity: string; context: Record<string, unknown>; created_at: Date } | null;
}

/** The breaker of connection `connectionId` (zero failures and no pause when it never failed). */
export async function findBreaker(db: Queryable, connectionId: string): Promise<BreakerState> {
  const { rows } = await db.query(
    `select coalesce(max(f.consecutive_failures), 0)::int as consecutive_failures,
            max(f.paused_until) as paused_until, max(f.last_failure_at) as last_failure_at,
            (select jsonb_build_object('id', a.id, 'severity', a.severity, 'context', a.context, 'created_at', a.created_at)
               from alerts a where a.connection_id = $1 and a.category = 'sync_circuit_breaker' and a.resolved_at is null
               limit 1) as alert
       from connector_failure_stats f where f.connection_id = $1`,
    [connectionId],
  );
  const row = rows[0]!; // an aggregate without GROUP BY always returns one row
  return {
    consecutive_failures: row.consecutive_failures,
    paused_until: row.paused_until,
    last_failure_at: row.last_failure_at,
    alert: row.alert && { ...row.alert, created_at: new Date(row.alert.created_at) },
  };
}
