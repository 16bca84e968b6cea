import type { OAuthAppRow } from '../commands/oauth';
// Rows → API answers. Times become ISO strings; credentials never leave the database; error texts
// are cut to their first line so nothing like a stack or a statement can ride along.
import type { ConnectionDetail, ConnectionRow } from '../commands/connections';
import { scheduleFields, type ScheduleFields } from '../policy/schedule';
import type { ActiveJobStatus } from '../policy/vocabulary';
import { firstLine as safeMessage } from '../commands/errors';
import type { JobRow, TaskRow } from '../commands/jobs';
import type { RecordChange } from '../commands/records';
import type { DeliveryRow, WebhookRow } from '../commands/webhooks';
import type { PurgeRow } from '../commands/purges';
import type { ApiKeyRow, AuditRow } from '../commands/tenancy';
import type { TenantLimitsView } from '../commands/tenant-limits';
import { TENANT_LIMIT_NAMES, type TenantLimitKind } from '../policy/tenant-limits';
import { connectionPurgeWorkflowId } from '../temporal/purge';
import { connectionWorkflowId, syncJobWorkflowId } from '../temporal/ids';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A connection as the API shows it. */
export function presentConnection(row: ConnectionRow) {
  const schedule: ScheduleFields & { next_run_at?: string; last_jitter_seconds?: number } = {
    ...(row.schedule && scheduleFields(row.schedule)),
    ...(row.next_run_at !== null && { next_run_at: row.next_run_at }),
    ...(row.last_jitter_seconds !== null && { last_jitter_seconds: row.last_jitter_seconds }),
  };
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    provider: row.provider_slug,
    app_key: row.app_key,
    status: row.status,
    status_before_reauth: row.status_before_reauth,
    config: row.config,
    has_credentials: row.has_credentials,
    credential_kind: row.credential_kind,
    oauth_app_id: row.oauth_app_id,
    schedule,
    workflow_id: connectionWorkflowId(row.id),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** A connection with its workflow's live state and its circuit breaker. */
export function presentConnectionDetail({ connection, live, breaker }: ConnectionDetail) {
  return {
    ...presentConnection(connection),
    live: live && {
      phase: live.phase, next_run_at: live.next_run_at, scheduled_at: live.scheduled_at,
      last_jitter_seconds: live.last_jitter_seconds, current_job_id: live.current_job_id,
      last_outcome: live.last_outcome, pending: live.pending, cycles: live.cycles,
    },
    breaker: {
      open: breaker.open,
      consecutive_failures: breaker.consecutive_failures,
      paused_until: iso(breaker.paused_until),
      last_failure_at: iso(breaker.last_failure_at),
      alert: breaker.alert && { ...breaker.alert, created_at: breaker.alert.created_at.toISOString() },
    },
  };
}

/** Finished tasks as a share of all tasks, one decimal; 100 for a completed job. */
export function progressPercentage(job: Pick<JobRow, 'status' | 'total_tasks' | 'completed_tasks' | 'failed_tasks'>): number {
  if (job.status === 'completed') return 100;
  if (job.total_tasks === 0) return 0;
  const done = Math.min(job.completed_tasks + job.failed_tasks, job.total_tasks);
  return Math.round((done / job.total_tasks) * 1000) / 10;
}

/**
 * A job with its progress. `tasks` (when read) name the failed tasks in the error summary; the
 * task list itself is shown only with `includeTasks`.
 */
export function presentJob(job: JobRow, tasks?: TaskRow[], includeTasks = false) {
  const failed = (tasks ?? []).filter((t) => t.status === 'failed' && t.error_message);
  const hasError = job.last_error && (job.status === 'failed' || job.status === 'retrying' || job.status === 'cancelled');
  return {
    id: job.id,
    connection_id: job.connection_id,
    tenant_id: job.tenant_id,
    provider: job.provider_slug,
    job_type: job.job_type,
    trigger: job.trigger,
    status: job.status,
    priority: job.priority,
    scheduled_at: job.scheduled_at.toISOString(),
    started_at: iso(job.started_at),
    finished_at: iso(job.finished_at),
    window: job.window_start && job.window_end ? { start: job.window_start.toISOString(), end: job.window_end.toISOString() } : null,
    payload: job.payload,
    retry_count: job.retry_count,
    max_retries: job.max_retries,
    retry_after: job.status === 'retrying' ? iso(job.retry_after) : null,
    total_tasks: job.total_tasks,
    completed_tasks: job.completed_tasks,
    failed_tasks: job.failed_tasks,
    processed_entities: job.processed_entities,
    counts: job.counts,
    progress_percentage: progressPercentage(job),
    error: hasError
      ? {
          message: safeMessage(job.last_error!),
          failed_tasks: failed.map((t) => ({ resource_type: t.resource_type, message: safeMessage(t.error_message!) })),
        }
      : null,
    workflow_id: job.workflow_id,
    created_at: job.created_at.toISOString(),
    ...(tasks && includeTasks && {
      tasks: tasks.map((t) => ({
        resource_type: t.resource_type,
        status: t.status,
        entity_count: t.entity_count,
        deleted_count: t.deleted_count,
        counts: { added: t.added_count, updated: t.updated_count, deleted: t.deleted_count, unchanged: t.unchanged_count },
        error_message: t.error_message && safeMessage(t.error_message),
        started_at: iso(t.started_at),
        completed_at: iso(t.completed_at),
      })),
    }),
  };
}

/** The 202 answer of a sync request. */
export function presentAccepted(job: JobRow, resourceTypes: string[]) {
  return {
    job_id: job.id,
    status: job.status as ActiveJobStatus,
    total_tasks: job.total_tasks || resourceTypes.length,
    resource_types: resourceTypes,
    connection_id: job.connection_id,
    mode: job.job_type,
    workflow_id: job.workflow_id ?? syncJobWorkflowId(job.id),
  };
}

/** One change of a connection's feed, as the records API shows it (the feed position stays inside the cursor). */
export function presentRecordChange(change: RecordChange) {
  return {
    external_id: change.external_id,
    resource_type: change.resource_type,
    data: change.data,
    source_updated_at: change.source_updated_at,
    synced_at: change.synced_at.toISOString(),
    deleted_at: change.deleted_at?.toISOString() ?? null,
    change: change.change,
  };
}

/** A webhook as the API shows it: never its secret. */
export function presentWebhook(row: WebhookRow) {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    url: row.url,
    event_types: row.event_types,
    created_at: row.created_at.toISOString(),
    disabled_at: row.disabled_at?.toISOString() ?? null,
    disabled_reason: row.disabled_reason,
  };
}

