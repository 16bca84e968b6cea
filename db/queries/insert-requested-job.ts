import type { Queryable } from './queryable';
import { findJob } from './find-job';
import type { JobRow } from './job-row';

/** A job requested over the API: a sync (`api`) or a backfill of a window (`backfill`). */
export interface RequestedJob {
  id: string;
  connectionId: string;
  tenantId: string;
  jobType: 'incremental' | 'full';
  trigger: 'api' | 'backfill';
  window?: { start: Date; end: Date };
  priority?: number;
  payload?: Record<string, unknown>;
  idempotencyKey?: string;
}

/**
 * What became of the request: `inserted` (this job), `same_key` (a job with the same
 * Idempotency-Key exists), `active` (an active job of the same kind blocks it: one active job per
 * connection and type, one active backfill per connection).
 */
export type InsertRequestedJobResult =
  | { outcome: 'inserted'; job: JobRow }
  | { outcome: 'same_key'; job: JobRow }
  | { outcome: 'active'; job: JobRow };

/**
 * Inserts a requested job, guarded by the unique indexes (idempotency key per tenant, one active
 * job per kind), so any number of concurrent identical requests insert one row. On a conflict
 * it returns the job that won. Retries when the conflicting job finished in between.
 */
export async function insertRequestedJob(db: Queryable, job: RequestedJob): Promise<InsertRequestedJobResult> {
  for (let attempt = 0; attempt < 5; attempt++) {
    if (job.idempotencyKey) {
      const same = await findByKey(db, job.tenantId, job.idempotencyKey);
      if (same) return { outcome: 'same_key', job: same };
    }
    const inserted = await db.query(
      `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, priority, scheduled_at,
                              window_start, window_end, payload, idempotency_key, workflow_id)
       values ($1, $2, $3, $4, $5, 'queued', $6, now(), $7, $8, $9, $10, $11)
       on conflict do nothing returning id`,
      [job.id, job.connectionId, job.tenantId, job.jobType, job.trigger, job.priority ?? 0, job.window?.start ?? null,
        job.window?.end ?? null, job.payload ?? {}, job.idempotencyKey ?? null, `sync-job:${job.id}`],
    );
    if (inserted.rowCount) return { outcome: 'inserted', job: (await findJob(db, job.id))! };
    if (job.idempotencyKey) {
      const same = await findByKey(db, job.tenantId, job.idempotencyKey);
      if (same) return { outcome: 'same_key', job: same };
    }
    const { rows } = await db.query<{ id: string }>(
      `select id from sync_jobs
        where connection_id = $1 and status in ('queued', 'running', 'retrying')
          and (case when $2 = 'backfill' then trigger = 'backfill' else trigger <> 'backfill' and job_type = $3 end)`,
      [job.connectionId, job.trigger, job.jobType],
    );
    const active = rows[0] && (await findJob(db, rows[0].id));
    if (active) return { outcome: 'active', job: active };
  }
  throw new Error('could not insert or find the requested job after 5 attempts');
}

async function findByKey(db: Queryable, tenantId: string, key: string): Promise<JobRow | null> {
  const { rows } = await db.query<{ id: string }>(
    'select id from sync_jobs where tenant_id = $1 and idempotency_key = $2',
    [tenantId, key],
  );
  return rows[0] ? findJob(db, rows[0].id) : null;
}
