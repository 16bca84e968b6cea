// SQL of `alerts`: at most one open alert per category and connection (a partial unique index),
// resolved by setting `resolved_at`. Contexts hold summaries only, never credentials.
import type { PoolClient } from 'pg';
import type { Queryable } from '../queryable';

/** Alert categories Synctide raises. */
export type AlertCategory = 'sync_circuit_breaker' | 'sync_job_failed' | 'connection_credentials_invalid';

/** An open alert as the API shows it. */
export interface AlertRow {
  id: string;
  severity: string;
  context: Record<string, unknown>;
  created_at: Date;
}

/**
 * Raises a warning of `category` for a connection unless one is open; `replace` updates an open
 * one's context. True when it raised a new one.
 */
export async function raiseAlert(
  tx: PoolClient,
  category: AlertCategory,
  connectionId: string,
  context: Record<string, unknown>,
  opts: { replace: boolean },
): Promise<boolean> {
  const { rows } = await tx.query<{ raised: boolean }>(
    `insert into alerts (category, severity, connection_id, context)
     values ($1, 'warning', $2, $3)
     on conflict (category, connection_id) where resolved_at is null
     do ${opts.replace ? 'update set context = excluded.context' : 'nothing'}
     returning (xmax = 0) as raised`,
    [category, connectionId, context],
  );
  return rows[0]?.raised ?? false;
}

/** Resolves the connection's open alert of `category`, if any; true when there was one. */
export async function resolveAlert(tx: PoolClient, category: AlertCategory, connectionId: string, at: Date): Promise<boolean> {
  const { rowCount } = await tx.query(
    `update alerts set resolved_at = $3
      where connection_id = $2 and category = $1 and resolved_at is null`,
    [category, connectionId, at],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Deletes at most `limit` alerts resolved before `cutoff` (the retention clean-up's): a connection
 * whose syncs fail and succeed by turns raises a new alert each time, one row a failure, read by
 * nothing once resolved. Open alerts stay however old. Returns how many it deleted.
 */
export async function deleteResolvedAlertsBatch(db: Queryable, cutoff: Date, limit: number): Promise<number> {
  const { rowCount } = await db.query('delete from alerts where id in (select id from alerts where resolved_at < $1 limit $2)', [cutoff, limit]);
  return rowCount ?? 0;
}

/** The connection's open alert of `category`, or null. */
export async function findOpenAlert(db: Queryable, category: AlertCategory, connectionId: string): Promise<AlertRow | null> {
  const { rows } = await db.query<AlertRow>(
    `select id, severity, context, created_at from alerts
      where connection_id = $2 and category = $1 and resolved_at is null limit 1`,
    [category, connectionId],
  );
  return rows[0] ?? null;
}
