import type { PoolClient } from 'pg';
import { addProcessedEntities } from '../../db/models/jobs';
import { forgetSeenOfTask, seenSetSize, type SeenSetSize } from '../../db/models/seen';
import { restartTaskPass } from '../../db/models/tasks';

/**
 * When a full pass's seen-set is incomplete (its rows in `sync_seen` differ from the logged
 * `seen_count`), sends the pass back to its first page in transaction `tx`: the paging progress,
 * the seen rows and the count go, and the job's `processed_entities` drops what the discarded pages
 * counted. Returns the sizes it found when it restarted the pass, null when the set was complete.
 */
export async function restartIfSeenSetLost(tx: PoolClient, jobId: string, taskId: string): Promise<SeenSetSize | null> {
  const size = await seenSetSize(tx, taskId);
  if (size.stored === size.counted) return null;
  const discarded = await restartTaskPass(tx, taskId);
  await forgetSeenOfTask(tx, taskId);
  if (discarded > 0) await addProcessedEntities(tx, jobId, -discarded);
  return size;
}
