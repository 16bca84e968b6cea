// Resolved alerts (`alerts` rows whose `resolved_at` is set) are deleted by the daily retention
// clean-up (deleteOldJobs) once resolved more than RETENTION_DAYS ago. A connection whose syncs
// fail and succeed by turns (a tenant's own flaky provider) raises and resolves a
// `sync_job_failed` alert each time, one new row a failure, which would otherwise stay for as
// long as the connection exists. Open alerts stay however old: the API answers with them.
// Real Postgres; the activity called as the reconcile workflow calls it.
import { describe, expect, it } from 'vitest';
import { deleteOldJobs } from '../activities/delete-old-jobs';
import { testActivityDeps } from './helpers/deps';
import { useTestDatabase } from './helpers/database';

const DAY = 86_400_000;

describe('retention of resolved alerts (real Postgres)', () => {
  const db = useTestDatabase();

  it('alerts resolved before the retention cut-off are deleted, in batches; recently resolved and open ones stay', async () => {
    const at = Date.now();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('flaky', 'demo', 'flaky-1', 'active') returning id`,
    );
    const connectionId = rows[0]!.id;
    /** `n` alerts of the connection raised and (unless `open`) resolved `daysAgo` days before `at`. */
    const alerts = async (category: string, daysAgo: number, n: number, open = false) =>
      (await db.pool.query<{ id: string }>(
        `insert into alerts (category, severity, connection_id, created_at, resolved_at)
         select $1, 'warning', $2, $3, case when $5 then null else $3::timestamptz end from generate_series(1, $4::int) returning id`,
        [category, connectionId, new Date(at - daysAgo * DAY), n, open],
      )).rows.map((row) => row.id);
    const old = await alerts('sync_job_failed', 8, 2500);
    const recent = await alerts('sync_job_failed', 1, 1);
    const open = await alerts('sync_circuit_breaker', 30, 1, true);
    const left = async (ids: string[]) => (await db.pool.query<{ n: number }>('select count(*)::int as n from alerts where id = any($1::uuid[])', [ids])).rows[0]!.n;

    await deleteOldJobs(testActivityDeps({ pool: db.pool }).deps)({ at, retentionDays: 7, batchSize: 1000 });
    expect({ old: await left(old), recent: await left(recent), open: await left(open) }).toEqual({ old: 0, recent: 1, open: 1 });
  });
});
