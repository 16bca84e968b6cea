// The reconcile tick's daily retention cleanup on Temporal's time-skipping server with real
// Postgres: a cleanup that failed (every attempt of its activity) is tried again at the next tick,
// not a day later.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from './helpers/database';
import { recordHistory } from './helpers/histories';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'reconcile-retention';
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

describe('reconcile tick retention (time-skipping, real Postgres)', () => {
  const stack = useWorkerStack('time-skipping', TASK_QUEUE);
  let env: TestWorkflowEnvironment;
  let db: TestDatabase;
  beforeAll(() => {
    ({ env, db } = stack);
  });

  /** How many times each activity of the reconcile workflow completed and failed for good. */
  async function activityOutcomes(workflowId: string) {
    const events = (await env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const types = new Map(events.filter((e) => e.activityTaskScheduledEventAttributes).map((e) => [String(e.eventId), e.activityTaskScheduledEventAttributes!.activityType!.name!]));
    const count = (name: string, outcome: 'activityTaskCompletedEventAttributes' | 'activityTaskFailedEventAttributes') =>
      events.filter((e) => e[outcome] && types.get(String(e[outcome]!.scheduledEventId)) === name).length;
    return {
      ticks: count('reconcileConnections', 'activityTaskCompletedEventAttributes'),
      retentionFailed: count('deleteOldJobs', 'activityTaskFailedEventAttributes'),
    };
  }

  it('a retention cleanup that failed is tried again at the next tick, not a day later', async () => {
    const now = await env.currentTimeMs();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('acme', 'demo', 'old-jobs', 'disabled') returning id`,
    );
    const { rows: jobs } = await db.pool.query<{ id: string }>(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status, created_at, finished_at)
       values ($1, 'acme', 'incremental', 'api', 'completed', $2, $2) returning id`,
      [rows[0]!.id, new Date(now - 30 * DAY)],
    );
    // A database that refuses the cleanup's deletes for a while (an outage, a lock timeout).
    await db.pool.query(`create function refuse_delete() returns trigger language plpgsql as $$ begin raise exception 'simulated outage'; end $$`);
    await db.pool.query(`create trigger refuse_delete before delete on sync_jobs for each statement execute function refuse_delete()`);

    const workflowId = 'reconcile-retention';
    await env.client.workflow.start('reconcileWorkflow', { workflowId, taskQueue: TASK_QUEUE, args: [{ tickSeconds: 60, retentionDays: 7 }] });
    // The cleanup's three attempts, 1 s and 2 s apart, in skipped time (well before the next tick).
    await env.sleep(10_000);
    await eventually(async () => ((await activityOutcomes(workflowId)).retentionFailed >= 1 ? true : undefined));
    await db.pool.query('drop trigger refuse_delete on sync_jobs');

    // Three more ticks with the database healthy again.
    const before = (await activityOutcomes(workflowId)).ticks;
    await env.sleep(3 * MINUTE + 1000);
    await eventually(async () => ((await activityOutcomes(workflowId)).ticks >= before + 3 ? true : undefined));
    const left = await db.pool.query('select id from sync_jobs where id = $1', [jobs[0]!.id]);
    await recordHistory(env.client, 'reconcile-retention-retried', workflowId);
    await env.client.workflow.getHandle(workflowId).terminate('test done');
    expect(left.rows).toEqual([]);
  });
});
