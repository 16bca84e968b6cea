import type { Context } from '@temporalio/activity';

/**
 * How often an activity heartbeats while it works: cancellation arrives with a heartbeat's answer,
 * and the SDK sends at most one heartbeat per 80 % of the heartbeat timeout, so a short period
 * costs no more requests to Temporal.
 */
export const HEARTBEAT_EVERY_MS = 2_000;

/**
 * Runs `work`, heartbeating `details()` (where the run stands) every HEARTBEAT_EVERY_MS meanwhile.
 * For an activity whose every step is bounded (a provider request by its timeout, a statement by
 * the worker's statement_timeout, a wait by its own bound): one step, or a run of them between two
 * points of progress, may then outlast the heartbeat timeout (a hundred deletion re-checks of a slow
 * provider, a wait for another worker's credential renewal) without the attempt being timed out
 * while it works; a worker that died still is.
 */
export async function heartbeatingWhile<T>(ctx: Context, details: () => unknown, work: () => Promise<T>): Promise<T> {
  const beat = setInterval(() => ctx.heartbeat(details()), HEARTBEAT_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(beat);
  }
}
