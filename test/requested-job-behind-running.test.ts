// A sync requested while a job of its mode runs that does not sync every resource type it asks for
// gets a job that will: one queued behind the running job, whose claim waits (durably, on a
// workflow timer) until the running one has ended, so two jobs of a connection and mode never run
// at once. A later request meanwhile joins that queued job; a request the running job covers is
// answered with it; the reconcile tick leaves the waiting job to its workflow. The real API and
// worker on the time-skipping server, which skips the wait.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { temporal } from '@temporalio/proto';
import { startTestApi, type TestApi } from './helpers/api';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';
import { recordHistory } from './helpers/histories';

/**
 * Three types; the first job runs a few seconds (8 pages of 300 ms for its one type, `issues`), the
 * other two types are read in 2 pages each: the queued job's run only has to show them read whole.
 */
const CONFIG = { resource_types: ['issues', 'users', 'labels'], records_per_resource: { issues: 8, users: 2, labels: 2 }, page_size: 1, latency_ms: 300 };
const DAY = { interval_seconds: 86_400 };

describe('a sync asking for types the running job of its mode does not sync', () => {
  const stack = useWorkerStack('time-skipping', 'requested-job-behind-running');
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi(stack, 'requested-job-behind-running');
  });
  afterAll(async () => {
    await api?.server.close();
  });

  const q = <T = any>(sql: string, params: unknown[] = []) => stack.db.pool.query(sql, params).then((r) => r.rows as T[]);
  const recordsOf = async (connectionId: string) =>
    Object.fromEntries(
      (await q<{ resource_type: string; n: number }>(
        'select resource_type, count(*)::int as n from records where connection_id = $1 group by resource_type order by resource_type',
        [connectionId],
      )).map((r) => [r.resource_type, r.n]),
    );

  /**
   * A demo connection active in its row but whose workflow stays paused, so no scheduled job runs
   * beside the requested ones. Its app key is the attempt's own: the timing-sensitive group retries
   * a failed test once, and a retry must not meet the connections of the attempt before it.
   */
  async function connection(name: string): Promise<{ connectionId: string; appKey: string }> {
    const appKey = `${name}-${randomUUID().slice(0, 8)}`;
    const res = await api.call('POST', '/connections', { tenant_id: 'acme', app_key: appKey, provider: 'demo', config: CONFIG, schedule: DAY, status: 'paused' });
    expect(res.status).toBe(201);
    await q(`update connections set status = 'active' where id = $1`, [res.body.id]);
    return { connectionId: res.body.id as string, appKey };
  }

  /**
   * Waits until every requested job of the connection has ended, awaiting the result of each job workflow
   * still active (which lets the time-skipping server skip a claim's wait); one that closed just
   * before is read from its row again.
   */
  async function untilEnded(connectionId: string): Promise<void> {
    for (;;) {
      const active = await q<{ id: string }>(`select id from sync_jobs where connection_id = $1 and trigger = 'api' and status in ('queued', 'running', 'retrying')`, [connectionId]);
      if (active.length === 0) return;
      for (const { id } of active) await stack.env.client.workflow.getHandle(`sync-job:${id}`).result().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async function runningJob(connectionId: string, types: string[]): Promise<string> {
    const res = await api.call('POST', `/connections/${connectionId}/sync`, { mode: 'full', resource_types: types });
    expect(res.status).toBe(202);
    const id = res.body.job_id as string;
    await eventually(async () => ((await q(`select 1 from sync_jobs where id = $1 and status = 'running'`, [id])).length ? true : undefined));
    return id;
  }

  it('is answered with a job queued behind the running one, which syncs the types asked for once that one has ended', async () => {
    const { connectionId } = await connection('behind-running');
    const first = await runningJob(connectionId, ['issues']);

    const answer = await api.call('POST', `/connections/${connectionId}/sync`, { mode: 'full', resource_types: ['users'] });
    expect(answer.status).toBe(202);
    // A later request for a type neither job syncs joins the queued job; one the running job covers is answered with it.
    const joined = await api.call('POST', `/connections/${connectionId}/sync`, { mode: 'full', resource_types: ['labels'] });
    const covered = await api.call('POST', `/connections/${connectionId}/sync`, { mode: 'full', resource_types: ['issues'] });
    expect(covered.body).toMatchObject({ job_id: first, resource_types: ['issues'] });

    await untilEnded(connectionId);
    expect({
      answered: { other_job: answer.body.job_id !== first, resource_types: answer.body.resource_types },
      joined: { same_job: joined.body.job_id === answer.body.job_id, resource_types: [...joined.body.resource_types].sort() },
      records: await recordsOf(connectionId),
    }).toEqual({
      answered: { other_job: true, resource_types: ['users'] },
      joined: { same_job: true, resource_types: ['labels', 'users'] },
      records: { issues: 8, labels: 2, users: 2 },
    });
    // The queued job waited on durable timers, in steps that start short (5 s, up to a fifth
    // more) and double up to a minute: it claims again within seconds of a short job's end.
    await recordHistory(stack.env.client, 'sync-job-waits-behind-running', `sync-job:${answer.body.job_id}`);
    const history = await stack.env.client.workflow.getHandle(`sync-job:${answer.body.job_id}`).fetchHistory();
    const waits = (history.events ?? [])
      .filter((e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_TIMER_STARTED)
      .map((e) => Number(e.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? 0));
    expect(waits.length).toBeGreaterThan(0);
    const tooLong = waits
      .map((seconds, i) => ({ wait: i + 1, seconds, at_most: Math.ceil(Math.min(60, 5 * 2 ** i) * 1.2) }))
      .filter((w) => w.seconds > w.at_most);
    expect(tooLong).toEqual([]);
    const [a, b] = await Promise.all([first, answer.body.job_id].map(async (id) => (await q(`select status, started_at, finished_at from sync_jobs where id = $1`, [id]))[0]));
    expect([a.status, b.status]).toEqual(['completed', 'completed']);
    expect(b.started_at.getTime()).toBeGreaterThanOrEqual(a.finished_at.getTime());
  });

  it('is answered with a queued job syncing every type when the request names none', async () => {
    const { connectionId, appKey } = await connection('behind-running-all');
    const first = await runningJob(connectionId, ['issues']);
    const answer = await api.call('POST', '/sync', { tenant_id: 'acme', app_key: appKey, mode: 'full' });
    expect(answer.status).toBe(202);
    expect({ other_job: answer.body.job_id !== first, resource_types: answer.body.resource_types }).toEqual({ other_job: true, resource_types: ['issues', 'users', 'labels'] });
    // The reconcile tick leaves the queued job to its workflow (waiting to claim), even once it is
    // older than the minute after which an active job without a live workflow is failed.
    await q(`update sync_jobs set created_at = created_at - interval '5 minutes' where id = $1`, [answer.body.job_id]);
    const tick = await stack.tick();
    expect({ abandoned: tick.abandoned, status: (await q(`select status from sync_jobs where id = $1`, [answer.body.job_id]))[0].status }).toEqual({ abandoned: 0, status: 'queued' });
    await untilEnded(connectionId);
    expect((await q(`select status from sync_jobs where id = $1`, [answer.body.job_id]))[0].status).toBe('completed');
    expect(await recordsOf(connectionId)).toEqual({ issues: 8, labels: 2, users: 2 });
  });
});
