// SQL of `connector_failure_stats`: each connection's circuit breaker (consecutive failed
// attempts per provider and the pause they caused). The decisions are policy/breaker.ts's.
import type { PoolClient } from 'pg';
import type { Queryable } from '../queryable';

/**
 * SQL for "the breaker pause of connection `connectionColumn` still in force at time `atParam`"
 * (null when none): the one definition every reader of the pause uses.
 */
export function pausedUntilAt(connectionColumn: string, atParam: string): string {
  return `(select max(f.paused_until) from connector_failure_stats f
            where f.connection_id = ${connectionColumn} and f.paused_until > ${atParam})`;
}

/** The breaker pause of connection `connectionId` in force at `at`, or null. */
export async function findPauseAt(db: Queryable, connectionId: string, at: Date): Promise<Date | null> {
  const { rows } = await db.query<{ paused_until: Date | null }>(`select ${pausedUntilAt('$1', '$2')} as paused_until`, [connectionId, at]);
  return rows[0]?.paused_until ?? null;
}

/** The circuit-breaker counters of a connection, as the API shows them. */
export interface BreakerRow {
  consecutive_failures: number;
  paused_until: Date | null;
  last_failure_at: Date | null;
}

/** The breaker of connection `connectionId` (zero failures and no pause when it never failed). */
export async function findBreaker(db: Queryable, connectionId: string): Promise<BreakerRow> {
  const { rows } = await db.query<BreakerRow>(
    `select coalesce(max(f.consecutive_failures), 0)::int as consecutive_failures,
            max(f.paused_until) as paused_until, max(f.last_failure_at) as last_failure_at
       from connector_failure_stats f where f.connection_id = $1`,
    [connectionId],
  );
  return rows[0]!; // an aggregate without GROUP BY always returns one row
}

/** The stored breaker state of one provider of a connection, and the last failed attempt it counted. */
export interface FailureRow {
  consecutive_failures: number;
  paused_until: Date | null;
  last_failure_key: string | null;
}

/** Notes a failure time (creating the row at count 0) and returns the stored state. */
export async function touchFailure(tx: PoolClient, connectionId: string, provider: string, at: Date): Promise<FailureRow> {
  const { rows } = await tx.query<FailureRow>(
    `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, last_failure_at)
     values ($1, $2, 0, $3)
     on conflict (connection_id, provider_slug) do update set last_failure_at = excluded.last_failure_at
     returning consecutive_failures, paused_until, last_failure_key`,
    [connectionId, provider, at],
  );
  return rows[0]!;
}

/** Stores a new failure count, when given a new pause, and the attempt it counted. */
export async function setFailureCount(
  tx: PoolClient,
  connectionId: string,
  provider: string,
  count: number,
  pausedUntil: Date | null,
  attemptKey: string | null,
): Promise<void> {
  await tx.query(
    `update connector_failure_stats set consecutive_failures = $3, paused_until = coalesce($4, paused_until), last_failure_key = $5
      where connection_id = $1 and provider_slug = $2`,
    [connectionId, provider, count, pausedUntil, attemptKey],
  );
}

/** Closes every breaker of a connection (count and pause as given), writing only rows that change. */
export async function closeBreakers(tx: PoolClient, connectionId: string, count: number, pausedUntil: Date | null): Promise<void> {
  await tx.query(
    `update connector_failure_stats set consecutive_failures = $2, paused_until = $3
      where connection_id = $1 and (consecutive_failures <> $2 or paused_until is distinct from $3)`,
    [connectionId, count, pausedUntil],
  );
}

/** Connections whose breaker pause is in force now, by provider (`sync_breakers_open`). */
export async function countOpenBreakersByProvider(db: Queryable): Promise<Map<string, number>> {
  const { rows } = await db.query<{ provider: string; n: number }>(
    `select provider_slug as provider, count(distinct connection_id)::int as n from connector_failure_stats
      where paused_until > now() group by provider_slug`,
  );
  return new Map(rows.map((r) => [r.provider, r.n]));
}
