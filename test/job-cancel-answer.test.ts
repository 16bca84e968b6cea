// The answer of POST /jobs/:id/cancel names the job's status as the request left it stored: a job
// the request ended is answered `cancelled`, one whose workflow was asked to stop (and has not yet)
// with the status it still has, one its workflow claimed while the request looked with `running`;
// never the status read before the request acted. Through the real API on real Postgres; Temporal
// is a stand-in that says which workflows run.
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { beforeEach, describe, expect, it } from 'vitest';
import { syncJobWorkflowId } from '../temporal/ids';
import { useApiWithoutTemporal } from './helpers/api';
import { fakeTemporal } from './helpers/fake-temporal';

const temporal = fakeTemporal();
/** Called, once, when the API first tries to cancel a job's workflow (set by a test, before the call). */
let onFirstCancel: ((workflowId: string) => Promise<void>) | null = null;
/** Called, once, when the API first signals a workflow (set by a test, before the call). */
let onFirstSignal: (() => Promise<void>) | null = null;
const client = {
  workflow: {
    ...temporal.client.workflow,
    getHandle(workflowId: string, runId?: string) {
      const handle = temporal.client.workflow.getHandle(workflowId, runId);
      return {
        ...handle,
        async cancel() {
          const first = onFirstCancel;
          onFirstCancel = null;
          if (first) await first(workflowId);
          return handle.cancel();
        },
        async signal(...args: Parameters<typeof handle.signal>) {
          const first = onFirstSignal;
          onFirstSignal = null;
          if (first) await first();
          return handle.signal(...args);
        },
      };
    },
  },
} as unknown as Client;
const api = useApiWithoutTemporal('job-cancel-answer', { temporal: client });

beforeEach(() => {
  temporal.running.clear();
  onFirstCancel = null;
  onFirstSignal = null;
});

async function connection(): Promise<string> {
  const { rows } = await api.db.pool.query<{ id: string }>(
    `insert into connections (tenant_id, provider_slug, app_key, config) values ('acme', 'demo', $1, $2) returning id`,
    [`app_${randomUUID().slice(0, 8)}`, { resource_types: ['items'] }],
  );
  return rows[0]!.id;
}

/** A queued job of connection `connectionId`: requested over the API (`api`, its own workflow) or its scheduler's (`schedule`, of run `run-1`). */
async function queuedJob(connectionId: string, trigger: 'api' | 'schedule'): Promise<string> {
  const id = randomUUID();
  await api.db.pool.query(
    `insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, workflow_id, scheduler_run_id)
     values ($1, $2, 'acme', 'incremental', $3, 'queued', $4, $5)`,
    [id, connectionId, trigger, trigger === 'api' ? syncJobWorkflowId(id) : null, trigger === 'api' ? null : 'run-1'],
  );
  return id;
}

const statusOf = async (id: string) => (await api.db.pool.query<{ status: string }>('select status from sync_jobs where id = $1', [id])).rows[0]!.status;

describe('POST /jobs/:id/cancel answers the status the request left', () => {
  it('a queued requested job its running workflow had not claimed: ended by the request, answered cancelled', async () => {
    const jobId = await queuedJob(await connection(), 'api');
    temporal.running.add(syncJobWorkflowId(jobId));
    const answer = await api.call('POST', `/jobs/${jobId}/cancel`);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(await statusOf(jobId)).toBe('cancelled');
    expect(answer.body).toEqual({ job_id: jobId, status: 'cancelled', cancel_requested: true });
  });

  it('a queued requested job its workflow claimed while the request looked: cancelled through the workflow, answered running', async () => {
    const jobId = await queuedJob(await connection(), 'api');
    // The workflow is not running at the first look; it starts and claims the job just then.
    onFirstCancel = async (workflowId) => {
      await api.db.pool.query(`update sync_jobs set status = 'running', started_at = now() where id = $1`, [jobId]);
      temporal.running.add(workflowId);
      throw new WorkflowNotFoundError('not found', workflowId, undefined);
    };
    const answer = await api.call('POST', `/jobs/${jobId}/cancel`);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(await statusOf(jobId)).toBe('running');
    expect(answer.body).toEqual({ job_id: jobId, status: 'running', cancel_requested: true });
  });

  it('a queued scheduler job whose connection workflow runs: left to that workflow, answered with the status it still has', async () => {
    const conn = await connection();
    const jobId = await queuedJob(conn, 'schedule');
    temporal.running.add(`connection:${conn}`);
    const answer = await api.call('POST', `/jobs/${jobId}/cancel`);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(answer.body).toEqual({ job_id: jobId, status: await statusOf(jobId), cancel_requested: true });
  });

  it('a queued scheduler job whose connection workflow is gone: ended by the request, answered cancelled', async () => {
    const jobId = await queuedJob(await connection(), 'schedule');
    const answer = await api.call('POST', `/jobs/${jobId}/cancel`);
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    expect(await statusOf(jobId)).toBe('cancelled');
    expect(answer.body).toEqual({ job_id: jobId, status: 'cancelled', cancel_requested: true });
  });

  it('a scheduler job whose connection workflow is gone, ended otherwise while the request looked: refused 409 job_finished, as a job found finished is', async () => {
    const jobId = await queuedJob(await connection(), 'schedule');
    // The reconcile tick fails it as abandoned just as the request finds its connection workflow gone.
    onFirstSignal = async () => {
      await api.db.pool.query(`update sync_jobs set status = 'failed', finished_at = now(), abandoned_at = now() where id = $1`, [jobId]);
    };
    const answer = await api.call('POST', `/jobs/${jobId}/cancel`);
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.error).toMatchObject({ code: 'job_finished', message: 'the job has already finished (failed)' });
    expect(await statusOf(jobId)).toBe('failed');
  });
});