/** One delivery with its attempts. */
export function presentDelivery(row: DeliveryRow) {
  return {
    id: row.id,
    event_id: row.event_id,
    event_type: row.event_type,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    created_at: row.created_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
    attempt_log: row.attempt_log.map((a) => ({ ...a, at: new Date(a.at).toISOString() })),
  };
}

/** A tenant's limits: limit names as the API and errors name them (max_connections, …). */
export function presentTenantLimits(view: TenantLimitsView) {
  const named = <T>(values: Record<TenantLimitKind, T>) =>
    Object.fromEntries((Object.keys(TENANT_LIMIT_NAMES) as TenantLimitKind[]).map((k) => [TENANT_LIMIT_NAMES[k], values[k]])) as Record<
      'max_connections' | 'max_webhooks' | 'max_immediate_syncs' | 'max_running_jobs' | 'max_redeliveries_per_hour' | 'max_oauth_apps',
      T
    >;
  const overrides = Object.fromEntries((Object.keys(TENANT_LIMIT_NAMES) as TenantLimitKind[]).map((k) => [k, view.overrides[k] ?? null])) as Record<TenantLimitKind, number | null>;
  return { tenant_id: view.tenantId, limits: named(view.limits), overrides: named(overrides), usage: view.usage };
}

/** A tenant API key as the API shows it (never its secret or hash). */
export function presentApiKey(row: ApiKeyRow) {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes,
    created_at: row.created_at.toISOString(),
    last_used_at: iso(row.last_used_at),
    revoked_at: iso(row.revoked_at),
  };
}

/** An audit log entry. */
export function presentAuditEntry(row: AuditRow) {
  return { ...row, at: row.at.toISOString() };
}

/** A connection purge. */
export function presentPurge(row: PurgeRow) {
  return {
    id: row.id,
    connection_id: row.connection_id,
    tenant_id: row.tenant_id,
    status: row.status,
    deleted_rows: Number(row.deleted_rows),
    workflow_id: connectionPurgeWorkflowId(row.id),
    created_at: row.created_at.toISOString(),
    finished_at: iso(row.finished_at),
  };
}

/** An OAuth app (never its client secret). */
export function presentOAuthApp(row: OAuthAppRow) {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    client_id: row.client_id,
    authorize_url: row.authorize_url,
    token_url: row.token_url,
    redirect_uri: row.redirect_uri,
    scopes: row.scopes,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
