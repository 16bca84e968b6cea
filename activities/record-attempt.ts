import type { PoolClient } from 'pg';
import { raiseAlert, resolveAlert } from '../db/models/alerts';
import { closeBreakers, findBreaker, setFailureCount, touchFailure } from '../db/models/breaker';
import { findConnectionStatus, findProviderSlug } from '../db/models/connections';
import { insertConnectionEvent } from '../db/models/webhooks';
import { withTransaction } from '../db/transaction';
import { onFailedAttempt, onSuccess } from '../policy/breaker';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';
import { startDeliveriesSoon } from './webhook-deliveries';

/**
 * Counts a failed attempt of a connection toward its circuit breaker (rate-limit retries do not
 * come here). At the threshold the connection is paused for 30 minutes and one
 * `sync_circuit_breaker` warning alert and a `connection.breaker_opened` webhook event are
 * written, in the same transaction. An attempt counted already (the same `attemptKey` again: a
 * repeated call) changes nothing, and neither does an attempt of a connection that `needs_reauth`
 * (its OAuth grant was refused: the provider is not failing, the credentials are).
 */
export function recordAttemptFailure(deps: ActivityDeps): Activities['recordAttemptFailure'] {
  const { pool, logger } = deps;
  return async (input) => {
    const deliveries: string[] = [];
    const state = await withTransaction(pool, async (tx) => {
      if ((await findConnectionStatus(tx, input.connectionId)) === 'needs_reauth') {
        const breaker = await findBreaker(tx, input.connectionId);
        return { consecutiveFailures: breaker.consecutive_failures, pausedUntil: breaker.paused_until?.getTime() ?? null };
      }
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
        const context = {
          connection_id: input.connectionId,
          provider_slug: provider,
          consecutive_failures: next.consecutiveFailures,
          paused_until: pausedUntil.toISOString(),
          last_error: input.error,
        };
        if (await raiseAlert(tx, 'sync_circuit_breaker', input.connectionId, context, { replace: false })) {
          deliveries.push(...(await insertConnectionEvent(tx, { type: 'connection.breaker_opened', connectionId: input.connectionId, data: context }, new Date(input.at))));
        }
        logger.warn(
          { connection_id: input.connectionId, provider_slug: provider, paused_until: pausedUntil.toISOString() },
          'circuit breaker opened: connection paused',
        );
      }
      return { consecutiveFailures: next.consecutiveFailures, pausedUntil: next.pausedUntil };
    });
    startDeliveriesSoon(deps, deliveries);
    return state;
  };
}

/**
 * A successful attempt closes the breaker (count 0, no pause) and resolves the connection's open
 * alerts: the breaker's and that of a job that had failed for good.
 */
export function recordAttemptSuccess(deps: ActivityDeps): Activities['recordAttemptSuccess'] {
  return async (input) => {
    const deliveries: string[] = [];
    await withTransaction(deps.pool, (tx) => recordSuccessInTx(tx, input.connectionId, new Date(input.at), deliveries));
    startDeliveriesSoon(deps, deliveries);
  };
}

/**
 * A success's statements, inside the caller's transaction. Closing a breaker that had opened
 * (its alert was open) writes a `connection.breaker_closed` webhook event, whose deliveries' ids
 * are added to `deliveries`.
 */
export async function recordSuccessInTx(tx: PoolClient, connectionId: string, at: Date, deliveries: string[]): Promise<void> {
  const closed = onSuccess();
  await closeBreakers(tx, connectionId, closed.consecutiveFailures, closed.pausedUntil);
  if (closed.resolveAlert) {
    if (await resolveAlert(tx, 'sync_circuit_breaker', connectionId, at)) {
      const data = { connection_id: connectionId, closed_at: at.toISOString() };
      deliveries.push(...(await insertConnectionEvent(tx, { type: 'connection.breaker_closed', connectionId, data }, at)));
    }
    await resolveAlert(tx, 'sync_job_failed', connectionId, at);
  }
}
