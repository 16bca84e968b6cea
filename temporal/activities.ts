// The activities Synctide's workflows call, as the workflows see them: names, inputs and results.
// `activities/` implements this interface; workflows proxy it and import nothing else of the
// worker. Times are epoch milliseconds taken from the workflow's clock, so bookkeeping the
// planner reads back is consistent in replay.
import type { RateLimitPolicy } from '../policy/rate-limit';
import type { FullSyncHistory, PlannedRun, Schedule, ScheduleSettings } from '../policy/schedule';
import type { ConnectionStatus, JobStatus, JobTrigger, SyncMode } from '../policy/vocabulary';
import type { ImmediateSyncInput, ImmediateSyncResult } from './immediate-sync';
import type { ScheduleChange } from './connection';
import type { ConnectionPurgeInput, PurgeProgress } from './purge';
import type { WebhookDeliveryOutcome } from './webhook-delivery';

/** What a connection workflow needs to plan its next run. */
export interface ConnectionContext {
  connectionId: string;
  tenantId: string;
  providerSlug: string;
  status: ConnectionStatus;
  /**
   * The stored schedule as this worker's bounds let it apply (the default interval when none is
   * stored or valid), read by the connections row mapper. Absent only in results recorded by
   * older workers, which carry `sync` instead.
   */
  schedule?: Schedule;
  /** Why a stored value was ignored, one message each; the workflow logs them. */
  scheduleWarnings?: string[];
  /** `metadata.sync.first_activated_at` as epoch milliseconds, when a valid time. */
  firstActivatedAt?: number | null;
  /** Legacy: raw `metadata.sync`, in results recorded before `schedule`. Never written now. */
  sync?: unknown;
  createdAt: number;
  /**
   * The schedule's last run: finish time of the latest finished job of the connection's own
   * scheduler (any type, cancelled included), ignoring abandoned ones and API or backfill jobs.
   */
  lastFinishedAt: number | null;
  /** Circuit-breaker pause still in force at `at`, if any. */
  pausedUntil: number | null;
  /** The worker's configured schedule bounds; recorded in history, so replay stays deterministic. */
  settings: ScheduleSettings;
  /** Earlier full syncs, read only when `metadata.sync.full_sync_every` is set. */
  fullSync?: FullSyncHistory;
  /**
   * When the API last stored the schedule (`schedule_changed_at` as read, exact text; null: never):
   * the version a plan from this context is made from. Absent in results recorded by older workers.
   */
  scheduleVersion?: string | null;
}

/** One job to enqueue for a connection. */
export interface EnqueueJobInput {
  /** Generated in the workflow, so a retried activity finds the job it already inserted. */
  jobId: string;
  connectionId: string;
  jobType: SyncMode;
  trigger: JobTrigger;
  scheduledAt: number;
  /** Workflow time of the decision, used for the breaker check. */
  at: number;
  /** For scheduled runs: written to `metadata.sync` in the same transaction. */
  plan?: PlannedRun;
  /**
   * The version of the stored schedule the plan was made from: its `schedule_changed_at` as the
   * read found it (exact text; null: never changed). Absent in inputs recorded by older workers.
   */
  scheduleVersion?: string | null;
  /** The connection workflow run that enqueues it: its own start-up cleanup leaves the job alone. */
  runId?: string;
  /**
   * The workflow that will run the job: the connection's own (a run that runs its scheduled jobs
   * inline); absent for runs that start a `sync-job:<id>` child, which is then the job's workflow.
   */
  workflowId?: string;
}

/** What happened to an enqueue. Only `enqueued` means this job row exists and is ours to run. */
export type EnqueueJobResult =
  | { outcome: 'enqueued'; jobId: string }
  | { outcome: 'existing'; jobId: string; status: string }
  | { outcome: 'locked' }
  | { outcome: 'inactive'; status: string }
  | { outcome: 'paused'; pausedUntil: number }
  | { outcome: 'missing' };

/** A new time (and for sync-now, a new type and trigger) for a job that has not started. */
export interface RescheduleQueuedJobInput {
  jobId: string;
  connectionId: string;
  scheduledAt: number;
  jobType?: SyncMode;
  trigger?: 'schedule' | 'manual';
  plan?: PlannedRun;
  /**
   * The version of the stored schedule the plan was made from: its `schedule_changed_at` as the
   * read found it (exact text; null: never changed). Absent in inputs recorded by older workers.
   */
  scheduleVersion?: string | null;
}

/** The job as its runner needs it. */
export interface ClaimedJob {
  jobId: string;
  connectionId: string;
  jobType: SyncMode;
  retryCount: number;
  /** The connection's circuit-breaker pause in force at the claim (epoch ms; null: none). Absent from claims recorded before it was reported. */
  pausedUntil?: number | null;
}

