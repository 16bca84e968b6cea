// Completed connection purges (`connection_purges` rows, one per DELETE /connections/{id}) are
// deleted by the daily retention clean-up (deleteOldJobs) once finished more than RETENTION_DAYS
// ago, as finished jobs are: a tenant looping create and delete of a connection leaves one row per
// deletion, which would otherwise stay for good. Open purges (pending, running) stay however old.
// Real Postgres; the activity called as the reconcile workflow calls it.
import { describe, expect, it } from 'vitest';
import { deleteOldJobs } from '../activities/delete-old-jobs';
import { testActivityDeps } from './helpers/deps';
import { useTestDatabase } from './helpers/database';

const DAY = 86_400_000;

describe('retention of completed connection purges (real Postgres)', () => {
  const db = useTestDatabase();

  /** `n` purges of tenant `tenant` in `status`, created and (when completed) finished `daysAgo` days before `at`. */
  async function purges(tenant: string, status: 'pending' | 'running' | 'completed', daysAgo: number, at: number, n = 1): Promise<string[]> {
    const when = new Date(at - daysAgo * DAY);
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connection_purges (connection_id, tenant_id, status, created_at, finished_at)
       select gen_random_uuid(), $1, $2, $3, case when $2 = 'completed' then $3::timestamptz end from generate_series(1, $4::int)
       returning id`,
      [tenant, status, when, n],
    );
    return rows.map((row) => row.id);
  }
  const left = async (ids: string[]) => (await db.pool.query<{ n: number }>('select count(*)::int as n from connection_purges where id = any($1::uuid[])', [ids])).rows[0]!.n;

  it('completed purges finished before the retention cut-off are deleted, in batches; recent and open ones stay', async () => {
    const at = Date.now();
    // A tenant that created and deleted connections in a loop, more than one batch of them, long ago.
    const old = await purges('looper', 'completed', 8, at, 2500);
    const recent = await purges('looper', 'completed', 1, at);
    const open = [...(await purges('slow', 'pending', 30, at)), ...(await purges('slow', 'running', 30, at))];
    const { deps } = testActivityDeps({ pool: db.pool });
    await deleteOldJobs(deps)({ at, retentionDays: 7, batchSize: 1000 });
    expect({ old: await left(old), recent: await left(recent), open: await left(open) }).toEqual({ old: 0, recent: 1, open: 2 });
  });
});
