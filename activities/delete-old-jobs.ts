import { deleteResolvedAlertsBatch } from '../db/models/alerts';
import { deleteOldAuditEntriesBatch } from '../db/models/audit';
import { deleteFinishedJobsBatch } from '../db/models/jobs';
import { deleteCompletedPurgesBatch } from '../db/models/purges';
import { purgeTombstonesBatch } from '../db/models/records';
import { clearExpiredPreviousSecrets, deleteOldEventsBatch, oldFinishedEventsLeft } from '../db/models/webhooks';
import type { Activities } from '../temporal/activities';
import type { ActivityDeps } from './deps';

const DAY_MS = 86_400_000;

/** Jobs deleted per statement unless the caller says otherwise. */
export const DEFAULT_DELETE_BATCH_SIZE = 1000;

/**
 * Runs `batch` (one statement deleting at most `size` rows) until a batch comes back short (and,
 * given `left`, nothing of it is left: a batch that skips no locked row can come back short because
 * another delete took rows it chose).
 * Autocommit: each batch commits on its own, so progress survives a failure midway.
 */
async function inBatches(size: number, batch: () => Promise<number>, left?: () => Promise<boolean>): Promise<{ deleted: number; batches: number }> {
  let deleted = 0;
  let batches = 0;
  for (;;) {
    const n = await batch();
    deleted += n;
    batches += 1;
    if (n < size && !(left && (await left()))) return { deleted, batches };
  }
}

/**
 * Retention cleanup: deletes finished jobs (`completed`, `failed`, `cancelled`) whose
 * `coalesce(finished_at, created_at)` is before `at − retentionDays`, with their tasks and logs by
 * FK cascade and their tasks' `sync_seen` rows. Active jobs are never deleted, however old.
 * Deletes in batches of `batchSize`, each its own statement and transaction, until a batch comes
 * back short, so a large backlog never holds one long transaction. Returns how many jobs it deleted.
 *
 * The same daily pass purges the change feed's tombstones older than the worker's
 * TOMBSTONE_RETENTION_DAYS, in batches too (each batch also logs, per connection and resource
 * type, how far it purged, so a consumer whose cursor it passed learns it must start again), and
 * webhook events older than `retentionDays` none of whose deliveries is still pending, with their
 * deliveries and attempts, completed connection purges finished more than `retentionDays` ago (one
 * row per connection deletion: a tenant deleting connections in a loop would grow the table for
 * good), alerts resolved more than `retentionDays` ago (a connection whose syncs fail and succeed
 * by turns raises a new one each time), and `audit_log` entries older than the worker's AUDIT_LOG_RETENTION_DAYS,
 * and drops the previous webhook secrets whose rotation overlap has ended (they sign nothing more).
 */
export function deleteOldJobs({ pool, logger, tombstoneRetentionDays, auditRetentionDays }: ActivityDeps): Activities['deleteOldJobs'] {
  return async (input) => {
    const batchSize = input.batchSize ?? DEFAULT_DELETE_BATCH_SIZE;
    if (!Number.isFinite(input.retentionDays) || input.retentionDays < 0) {
      throw new RangeError(`retentionDays must be a finite number >= 0, got ${input.retentionDays}`);
    }
    if (!Number.isInteger(batchSize) || batchSize < 1) {
      throw new RangeError(`batchSize must be an integer >= 1, got ${batchSize}`);
    }
    const cutoff = new Date(input.at - input.retentionDays * DAY_MS);
    const { deleted, batches } = await inBatches(batchSize, () => deleteFinishedJobsBatch(pool, cutoff, batchSize));
    logger.info(
      { deleted, batches, retention_days: input.retentionDays, cutoff: cutoff.toISOString() },
      'old sync jobs deleted',
    );
    const tombstoneCutoff = new Date(input.at - tombstoneRetentionDays * DAY_MS);
    const { deleted: purged } = await inBatches(batchSize, () => purgeTombstonesBatch(pool, tombstoneCutoff, batchSize));
    if (purged > 0) logger.info({ purged, tombstone_retention_days: tombstoneRetentionDays }, 'old record tombstones purged');
    // Events are chosen without SKIP LOCKED (a connection's purge or a redelivery may take some of a batch).
    const { deleted: events } = await inBatches(batchSize, () => deleteOldEventsBatch(pool, cutoff, batchSize), () => oldFinishedEventsLeft(pool, cutoff));
    if (events > 0) logger.info({ events, retention_days: input.retentionDays }, 'old webhook events deleted');
    const { deleted: purges } = await inBatches(batchSize, () => deleteCompletedPurgesBatch(pool, cutoff, batchSize));
    if (purges > 0) logger.info({ purges, retention_days: input.retentionDays }, 'old completed connection purges deleted');
    const { deleted: alerts } = await inBatches(batchSize, () => deleteResolvedAlertsBatch(pool, cutoff, batchSize));
    if (alerts > 0) logger.info({ alerts, retention_days: input.retentionDays }, 'old resolved alerts deleted');
    const auditCutoff = new Date(input.at - auditRetentionDays * DAY_MS);
    const { deleted: auditEntries } = await inBatches(batchSize, () => deleteOldAuditEntriesBatch(pool, auditCutoff, batchSize));
    if (auditEntries > 0) logger.info({ audit_entries: auditEntries, audit_retention_days: auditRetentionDays }, 'old audit log entries deleted');
    const previousSecrets = await clearExpiredPreviousSecrets(pool);
    if (previousSecrets > 0) logger.info({ webhooks: previousSecrets }, 'expired previous webhook secrets dropped');
    return deleted;
  };
}
