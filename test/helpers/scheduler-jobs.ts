import type { Queryable } from '../../db/queryable';

/**
 * Inserts a scheduled job of connection `connectionId` as run `runId` of its connection workflow
 * (`connection:<id>`) left it when that run was lost: `running` (started now; the default) or
 * `queued`, created now or, `aged`, two minutes ago (old enough for the reconcile tick to check
 * that a workflow owns it). Answers its id.
 */
export async function insertLostRunJob(
  db: Queryable,
  connectionId: string,
  opts: { status?: 'running' | 'queued'; aged?: boolean; runId?: string } = {},
): Promise<string> {
  const { status = 'running', aged = false, runId = 'a-run-that-is-gone' } = opts;
  const { rows } = await db.query<{ id: string }>(
    `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at, created_at, workflow_id, scheduler_run_id)
     select id, tenant_id, 'incremental', 'schedule', $2::text, case when $2::text = 'running' then now() end,
            now() - case when $3::boolean then interval '2 minutes' else interval '0' end, 'connection:' || id, $4
       from connections where id = $1 returning id`,
    [connectionId, status, aged, runId],
  );
  return rows[0]!.id;
}

/** Inserts a task of job `jobId` (resource type `items`) being processed under a claim token of its own; answers its id and token. */
export async function insertProcessingTask(db: Queryable, jobId: string): Promise<{ id: string; claim: string }> {
  const { rows } = await db.query<{ id: string; claim: string }>(
    `insert into sync_tasks (job_id, resource_type, status, started_at, heartbeat_at, claim)
     values ($1, 'items', 'processing', now(), now(), gen_random_uuid()) returning id, claim`,
    [jobId],
  );
  return rows[0]!;
}
