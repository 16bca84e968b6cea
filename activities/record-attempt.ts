import type { PoolClient } from 'pg';
import { raiseAlert, resolveAlert } from '../db/models/alerts';
import { closeBreakers, setFailureCount, touchFailure } from '../db/models/breaker';
import { findProviderSlug } from '../db/models/connections';
import { withTransaction } from '../db/transaction';
import { onFailedAttempt, onSuccess } from '../policy/breaker';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';

/**
 * Counts a failed attempt of a connection toward its circuit breaker (rate-limit retries do not
 * come here). At the threshold the connection is paused for 30 minutes and one
 * `sync_circuit_breaker` warning alert is raised, in the same transaction. An attempt counted
 * already (the same `attemptKey` again: a repeated call) changes nothing.
 */
export function recordAttemptFailure({ pool, logger }: ActivityDeps): Activities['recordAttemptFailure'] {
  return async (input) =>
    withTransaction(pool, async (tx) => {
      const provider = (await findProviderSlug(tx, input.connectionId)) ?? 'unknown';
      const current = await touchFailure(tx, input.connectionId, provider, new Date(input.at));
      if (input.attemptKey !== undefined && current.last_failure_key === input.attemptKey) {
        return { consecutiveFailures: current.consecutive_failures, pausedUntil: current.paused_until?.getTime() ?? null };
      }
      const next = onFailedAttempt({
        consecutiveFailures: current.consecutive_failures,
        now: input.at,
        pausedUntil: current.paused_until?.getTime() ?? null,
      });
      const pausedUntil = next.pausedUntil === null ? null : new Date(next.pausedUntil);
      await setFailureCount(tx, input.connectionId, provider, next.consecutiveFailures, pausedUntil, input.attemptKey ?? null);
      if (next.raiseAlert && pausedUntil !== null) {
        await raiseAlert(tx, 'sync_circuit_breaker', input.connectionId, {
          connection_id: input.connectionId,
          provider_slug: provider,
          consecutive_failures: next.consecutiveFailures,
          paused_until: pausedUntil.toISOString(),
          last_error: input.error,
        }, { replace: false });
        logger.warn(
          { connection_id: input.connectionId, provider_slug: provider, paused_until: pausedUntil.toISOString() },
          'circuit breaker opened: connection paused',
        );
      }
      return { consecutiveFailures: next.consecutiveFailures, pausedUntil: next.pausedUntil };
    });
}

/**
 * A successful attempt closes the breaker (count 0, no pause) and resolves the connection's open
 * alerts: the breaker's and that of a job that had failed for good.
 */
export function recordAttemptSuccess({ pool }: ActivityDeps): Activities['recordAttemptSuccess'] {
  return async (input) => {
    await withTransaction(pool, (tx) => recordSuccessInTx(tx, input.connectionId, new Date(input.at)));
  };
}

/** A success's statements, inside the caller's transaction. */
export async function recordSuccessInTx(tx: PoolClient, connectionId: string, at: Date): Promise<void> {
  const closed = onSuccess();
  await closeBreakers(tx, connectionId, closed.consecutiveFailures, closed.pausedUntil);
  if (closed.resolveAlert) {
    await resolveAlert(tx, 'sync_circuit_breaker', connectionId, at);
    await resolveAlert(tx, 'sync_job_failed', connectionId, at);
  }
}
