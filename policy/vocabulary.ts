// The domain's words, spelled once. Zod schemas, SQL, metrics and workflows all take them from
// here, so a status or trigger cannot be spelled two ways. Pure: no I/O.

/** Every status a sync job can have. */
export const JOB_STATUSES = ['queued', 'running', 'retrying', 'completed', 'failed', 'cancelled'] as const;
/** A sync job's status. */
export type JobStatus = (typeof JOB_STATUSES)[number];

/**
 * A job that has not finished. A connection has at most one active job per type (and one active
 * backfill), enforced by a partial unique index over exactly these statuses.
 */
export const ACTIVE_JOB_STATUSES = ['queued', 'running', 'retrying'] as const satisfies readonly JobStatus[];
/** An active job's status. */
export type ActiveJobStatus = (typeof ACTIVE_JOB_STATUSES)[number];

/** A job that will not change any more. */
export const FINISHED_JOB_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly JobStatus[];
/** A finished job's status. */
export type FinishedJobStatus = (typeof FINISHED_JOB_STATUSES)[number];

/** How a job came to be. */
export const JOB_TRIGGERS = ['schedule', 'manual', 'api', 'backfill'] as const;
/** A job's trigger. */
export type JobTrigger = (typeof JOB_TRIGGERS)[number];

/**
 * Jobs a connection workflow creates itself (its planned runs and `syncNow`) and runs as its
 * child. Only these are its to clean up when an earlier run of it ended early.
 */
export const SCHEDULER_TRIGGERS = ['schedule', 'manual'] as const satisfies readonly JobTrigger[];
/** Jobs requested over the API, each running in a `sync-job:` workflow of its own. */
export const REQUESTED_TRIGGERS = ['api', 'backfill'] as const satisfies readonly JobTrigger[];
/** A trigger of a job the API requested. */
export type RequestedTrigger = (typeof REQUESTED_TRIGGERS)[number];

/** Whether a job with this trigger belongs to its connection's scheduler workflow. */
export function isSchedulerTrigger(trigger: string): trigger is (typeof SCHEDULER_TRIGGERS)[number] {
  return (SCHEDULER_TRIGGERS as readonly string[]).includes(trigger);
}

/** A sync's mode: `incremental` from the stored cursor, or `full` with deletion of what is gone. */
export const SYNC_MODES = ['incremental', 'full'] as const;
/** A sync mode; also a job's `job_type`. */
export type SyncMode = (typeof SYNC_MODES)[number];

/**
 * Every status a connection can have. `needs_reauth`: the provider refused its OAuth grant
 * (`invalid_grant`); its schedule enqueues nothing, no breaker failure is counted, and new
 * credentials (PATCH credentials, or the connect flow) make it `active` again.
 */
export const CONNECTION_STATUSES = ['active', 'paused', 'disabled', 'needs_reauth'] as const;
/** A connection's status. */
export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];

/** How a connection's credentials are obtained: a static `token`, or an `oauth2` grant kept fresh by refresh. */
export const CREDENTIAL_KINDS = ['token', 'oauth2'] as const;
/** A credential kind. */
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number];

/** Every status of one resource type's task within a job. */
export const TASK_STATUSES = ['pending', 'processing', 'completed', 'failed', 'cancelled'] as const;
/** A task's status. */
export type TaskStatus = (typeof TASK_STATUSES)[number];
/** A task that has not finished. */
export const OPEN_TASK_STATUSES = ['pending', 'processing'] as const satisfies readonly TaskStatus[];

/** Live phases of a connection workflow, shown by its `state` query and search attribute. */
export const PHASES = ['starting', 'sleeping', 'running', 'paused', 'backing_off', 'stopped'] as const;
/** A connection workflow's phase. */
export type Phase = (typeof PHASES)[number];

/** How a job's workflow ended; `skipped` when the job was not claimable (claimed elsewhere or finished). */
export const JOB_OUTCOMES = ['completed', 'failed', 'cancelled', 'skipped'] as const;
/** A job workflow's outcome. */
export type JobOutcome = (typeof JOB_OUTCOMES)[number];


/** Events a webhook can subscribe to. */
export const WEBHOOK_EVENT_TYPES = [
  'sync.completed',
  'sync.failed',
  'sync.cancelled',
  'connection.breaker_opened',
  'connection.breaker_closed',
  'connection.disabled',
  'connection.credentials_invalid',
] as const;
/** One webhook event type. */
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** States of one delivery of an event to one webhook. */
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
/** One delivery state. */
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
