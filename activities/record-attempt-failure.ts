import { withTransaction } from '../db/transaction';
import { onFailedAttempt, onSuccess } from '../policy/breaker';
import type { ActivityDeps } from './deps';

/** The breaker state after a failed attempt (times in epoch ms). */
export interface BreakerState {
  consecutiveFailures: number;
  pausedUntil: number | null;
}

/**
 * Counts a failed attempt of a connection toward its circuit breaker (rate-limit retries do not
 * come here). At the threshold the connection is paused for 30 minutes and one
 * `sync_circuit_breaker` warning alert is raised, in the same transaction.
 */
export function recordAttemptFailure({ pool, logger }: ActivityDeps) {
  return async (input: { connectionId: string; at: number; error: string }): Promise<BreakerState> =>
    withTransaction(pool, async (tx) => {
      const conn = await tx.query('select provider_slug from connections where id = $1', [input.connectionId]);
      const provider: string = conn.rows[0]?.provider_slug ?? 'unknown';
      const { rows } = await tx.query(
        `insert into connector_failure_stats (connection_id, provider_slug, consecutive_failures, last_failure_at)
         values ($1, $2, 0, $3)
         on conflict (connection_id, provider_slug) do update set last_failure_at = excluded.last_failure_at
         returning consecutive_failures, paused_until`,
        [input.connectionId, provider, new Date(input.at)],
      );
      const current = rows[0];
      const next = onFailedAttempt({
        consecutiveFailures: current.consecutive_failures,
        now: input.at,
        pausedUntil: current.paused_until?.getTime() ?? null,
      });
      await tx.query(
        `update connector_failure_stats set consecutive_failures = $3, paused_until = coalesce($4, paused_until)
          where connection_id = $1 and provider_slug = $2`,
        [input.connectionId, provider, next.consecutiveFailures, next.pausedUntil === null ? null : new Date(next.pausedUntil)],
      );
      if (next.raiseAlert && next.pausedUntil !== null) {
        await tx.query(
          `insert into alerts (category, severity, connection_id, context)
           values ('sync_circuit_breaker', 'warning', $1, $2)
           on conflict (category, connection_id) where resolved_at is null do nothing`,
          [input.connectionId, {
            connection_id: input.connectionId,
            provider_slug: provider,
            consecutive_failures: next.consecutiveFailures,
            paused_until: new Date(next.pausedUntil).toISOString(),
            last_error: input.error,
          }],
        );
        logger.warn(
          { connection_id: input.connectionId, provider_slug: provider, paused_until: new Date(next.pausedUntil).toISOString() },
          'circuit breaker opened: connection paused',
        );
      }
      return { consecutiveFailures: next.consecutiveFailures, pausedUntil: next.pausedUntil };
    });
}

/** A successful attempt closes the breaker: count 0, no pause, open breaker alert resolved. */
export function recordAttemptSuccess({ pool }: ActivityDeps) {
  return async (input: { connectionId: string; at: number }): Promise<void> => {
    await withTransaction(pool, async (tx) => {
      const closed = onSuccess();
      await tx.query(
        `update connector_failure_stats set consecutive_failures = $2, paused_until = $3
          where connection_id = $1 and (consecutive_failures <> $2 or paused_until is distinct from $3)`,
        [input.connectionId, closed.consecutiveFailures, closed.pausedUntil],
      );
      if (closed.resolveAlert) {
        await tx.query(
          `update alerts set resolved_at = $2
            where connection_id = $1 and category = 'sync_circuit_breaker' and resolved_at is null`,
          [input.connectionId, new Date(input.at)],
        );
      }
    });
  };
}
