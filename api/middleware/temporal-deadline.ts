import type { MiddlewareHandler } from 'hono';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { underRequestTemporalDeadline } from '../../commands/deps';

/**
 * Runs the rest of the request under one deadline for its calls to Temporal:
 * `deps.temporalTimeoutMs` (API_TEMPORAL_TIMEOUT_SECONDS) from its first call to Temporal, so its
 * wait for its turn at the pool and its statements and row locks before that call are not counted.
 * A Temporal frontend that takes connections and answers nothing (a hung server, a black-holed
 * address) then fails the call with DEADLINE_EXCEEDED, which the request answers as 503
 * `unavailable` (Temporal), instead of the request waiting for ever and holding its tenant's turn.
 * Every database write the request committed before the call stays: the reconcile tick acts on
 * what the lost call would have said. Work that outlives the answer (a workflow start after it) and
 * an immediate sync's wait for its workflow set deadlines of their own (withTemporalDeadline).
 */
export function temporalDeadline(deps: Pick<ApiDeps, 'temporal' | 'temporalTimeoutMs'>): MiddlewareHandler<ApiEnv> {
  return async (_c, next) => underRequestTemporalDeadline(deps, next);
}
