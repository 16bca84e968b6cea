import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { getConnection } from '../../commands/connections';
import { invalid } from '../../commands/errors';
import { cancelJob, getJob, listJobs, requestJob } from '../../commands/jobs';
import type { ApiDeps } from '../deps';
import type { ApiEnv } from '../env';
import { tenantFilter, writeAnswer } from '../middleware/auth';
import { pageAnswer, pageRequest } from '../pagination';
import { jobCursor } from '../../policy/cursors';
import { presentJob } from '../present';
import { conflict, bodyErrorResponses, errorResponses, IdParams, jsonAnswer, jsonBody, notFound } from '../schemas/common';
import { CancelAnswerSchema, JobPageSchema, JobQuery, JobSchema, ListJobsQuery, ScheduledJobSchema, ScheduleJobBody } from '../schemas/jobs';

const tags = ['jobs'];

const IdempotencyHeaders = z.object({
  'idempotency-key': z
    .string()
    .min(1, 'must not be empty')
    .max(255, 'must be at most 255 characters')
    .optional()
    .openapi({ description: 'A repeat with the same key returns the same job and inserts nothing' }),
});

const schedule = createRoute({
  method: 'post', path: '/jobs/schedule', tags, summary: 'Schedule a backfill job for a connection and window', operationId: 'scheduleBackfill',
  description: 'Requests a backfill of the connection (`pairId`): the records changed in the half-open window [start, end). One backfill may be active per connection; an `Idempotency-Key` makes a retried request return the same job.',
  request: { body: jsonBody(ScheduleJobBody), headers: IdempotencyHeaders },
  responses: {
    202: jsonAnswer(ScheduledJobSchema, 'Accepted (or the job of an earlier request with the same Idempotency-Key); for a key lacking the `read` scope without the progress, retry state, counts and error (`started_at`, `finished_at`, `retry_count`, `max_retries`, `retry_after`, `total_tasks`, `completed_tasks`, `failed_tasks`, `processed_entities`, `counts`, `progress_percentage`, `error`)'),
    ...bodyErrorResponses,
    404: notFound,
    409: conflict('Being deleted (`purge_in_progress`, with `purge_id`), paused by the circuit breaker (with the alert), paused or disabled, waiting for new credentials after the provider refused its OAuth grant (`connection_needs_reauth`), a backfill already active, the key reused for another request, or the stored config is invalid', 'purge_in_progress', 'circuit_breaker_open', 'connection_paused', 'connection_disabled', 'connection_needs_reauth', 'backfill_in_progress', 'idempotency_key_reused', 'invalid_connection_config'),
  },
});
const get = createRoute({
  method: 'get', path: '/jobs/{id}', tags, summary: 'Status and progress of a job', operationId: 'getJob',
  description: 'The job with its status, progress, record counts, retry state and error summary; with `include_tasks=true` also each task (one per resource type).',
  request: { params: IdParams, query: JobQuery },
  responses: { 200: jsonAnswer(JobSchema, 'The job'), ...errorResponses, 404: notFound },
});
const list = createRoute({
  method: 'get', path: '/jobs', tags, summary: 'List jobs, newest first (cursor pagination)', operationId: 'listJobs',
  description: "Jobs newest first, filtered by connection, tenant, status, type or trigger; a tenant key lists its own tenant's only.",
  request: { query: ListJobsQuery },
  responses: { 200: jsonAnswer(JobPageSchema, 'One page'), ...errorResponses },
});
const cancel = createRoute({
  method: 'post', path: '/jobs/{id}/cancel', tags, summary: 'Cancel a queued, running or waiting job', operationId: 'cancelJob',
  description: 'Asks the job to stop. It ends `cancelled` (at once for a queued job whose connection workflow is no longer running, and for a job whose workflow has not started yet or is no longer running) and sends `sync.cancelled` to subscribed webhooks.',
  request: { params: IdParams },
  responses: {
    202: jsonAnswer(CancelAnswerSchema, 'Cancellation requested, with the status the job has after the request (read after it acted: `cancelled` when it ended the job); the job shows `cancelled` once it stopped (at once for a queued job whose connection workflow was no longer running, and for a job whose workflow had not started or was no longer running)'),
    ...errorResponses,
    404: notFound,
    409: conflict('The job has already finished (`job_finished`)', 'job_finished'),
  },
});

/** Routes of `/jobs`: parse, call a command, present. */
export function jobRoutes(deps: ApiDeps) {
  const app = new OpenAPIHono<ApiEnv>();

  app.openapi(schedule, async (c) => {
    const body = c.req.valid('json');
    const key = c.req.valid('header')['idempotency-key'];
    const connection = await getConnection(deps, body.pairId, 'no connection with that pairId');
    if (body.connectorId !== undefined && body.connectorId !== connection.id) {
      throw invalid("connectorId: must be the connection's own id (each connection is one connector instance)");
    }
    const resourceTypes = Array.isArray(body.payload.resource_types) ? body.payload.resource_types.map(String) : undefined;
    const answer = await requestJob(deps, {
      connection,
      mode: 'incremental',
      resourceTypes,
      backfill: { window: { start: new Date(body.window.start), end: new Date(body.window.end) }, priority: body.priority, payload: body.payload },
      idempotencyKey: key,
    });
    c.get('log').info({ connection_id: connection.id, job_id: answer.job.id, created: answer.created }, 'backfill scheduled');
    // A key without the read scope may schedule a backfill but not read a job: its answer says which
    // job and its status, not how it ran (a repeated Idempotency-Key answers a job that may have).
    return c.json(writeAnswer(c, presentJob(answer.job), [
      'started_at', 'finished_at', 'retry_count', 'max_retries', 'retry_after', 'total_tasks', 'completed_tasks', 'failed_tasks',
      'processed_entities', 'counts', 'progress_percentage', 'error',
    ]), 202);
  });

  app.openapi(get, async (c) => {
    const { id } = c.req.valid('param');
    const withTasks = c.req.valid('query').include_tasks === 'true';
    const { job, tasks } = await getJob(deps, id, withTasks);
    return c.json(presentJob(job, tasks, withTasks), 200);
  });

  app.openapi(list, async (c) => {
    const q = c.req.valid('query');
    const { after, limit } = pageRequest(jobCursor, q);
    const page = await listJobs(deps, {
      connectionId: q.connection_id, tenantId: tenantFilter(c, q.tenant_id), status: q.status, jobType: q.job_type, trigger: q.trigger,
      before: after,
      limit,
    });
    return c.json(pageAnswer(page, jobCursor, (job) => ({ createdAt: job.created_at_exact, id: job.id }), (job) => presentJob(job)), 200);
  });

  app.openapi(cancel, async (c) => {
    const job = await cancelJob(deps, c.req.valid('param').id);
    c.get('log').info({ job_id: job.id, connection_id: job.connection_id }, 'job cancel requested');
    return c.json({ job_id: job.id, status: job.status, cancel_requested: true }, 202);
  });

  return app;
}