/** A claimed job made ready to run: its effective mode and one task per resource type. */
export interface PreparedJob {
  /** `full` also when an incremental job finds no sync_state at all for its connection. */
  mode: SyncMode;
  tasks: { taskId: string; resourceType: string }[];
  /** How many tasks may run at once: `max_parallel_tasks` of the connection's config (1–8), default 1. */
  parallelism: number;
  provider: string;
  connectionId: string;
  /** The rate-limit policy of this provider and the cap on rate-limit retries. */
  rateLimit: { policy: RateLimitPolicy; retryCap: number };
  /** Failure retries so far and allowed (a job resumed after a worker restart keeps its count). */
  retryCount: number;
  rateLimitRetryCount: number;
  maxRetries: number;
  /** A circuit-breaker pause of the connection still in force, if any. */
  pausedUntil: number | null;
}

/** One resource type of a job. */
export interface SyncTaskInput {
  jobId: string;
  taskId: string;
  resourceType: string;
  mode: SyncMode;
}

/** What a finished task did. */
export interface SyncTaskResult {
  status: 'completed' | 'skipped';
  entityCount: number;
  writtenCount: number;
  deletedCount: number;
  pages: number;
}

/** The end of one attempt of a job. */
export interface FinishJobInput {
  jobId: string;
  outcome: 'completed' | 'failed';
  at: number;
  startedAt: number;
  error?: string;
  /** Raise a `sync_job_failed` alert with the error summary (a job that failed for good). */
  alert?: boolean;
  /** How many of the attempt's tasks were rate limited (each attempt with any counts one rate-limit event). */
  rateLimitedTasks?: number;
}

/** A failed attempt of a job that will be retried after `retryAfter`. */
export interface MarkJobRetryingInput {
  jobId: string;
  at: number;
  startedAt: number;
  retryAfter: number;
  /**
   * Rate limits count separately and never toward the breaker or `retry_count`; `paused` (waiting
   * out a breaker pause before any attempt) and `interrupted` (a task cut off by a worker shutdown
   * or crash, or held by an earlier attempt) count nothing and log no attempt.
   */
  kind: 'rate_limited' | 'failure' | 'paused' | 'interrupted';
  error: string;
  /** How many tasks failed in the attempt (for its log row). */
  failedCount: number;
  /** How many of the attempt's tasks were rate limited (each attempt with any counts one rate-limit event). */
  rateLimitedTasks?: number;
  /**
   * The job's failure and rate-limit retry counts after this attempt: set, not added, so a repeated
   * call changes nothing. Absent in calls recorded before (they add one).
   */
  retryCount?: number;
  rateLimitRetryCount?: number;
}

/** The breaker state after a failed attempt. */
export interface BreakerState {
  consecutiveFailures: number;
  pausedUntil: number | null;
}

/** The reconcile tick's own settings, as the worker that ran the tick is configured. */
export interface ReconcileSettings {
  /** SCHEDULER_TICK_SECONDS: the wait between ticks. */
  tickSeconds: number;
  /** RETENTION_DAYS: finished jobs older than this are deleted. */
  retentionDays: number;
}

/** What one reconcile tick did. */
export interface ReconcileResult {
  /** Connection workflows found missing and started. */
  ensured: number;
  /** Workflows of disabled connections asked to stop. */
  stopped: number;
  /** Overdue connections (the backlog gauge). */
  backlog: number;
  /** Requested jobs found queued without a workflow (their API process died in between) and started. */
  adopted: number;
  /** Active jobs no workflow ran any more, failed as abandoned. */
  abandoned: number;
  /** Calls the tick made to Temporal. */
  temporalCalls: number;
  /** Runs waiting paused whose connection is active (a resume whose signal was lost), sent a `recheck`. */
  rechecked?: number;
  /** Sleeping runs of active connections whose schedule changed after their queued job was planned (a `replan` lost), sent a `replan`. */
  replanned?: number;
  /** Pending webhook deliveries whose workflow was not running (never started, or died), started now. */
  deliveriesStarted?: number;
  /** Records of pending deselections (what config changes stopped selecting) tombstoned by the tick. */
  deselectedTombstoned?: number;
  /**
   * The tick's settings from the configuration of the worker that ran it, read on every tick so a
   * restart with new values takes effect (absent in results recorded before they were reported).
   */
  settings?: ReconcileSettings;
}

/** Input of the stale-task reaper. */
export interface ReapStaleTasksInput {
  /** The reaper's "now". */
  at: number;
  /** A `processing` task whose last heartbeat (or start) is older than this is reaped (default 300). */
  staleAfterSeconds?: number;
}

/** What one reaper run did. */
export interface ReapStaleTasksResult {
  /** Tasks marked `failed`. */
  tasks: number;
  /** Jobs marked `failed` because their last open tasks were reaped. */
  jobs: number;
}

/** Input of retention cleanup. */
export interface DeleteOldJobsInput {
  /** The cleanup's "now". */
  at: number;
  /** Finished jobs older than this many days are deleted. */
  retentionDays: number;
  /** Jobs per DELETE statement (default 1000). */
  batchSize?: number;
}

