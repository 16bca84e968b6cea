// What a job's `sync.*` event says, written by the transaction that ends the job, against a real
// Postgres: the delivery activity is not involved (Temporal is absent; the delivery is left to the
// reconcile tick).
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { cancelJob } from '../activities/cancel-job';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';

describe("a job's webhook event", () => {
  const db = useTestDatabase();
  const q = <T = any>(sql: string, params: unknown[] = []) => db.pool.query(sql, params).then((r) => r.rows as T[]);

  it('counts summed over tasks past the range of a 32-bit integer: the job still ends, and the event says the sums', async () => {
    const tenant = `t-${Math.random().toString(36).slice(2)}`;
    const [connection] = await q<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key, status) values ($1, 'demo', 'x', 'active') returning id`, [tenant]);
    await q(`insert into webhooks (tenant_id, url, event_types, secret) values ($1, 'https://example.com/hook', '{sync.cancelled}', 'whsec_x')`, [tenant]);
    const [job] = await q<{ id: string }>(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, started_at) values ($1, $2, 'full', 'api', 'running', now()) returning id`,
      [connection!.id, tenant],
    );
    // Two resource types of two billion records each: each task's counts fit its column, their sums do not fit 32 bits.
    for (const type of ['items', 'orders']) {
      await q(
        `insert into sync_tasks (job_id, resource_type, status, added_count, updated_count, unchanged_count, deleted_count)
         values ($1, $2, 'completed', 2000000000, 1500000000, 2147483647, 1200000000)`,
        [job!.id, type],
      );
    }
    const { deps } = testActivityDeps({ pool: db.pool });
    const ended = await new MockActivityEnvironment().run(cancelJob(deps), { jobId: job!.id, at: Date.now(), reason: 'cancelled over the API' }).then(
      (value) => value,
      (err: Error) => err.message,
    );
    expect(ended).toBe(true);
    const events = await q<{ payload: { counts: unknown } }>(`select payload from webhook_events where connection_id = $1 and event_type = 'sync.cancelled'`, [connection!.id]);
    expect(events.map((e) => e.payload.counts)).toEqual([{ added: 4_000_000_000, updated: 3_000_000_000, unchanged: 4_294_967_294, deleted: 2_400_000_000 }]);
  });
});
