import { randomUUID } from 'node:crypto';
import { getConnector } from '../connectors/registry';
import type { ConnectionRow } from '../db/queries/connection-row';
import { findBreaker } from '../db/queries/find-breaker';
import { insertRequestedJob } from '../db/queries/insert-requested-job';
import type { JobRow } from '../db/queries/job-row';
import { ensureJobWorkflow } from '../lib/connection-workflows';
import { syncNowSignal } from '../workflows/connection';
import { connectionWorkflowId } from '../workflows/ids';
import type { ApiDeps } from './deps';
import { ApiError } from './errors';

/** A sync or backfill asked for over the API. */
export interface JobRequest {
  connection: ConnectionRow;
  mode: 'incremental' | 'full';
  resourceTypes?: string[];
  backfill?: { window: { start: Date; end: Date }; priority: number; payload: Record<string, unknown> };
  idempotencyKey?: string;
}

/** The job that answers a request, and the resource types it syncs. */
export interface RequestedJobAnswer {
  job: JobRow;
  resourceTypes: string[];
  /** False when an existing job answered (same Idempotency-Key, or one already active). */
  created: boolean;
}

/**
 * Turns a sync or backfill request into a job that will run (SPEC §7):
 * - refuses a paused or disabled connection, and one paused by its circuit breaker (409 with the
 *   alert), before anything is written;
 * - inserts the job (`api` or `backfill`) guarded by the unique indexes, so concurrent identical
 *   requests and repeats with the same Idempotency-Key give one row;
 * - a new job runs in its own `sync-job:<id>` workflow. A sync that finds the connection's own
 *   queued job of that type answers with it and wakes the scheduler with `syncNow`, so it runs now.
 */
export async function requestJob(deps: ApiDeps, request: JobRequest): Promise<RequestedJobAnswer> {
  const { connection } = request;
  if (connection.status !== 'active') {
    throw new ApiError(409, `connection_${connection.status}`, `the connection is ${connection.status}; resume it first`);
  }
  const breaker = await findBreaker(deps.pool, connection.id);
  if (breaker.paused_until && breaker.paused_until.getTime() > Date.now()) {
    throw new ApiError(409, 'circuit_breaker_open', 'the connection is paused by its circuit breaker after repeated failures', {
      paused_until: breaker.paused_until.toISOString(),
      consecutive_failures: breaker.consecutive_failures,
      alert: breaker.alert && { ...breaker.alert, created_at: breaker.alert.created_at.toISOString() },
    });
  }
  const resourceTypes = resolveResourceTypes(connection, request.resourceTypes);
  const payload = {
    ...request.backfill?.payload,
    ...(request.resourceTypes ? { resource_types: resourceTypes } : {}),
  };
  const result = await insertRequestedJob(deps.pool, {
    id: randomUUID(),
    connectionId: connection.id,
    tenantId: connection.tenant_id,
    jobType: request.mode,
    trigger: request.backfill ? 'backfill' : 'api',
    window: request.backfill?.window,
    priority: request.backfill?.priority,
    payload,
    idempotencyKey: request.idempotencyKey,
  });
  const { job } = result;
  if (result.outcome === 'inserted') deps.metrics.jobs.inc({ status: 'queued', connector_id: connection.provider_slug });
  if (result.outcome === 'same_key' && !sameRequest(job, request)) {
    throw new ApiError(409, 'idempotency_key_reused', 'this Idempotency-Key was already used for a different request', { job_id: job.id });
  }
  if (result.outcome === 'active' && request.backfill) {
    throw new ApiError(409, 'backfill_in_progress', 'a backfill of this connection is still active; retry when it has finished', { job_id: job.id });
  }

  const ref = { id: connection.id, tenantId: connection.tenant_id, providerSlug: connection.provider_slug };
  const ownedByScheduler = job.trigger === 'schedule' || job.trigger === 'manual';
  if (job.status === 'queued' && ownedByScheduler) {
    await deps.temporal.workflow.getHandle(connectionWorkflowId(connection.id)).signal(syncNowSignal, { mode: request.mode });
  } else if (job.status === 'queued') {
    await ensureJobWorkflow(deps.temporal, deps.taskQueue, { id: job.id, connection: ref });
  }
  const jobTypes = Array.isArray(job.payload.resource_types) ? job.payload.resource_types.map(String) : null;
  return { job, resourceTypes: jobTypes ?? (result.outcome === 'inserted' ? resourceTypes : resolveResourceTypes(connection)), created: result.outcome === 'inserted' };
}

/** The requested resource types, checked against the connection's; all of them when none given. */
export function resolveResourceTypes(connection: ConnectionRow, requested?: string[]): string[] {
  let known: string[];
  try {
    known = getConnector(connection.provider_slug).resourceTypes(connection.config);
  } catch (err) {
    throw new ApiError(409, 'invalid_connection_config', `the connection's config is invalid: ${(err as Error).message}`);
  }
  if (!requested) return known;
  const unknown = requested.filter((type) => !known.includes(type));
  if (unknown.length > 0) {
    throw new ApiError(400, 'invalid_request', `resource_types: unknown for this connection: ${unknown.join(', ')} (known: ${known.join(', ')})`);
  }
  return [...new Set(requested)];
}

function sameRequest(job: JobRow, request: JobRequest): boolean {
  const window = request.backfill?.window;
  return (
    job.connection_id === request.connection.id &&
    job.job_type === request.mode &&
    (job.window_start?.getTime() ?? null) === (window?.start.getTime() ?? null) &&
    (job.window_end?.getTime() ?? null) === (window?.end.getTime() ?? null)
  );
}