/** What a connection workflow's run does first, in one transaction (see `openCycle`). */
export interface OpenCycleInput {
  connectionId: string;
  at: number;
  /** Fail the connection's scheduler jobs an earlier run left active (a run's first call only). */
  cleanup: boolean;
  /** The run asking: its own jobs are never an earlier run's. */
  runId: string;
  /** A pending legacy `updateSchedule` change to store first. */
  schedule?: ScheduleChange;
  /** A pending pause or resume to store first (a disabled connection stays disabled). */
  status?: 'active' | 'paused';
}

/** What startJob claims and prepares: job `jobId` for workflow `workflowId`, at workflow time `at`. */
export interface StartJobInput {
  jobId: string;
  workflowId: string;
  at: number;
  /** How the job waits between claims while queued behind a running one (`long` unless given). */
  behindRunning?: BehindRunningWait;
}

/**
 * How a job queued behind a running one of its connection and type waits between claims:
 * `stepped` (5 s, doubling up to a minute) from a caller whose local retry threshold is below 5 s,
 * so each wait is a durable timer; `long` (65–95 s, as a wait for the tenant's running-jobs limit)
 * from any other.
 */
export type BehindRunningWait = 'stepped' | 'long';

/** How claiming and preparing a job went (see `startJob`). */
export type StartJobResult =
  | { outcome: 'started'; prepared: PreparedJob }
  /** Claimed elsewhere, finished, or refused (disabled connection, or a paused one's queued job). */
  | { outcome: 'not_claimable' }
  /** Claimed, but it cannot be prepared (e.g. an invalid config): fail the job with `error`. */
  | { outcome: 'invalid'; error: string };

/** Every activity of the Synctide worker. */
export interface Activities {
  // The connection workflow's bookkeeping.
  failAbandonedJobs(input: { connectionId: string; at: number; runId?: string }): Promise<string[]>;
  loadConnectionContext(connectionId: string, at: number): Promise<ConnectionContext | null>;
  enqueueJob(input: EnqueueJobInput): Promise<EnqueueJobResult>;
  rescheduleQueuedJob(input: RescheduleQueuedJobInput): Promise<boolean>;
  cancelJob(input: { jobId: string; reason: string; at: number }): Promise<boolean>;
  /** Stores a legacy `updateSchedule` change (runs recorded before the lean cycle). */
  saveSchedule(input: { connectionId: string; change: ScheduleChange }): Promise<void>;
  setConnectionStatus(input: { connectionId: string; status: 'active' | 'paused' }): Promise<string | null>;
  /**
   * One transaction for the start of a cycle: clean up after an earlier run (when asked), store
   * pending changes, and read the connection's scheduling context (null: the connection is gone).
   */
  openCycle(input: OpenCycleInput): Promise<ConnectionContext | null>;
  // The job workflow's steps.
  /** Claims the job and prepares it (mode, tasks) in one transaction. */
  startJob(input: StartJobInput): Promise<StartJobResult>;
  /** A successful attempt in one transaction: close the breaker, resolve alerts, finish the job. */
  completeJob(input: { jobId: string; connectionId: string; at: number; startedAt: number }): Promise<JobStatus | null>;
  claimJob(input: { jobId: string; workflowId: string; at: number }): Promise<ClaimedJob | null>;
  prepareJob(input: { jobId: string; at: number }): Promise<PreparedJob>;
  syncTask(input: SyncTaskInput): Promise<SyncTaskResult>;
  failTask(input: { jobId: string; taskId: string; error: string }): Promise<void>;
  markJobRetrying(input: MarkJobRetryingInput): Promise<void>;
  /** The job's status afterwards: the one written, or the one it already had (null: no such job). */
  finishJob(input: FinishJobInput): Promise<JobStatus | null>;
  /** `attemptKey` names the attempt, so a repeated call counts it once. */
  recordAttemptFailure(input: { connectionId: string; at: number; error: string; attemptKey?: string }): Promise<BreakerState>;
  recordAttemptSuccess(input: { connectionId: string; at: number }): Promise<void>;
  // Immediate mode.
  syncImmediately(input: ImmediateSyncInput): Promise<ImmediateSyncResult>;
  // The reconcile tick.
  reconcileConnections(input: { at: number }): Promise<ReconcileResult>;
  reapStaleTasks(input: ReapStaleTasksInput): Promise<ReapStaleTasksResult>;
  deleteOldJobs(input: DeleteOldJobsInput): Promise<number>;
  // Webhook deliveries.
  /** One attempt; throws a retryable failure unless the receiver answered 2xx. */
  deliverWebhook(input: { deliveryId: string }): Promise<WebhookDeliveryOutcome>;
  failWebhookDelivery(input: { deliveryId: string; at: number }): Promise<void>;
  // Connection purges.
  /** Stops everything the connection runs; throws (retryable) until its workflows have all closed. */
  quiesceConnection(input: ConnectionPurgeInput): Promise<void>;
  /** Deletes the connection's rows in batches for up to about 30 s; `done` once the connection row is gone too. */
  purgeConnectionBatch(input: ConnectionPurgeInput): Promise<PurgeProgress>;
}
