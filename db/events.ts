// Webhook events, written by the transaction that makes them true. A job's end, whoever ends it
// (its workflow, a cancellation, the stale-task reaper, a clean-up of abandoned jobs), sends the
// event of the status it ended with; the caller starts the returned deliveries after commit (and
// the reconcile tick starts any it could not). A cancellation ends the same way whichever
// statement made it (`afterJobCancelled`): several statements, so it lives here, not in a table's
// module. A job event's feed cursor is sealed by the caller's codec (`cursors`, the credentials key
// active when the event is written) and stored so: the event's body never changes after.
import type { PoolClient } from 'pg';
import type { Queryable } from './queryable';
import { cancelActiveJob, findQueuedSchedulerJobs, type EndedJob } from './models/jobs';
import { forgetSeenOfJob } from './models/seen';
import { cancelOpenTasks, lockOpenTasksOfJobs } from './models/tasks';
import { findJobEventFacts, insertConnectionEvent } from './models/webhooks';
import type { CursorCodec, FeedCursor } from '../policy/cursors';
import { JOB_EVENT_TYPES, jobEventData } from '../policy/webhook-events';
import type { FinishedJobStatus } from '../policy/vocabulary';

/**
 * Writes the event of job `jobId`, which just ended `status` in transaction `tx` (`sync.completed`,
 * `sync.failed` or `sync.cancelled`), with one pending delivery per subscribed webhook of its
 * tenant, its feed cursor sealed by `cursors`; returns the deliveries' ids. Nothing is written
 * when nobody listens.
 */
export async function emitJobEvent(tx: Queryable, jobId: string, status: FinishedJobStatus, at: Date, cursors: CursorCodec<FeedCursor>): Promise<string[]> {
  const type = JOB_EVENT_TYPES[status];
  const facts = await findJobEventFacts(tx, jobId, type);
  if (!facts) return [];
  return insertConnectionEvent(tx, { type, connectionId: facts.connection_id, data: jobEventData(facts, cursors) }, at);
}

/** emitJobEvent for each job of `jobIds`, all ended `status`; returns every new delivery's id. */
export async function emitJobEvents(tx: Queryable, jobIds: string[], status: FinishedJobStatus, at: Date, cursors: CursorCodec<FeedCursor>): Promise<string[]> {
  const deliveries: string[] = [];
  for (const jobId of jobIds) deliveries.push(...(await emitJobEvent(tx, jobId, status, at, cursors)));
  return deliveries;
}

/**
 * What follows a job's cancellation, in the transaction `tx` whose statement cancelled job `jobId`
 * (whichever statement did: `cancelJobAndTasks`, or the start-up cleanup's `endLeftSchedulerJobs`):
 * its open tasks are cancelled with the job's `reason`, their seen-sets forgotten (a cancelled full
 * pass never reaches its deletion step), and its `sync.cancelled` event written; returns the new
 * deliveries' ids, which the caller starts once `tx` committed.
 */
export async function afterJobCancelled(tx: PoolClient, jobId: string, at: Date, reason: string, cursors: CursorCodec<FeedCursor>): Promise<string[]> {
  await cancelOpenTasks(tx, jobId, at, reason);
  await forgetSeenOfJob(tx, jobId);
  return emitJobEvent(tx, jobId, 'cancelled', at, cursors);
}

/**
 * Inside a transaction: cancels an active job (`onlyQueued`: only one not yet claimed) with a
 * reason, and what follows (`afterJobCancelled`: its open tasks, their seen-sets, its
 * `sync.cancelled` event). Null when the job had already finished (`onlyQueued`: or was no longer
 * queued); else the ended row with the event's deliveries. The caller counts the ended job's
 * metrics and starts the deliveries once the transaction committed.
 */
export async function cancelJobAndTasks(
  tx: PoolClient,
  id: string,
  at: Date,
  reason: string,
  cursors: CursorCodec<FeedCursor>,
  onlyQueued = false,
): Promise<(EndedJob & { connection_id: string; deliveries: string[] }) | null> {
  // The tasks' rows before the job's (the order a page's statement takes them); a job not yet
  // claimed (`onlyQueued`) has no page being stored.
  if (!onlyQueued) await lockOpenTasksOfJobs(tx, [id]);
  const job = await cancelActiveJob(tx, id, at, reason, onlyQueued);
  if (!job) return null;
  return { ...job, deliveries: await afterJobCancelled(tx, id, at, reason, cursors) };
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
  cursors: CursorCodec<FeedCursor>,
): Promise<{ jobs: (EndedJob & { id: string })[]; deliveries: string[] }> {
  const ended: { jobs: (EndedJob & { id: string })[]; deliveries: string[] } = { jobs: [], deliveries: [] };
  for (const id of await findQueuedSchedulerJobs(tx, connectionId, exceptRunId)) {
    const cancelled = await cancelJobAndTasks(tx, id, at, reason, cursors, true);
    if (!cancelled) continue;
    const { deliveries, ...job } = cancelled;
    ended.jobs.push({ ...job, id });
    ended.deliveries.push(...deliveries);
  }
  return ended;
}
