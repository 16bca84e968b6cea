import { z } from '@hono/zod-openapi';
import { JOB_STATUSES, JOB_TRIGGERS, SYNC_MODES, TASK_STATUSES } from '../../policy/vocabulary';
import { boundedJsonObject, CursorQuery, LimitQuery, MAX_PAYLOAD_BYTES, MillisecondTime, NullableTime, ResourceTypesSchema, sizeRule, TenantIdQuery, uuid } from './common';

/** What a job or task did to records: rows inserted (or back from a tombstone), changed, tombstoned, and seen unchanged. */
export const RecordCountsSchema = z
  .object({ added: z.number(), updated: z.number(), deleted: z.number(), unchanged: z.number() })
  .openapi('RecordCounts');

/** One task of a job (`include_tasks=true`). */
export const TaskSchema = z
  .object({
    resource_type: z.string(),
    status: z.enum(TASK_STATUSES),
    entity_count: z.number(),
    deleted_count: z.number(),
    counts: RecordCountsSchema,
    error_message: z.string().nullable(),
    started_at: NullableTime,
    completed_at: NullableTime,
  })
  .openapi('Task');

/** A sync job with its progress. */
export const JobSchema = z
  .object({
    id: z.string(),
    connection_id: z.string(),
    tenant_id: z.string(),
    provider: z.string(),
    job_type: z.enum(SYNC_MODES),
    trigger: z.enum(JOB_TRIGGERS),
    status: z.enum(JOB_STATUSES),
    priority: z.number(),
    scheduled_at: z.string(),
    started_at: NullableTime,
    finished_at: NullableTime,
    window: z.object({ start: z.string(), end: z.string() }).nullable(),
    payload: z.record(z.string(), z.unknown()),
    retry_count: z.number(),
    max_retries: z.number(),
    retry_after: NullableTime.openapi({ description: 'When a waiting job (status retrying) runs again' }),
    total_tasks: z.number(),
    completed_tasks: z.number(),
    failed_tasks: z.number(),
    processed_entities: z.number(),
    counts: RecordCountsSchema.openapi({ description: 'Summed over the tasks so far' }),
    progress_percentage: z.number().openapi({ description: 'Finished tasks / total tasks × 100; 100 once completed' }),
    error: z
      .object({ message: z.string(), failed_tasks: z.array(z.object({ resource_type: z.string(), message: z.string() })) })
      .nullable()
      .openapi({ description: 'Summary of what went wrong, without internals' }),
    workflow_id: z.string().nullable().openapi({ description: 'The Temporal workflow that runs the job: `sync-job:<job id>` for a requested job, `connection:<connection id>` for a scheduled one (it runs inside the connection run of its cycle)' }),
    created_at: z.string(),
    tasks: z.array(TaskSchema).optional(),
  })
  .openapi('Job');

/**
 * `POST /jobs/schedule` answer: the job; for a key lacking the `read` scope only what says which job
 * it is and its status (a repeated Idempotency-Key answers a job that may have run: its progress,
 * counts and error are for a key that reads).
 */
export const ScheduledJobSchema = JobSchema.partial({
  started_at: true, finished_at: true, retry_count: true, max_retries: true, retry_after: true, total_tasks: true, completed_tasks: true,
  failed_tasks: true, processed_entities: true, counts: true, progress_percentage: true, error: true,
}).openapi('ScheduledJob');

/** `GET /jobs/:id` query. */
export const JobQuery = z.object({
  include_tasks: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .optional()
    .openapi({ param: { name: 'include_tasks', in: 'query' } }),
});

/** `GET /jobs` query. */
export const ListJobsQuery = z.object({
  connection_id: uuid().optional().openapi({ param: { name: 'connection_id', in: 'query' } }),
  tenant_id: TenantIdQuery(),
  status: z.enum(JOB_STATUSES).optional().openapi({ param: { name: 'status', in: 'query' } }),
  job_type: z.enum(SYNC_MODES).optional().openapi({ param: { name: 'job_type', in: 'query' } }),
  trigger: z.enum(JOB_TRIGGERS).optional().openapi({ param: { name: 'trigger', in: 'query' } }),
  limit: LimitQuery,
  cursor: CursorQuery,
});

/** A page of jobs, newest first. */
export const JobPageSchema = z.object({ items: z.array(JobSchema), next_cursor: z.string().nullable() }).openapi('JobPage');

/** `POST /jobs/schedule` body, strict: unknown keys are rejected. */
export const ScheduleJobBody = z
  .strictObject({
    pairId: uuid('must be a UUID (the connection id)'),
    window: z
      .strictObject({
        start: MillisecondTime,
        end: MillisecondTime,
      })
      .refine((w) => Date.parse(w.start) < Date.parse(w.end), { error: 'start must be before end', path: ['end'] })
      .openapi({ description: 'Half-open [start, end): the backfill stores the records changed at or after start and before end. Each time to the millisecond at most (a non-zero digit after the third of its fractional seconds answers 400)' }),
    connectorId: uuid().optional().openapi({ description: "If given, must be the connection's id (a connection is its own connector instance)" }),
    priority: z.number({ error: 'must be an integer' }).int('must be an integer').min(-1000).max(1000).default(0),
    payload: boundedJsonObject(MAX_PAYLOAD_BYTES)
      // The job reads any other value as "every resource type": a name given as a string, an
      // empty list, or a list of non-names would backfill everything instead of what was meant.
      .superRefine((payload, ctx) => {
        if (!Object.hasOwn(payload, 'resource_types')) return;
        const parsed = ResourceTypesSchema.safeParse(payload.resource_types);
        for (const issue of parsed.error?.issues ?? []) ctx.addIssue({ code: 'custom', message: issue.message, path: ['resource_types', ...issue.path] });
      })
      .default({})
      .openapi({ description: `Stored on the job (${sizeRule(MAX_PAYLOAD_BYTES)}); \`resource_types\` limits the backfill to those of the connection's resource types` }),
  })
  .openapi('ScheduleJob', {
    example: {
      pairId: '00000000-0000-0000-0000-000000000000',
      window: { start: '2025-09-22T09:00:00Z', end: '2025-09-22T10:00:00Z' },
      priority: 0,
      payload: { reason: 'manual_test' },
    },
  });

/** What `POST /jobs/:id/cancel` did. */
export const CancelAnswerSchema = z
  .object({ job_id: z.string(), status: z.string(), cancel_requested: z.boolean() })
  .openapi('CancelAnswer');
