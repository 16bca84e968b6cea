// The domain's words, spelled once. Zod schemas, SQL, metrics and workflows all take them from
// here, so a status or trigger cannot be spelled two ways. Pure: no I/O.

/**
 * Each word of `words` under its own name (`byName(['a', 'b'])` is `{ a: 'a', b: 'b' }`), frozen: code
 * and SQL name one word as `JOB_STATUS.queued`, never as a second spelling of it.
 */
function byName<const T extends string>(words: readonly T[]): { readonly [K in T]: K } {
  return Object.freeze(Object.fromEntries(words.map((word) => [word, word]))) as { readonly [K in T]: K };
}

/** Every status a sync job can have. */
export const JOB_STATUSES = ['queued', 'running', 'retrying', 'completed', 'failed', 'cancelled'] as const;
/** A sync job's status. */
export type JobStatus = (typeof JOB_STATUSES)[number];
/** Each job status by name. */
export const JOB_STATUS = byName(JOB_STATUSES);

/**
 * A job that has not finished. A connection has at most one queued and one running or retrying job
 * per type (and one active backfill), enforced by partial unique indexes over these statuses.
 */
export const ACTIVE_JOB_STATUSES = ['queued', 'running', 'retrying'] as const satisfies readonly JobStatus[];
/** An active job's status. */
export type ActiveJobStatus = (typeof ACTIVE_JOB_STATUSES)[number];
/** Whether a job of `status` has not finished. */
export const isActiveJobStatus = (status: JobStatus): status is ActiveJobStatus => (ACTIVE_JOB_STATUSES as readonly JobStatus[]).includes(status);

/** A job that will not change any more. */
export const FINISHED_JOB_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly JobStatus[];
/** A finished job's status. */
export type FinishedJobStatus = (typeof FINISHED_JOB_STATUSES)[number];

/** How a job came to be. */
export const JOB_TRIGGERS = ['schedule', 'manual', 'api', 'backfill'] as const;
/** A job's trigger. */
export type JobTrigger = (typeof JOB_TRIGGERS)[number];
/** Each trigger by name. */
export const JOB_TRIGGER = byName(JOB_TRIGGERS);

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
 * (`invalid_grant`); its schedule enqueues nothing, no breaker failure is counted, and only new
 * credentials (PATCH credentials, or the connect flow) end it, giving it back the status it had
 * (`active` or `paused`); a pause or resume meanwhile leaves it `needs_reauth` and changes only
 * that status to get back. A disable keeps the refusal (the disabled connection keeps that
 * status to get back), so a resume makes it `needs_reauth` again, unless new credentials came.
 */
export const CONNECTION_STATUSES = ['active', 'paused', 'disabled', 'needs_reauth'] as const;
/** A connection's status. */
export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];
/** Each connection status by name. */
export const CONNECTION_STATUS = byName(CONNECTION_STATUSES);
/**
 * The statuses a connection may be created with or set to by pause and resume (disabling has its
 * own way; a connection that needs reauthorization keeps that status through them).
 */
export const SETTABLE_CONNECTION_STATUSES = ['active', 'paused'] as const satisfies readonly ConnectionStatus[];
/** A status a connection may be created with or set to by pause and resume. */
export type SettableConnectionStatus = (typeof SETTABLE_CONNECTION_STATUSES)[number];

/** How a connection's credentials are obtained: a static `token`, or an `oauth2` grant kept fresh by refresh. */
export const CREDENTIAL_KINDS = ['token', 'oauth2'] as const;
/** A credential kind. */
export type CredentialKind = (typeof CREDENTIAL_KINDS)[number];

/** Every status of one resource type's task within a job. */
export const TASK_STATUSES = ['pending', 'processing', 'completed', 'failed', 'cancelled'] as const;
/** A task's status. */
export type TaskStatus = (typeof TASK_STATUSES)[number];
/** Each task status by name. */
export const TASK_STATUS = byName(TASK_STATUSES);
/** A task that has not finished. */
export const OPEN_TASK_STATUSES = ['pending', 'processing'] as const satisfies readonly TaskStatus[];

/** Live phases of a connection workflow, shown by its `state` query and search attribute. */
export const PHASES = ['starting', 'sleeping', 'running', 'paused', 'backing_off', 'stopped'] as const;
/** A connection workflow's phase. */
export type Phase = (typeof PHASES)[number];

/**
 * Why the shared rate budget held a request back: `retry_after` (the provider answered the
 * credential 429, or 403, with a `Retry-After` not yet passed), `reserve` (the credential reached
 * its reserve: waiting for the provider's reset) or `ceiling` (the configured requests per
 * second/minute).
 */
export const BUDGET_WAIT_REASONS = ['retry_after', 'reserve', 'ceiling'] as const;
/** One reason of a budget wait. */
export type BudgetWaitReason = (typeof BUDGET_WAIT_REASONS)[number];

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

/**
 * The `error.code` of every error answer of the API (and of a command's refusal): the OpenAPI
 * document's enum, and the type every error is made with, so a new code is documented or fails
 * typecheck.
 */
export const API_ERROR_CODES = [
  'invalid_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'conflict',
  'connection_paused',
  'connection_disabled',
  'circuit_breaker_open',
  'purge_in_progress',
  'tenant_limit',
  'connection_needs_reauth',
  'oauth_app_in_use',
  'grant_source_not_oauth2',
  'authorization_refused',
  'token_exchange_failed',
  'invalid_connection_config',
  'idempotency_key_reused',
  'backfill_in_progress',
  'immediate_sync_running',
  'job_finished',
  'delivery_pending',
  'webhook_disabled',
  'cursor_expired',
  'payload_too_large',
  'unsupported_media_type',
  'rate_limited',
  'sync_failed',
  'timeout',
  'busy',
  'unavailable',
  'internal',
  'error',
] as const;
/** One API error code. */
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];
/** Each delivery state by name. */
export const DELIVERY_STATUS = byName(DELIVERY_STATUSES);

/** States of a connection's purge: recorded, deleting its rows, done. */
export const PURGE_STATUSES = ['pending', 'running', 'completed'] as const;
/** One purge state. */
export type PurgeStatus = (typeof PURGE_STATUSES)[number];
/** Each purge state by name. */
export const PURGE_STATUS = byName(PURGE_STATUSES);

/** What the latest write of a record in the change feed did to it. */
export const RECORD_CHANGES = ['insert', 'update', 'delete'] as const;
/** One kind of change. */
export type RecordChangeKind = (typeof RECORD_CHANGES)[number];
/** Each kind of change by name. */
export const RECORD_CHANGE = byName(RECORD_CHANGES);

/** What a tenant API key may do: `read` answers GET and HEAD, `write` every other method. */
export const KEY_SCOPES = ['read', 'write'] as const;
/** One key scope. */
export type KeyScope = (typeof KEY_SCOPES)[number];
/** Each key scope by name. */
export const KEY_SCOPE = byName(KEY_SCOPES);
