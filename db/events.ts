// Webhook events, written by the transaction that makes them true. A job's end, whoever ends it
// (its workflow, a cancellation, the stale-task reaper, a clean-up of abandoned jobs), sends the
// event of the status it ended with; the caller starts the returned deliveries after commit (and
// the reconcile tick starts any it could not).
import type { PoolClient } from 'pg';
import type { Queryable } from './queryable';
import { cancelJobAndTasks, findQueuedSchedulerJobs, type EndedJob } from './models/jobs';
import { findJobEventFacts, insertConnectionEvent } from './models/webhooks';
import { JOB_EVENT_TYPES, jobEventData } from '../policy/webhook-events';
import type { FinishedJobStatus } from '../policy/vocabulary';

/**
 * Writes the event of job `jobId`, which just ended `status` in transaction `tx` (`sync.completed`,
 * `sync.failed` or `sync.cancelled`), with one pending delivery per subscribed webhook of its
 * tenant; returns the deliveries' ids. Nothing is written when nobody listens.
 */
export async function emitJobEvent(tx: Queryable, jobId: string, status: FinishedJobStatus, at: Date): Promise<string[]> {
  const type = JOB_EVENT_TYPES[status];
  const facts = await findJobEventFacts(tx, jobId, type);
  if (!facts) return [];
  return insertConnectionEvent(tx, { type, connectionId: facts.connection_id, data: jobEventData(facts) }, at);
}

/** emitJobEvent for each job of `jobIds`, all ended `status`; returns every new delivery's id. */
export async function emitJobEvents(tx: Queryable, jobIds: string[], status: FinishedJobStatus, at: Date): Promise<string[]> {
  const deliveries: string[] = [];
  for (const jobId of jobIds) deliveries.push(...(await emitJobEvent(tx, jobId, status, at)));
  return deliveries;
}

/**
 * Cancels, with `reason`, the connection's queued scheduler jobs queued by runs other than
 * `exceptRunId` (every run when null), with their open tasks, and writes each one's
 * `sync.cancelled` event, in transaction `tx`; answers the jobs it ended and the new deliveries.
 * A job that began meanwhile (claimed, so no longer queued) is left alone.
 */
export async function cancelQueuedSchedulerJobs(
  tx: PoolClient,
  connectionId: string,
  at: Date,
  reason: string,
  exceptRunId: string | null,
): Promise<{ jobs: (EndedJob & { id: string })[]; deliveries: string[] }> {
  const ended: { jobs: (EndedJob & { id: string })[]; deliveries: string[] } = { jobs: [], deliveries: [] };
  for (const id of await findQueuedSchedulerJobs(tx, connectionId, exceptRunId)) {
    const job = await cancelJobAndTasks(tx, id, at, reason, true);
    if (!job) continue;
    ended.jobs.push({ ...job, id });
    ended.deliveries.push(...(await emitJobEvent(tx, id, 'cancelled', at)));
  }
  return ended;
}
