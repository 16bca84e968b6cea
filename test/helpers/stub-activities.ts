// In-memory activities implementing the workflows' contract, for tests of workflow logic on the
// time-skipping server without Postgres: one fake store of connections and jobs that answers as
// the real activities do for the paths these tests take.
import { ApplicationFailure } from '@temporalio/common';
import type { SyncMode, JobStatus, JobTrigger, ConnectionStatus } from '../../policy/vocabulary';
import type { Activities, ConnectionContext } from '../../temporal/activities';
import { DEFAULT_SCHEDULE_SETTINGS, resolveSchedule, type PlannedRun } from '../../policy/schedule';
import { DEFAULT_RATE_LIMIT_POLICY } from '../../policy/rate-limit';

/** A connection of the fake store. */
export interface StubConnection {
  id: string;
  tenantId: string;
  status: ConnectionStatus;
  sync: Record<string, unknown>;
  createdAt: number;
  pausedUntil: number | null;
  /** Schedule bounds its context reports (the defaults when absent). */
  settings?: typeof DEFAULT_SCHEDULE_SETTINGS;
}

/** A job of the fake store. */
export interface StubJob {
  id: string;
  connectionId: string;
  jobType: SyncMode;
  trigger: JobTrigger;
  status: JobStatus;
  scheduledAt: number;
  finishedAt: number | null;
  abandoned: boolean;
  /** The plan it was enqueued with (scheduled runs). */
  plan?: PlannedRun | undefined;
  /** The connection workflow run that enqueued it. */
  runId?: string | undefined;
}

const ACTIVE: JobStatus[] = ['queued', 'running', 'retrying'];

/** The fake store and the activities over it. `calls` counts each activity's calls. */
export function stubActivities() {
  const connections = new Map<string, StubConnection>();
  const jobs = new Map<string, StubJob>();
  const calls = new Map<string, number>();
  /**
   * Knobs of the fake: `enqueue` forces an enqueue outcome (e.g. `locked` or `existing` forever);
   * `reconcile` is what the reconcile tick's activity answers, `retentionDays` what retention saw.
   */
  const behaviour: {
    taskFails: boolean;
    enqueue: 'locked' | 'existing' | null;
    reconcile: Record<string, unknown>;
    retentionDays: number[];
    /** What the next syncTask calls answer, one each: skipped, or cut off by a worker shutdown. */
    taskAnswers: ('skipped' | 'shutdown')[];
  } = { taskFails: false, enqueue: null, reconcile: {}, retentionDays: [], taskAnswers: [] };

  const count = <T extends (...args: never[]) => unknown>(name: string, fn: T): T =>
    ((...args: Parameters<T>) => {
      calls.set(name, (calls.get(name) ?? 0) + 1);
      return fn(...args);
    }) as T;

  const context = (id: string, at: number): ConnectionContext | null => {
    const c = connections.get(id);
    if (!c) return null;
    const finished = [...jobs.values()].filter(
      (j) =>
        j.connectionId === id && (j.jobType === 'incremental' || j.trigger === 'schedule') && (j.status === 'completed' || j.status === 'failed') && !j.abandoned,
    );
    const mine = [...jobs.values()].filter((j) => j.connectionId === id && j.status === 'completed');
    const fulls = mine.filter((j) => j.jobType === 'full').map((j) => j.finishedAt!);
    const lastFullAt = fulls.length ? Math.max(...fulls) : null;
    const fullSync = {
      lastFullAt,
      scheduledRunsSinceFull: mine.filter((j) => j.trigger === 'schedule' && j.finishedAt! > (lastFullAt ?? -Infinity)).length,
    };
    return {
      connectionId: id,
      tenantId: c.tenantId,
      providerSlug: 'demo',
      status: c.status,
      // As the connections row mapper reads metadata.sync.
      ...(({ schedule, warnings }) => ({ schedule, scheduleWarnings: warnings }))(resolveSchedule(c.sync, c.settings ?? DEFAULT_SCHEDULE_SETTINGS)),
      firstActivatedAt: typeof c.sync.first_activated_at === 'string' ? Date.parse(c.sync.first_activated_at) : null,
      createdAt: c.createdAt,
      lastFinishedAt: finished.length ? Math.max(...finished.map((j) => j.finishedAt!)) : null,
      pausedUntil: c.pausedUntil !== null && c.pausedUntil > at ? c.pausedUntil : null,
      settings: c.settings ?? DEFAULT_SCHEDULE_SETTINGS,
      ...(c.sync.full_sync_every !== undefined && { fullSync }),
    };
  };
  const end = (jobId: string, status: JobStatus, at: number): boolean => {
    const job = jobs.get(jobId);
    if (!job || !ACTIVE.includes(job.status)) return false;
    job.status = status;
    job.finishedAt = at;
    return true;
  };
  const unused = (name: string) => async (): Promise<never> => {
    throw new Error(`stub activity ${name} is not used by these tests`);
  };

  const single: Omit<Activities, 'openCycle' | 'startJob' | 'completeJob'> = {
    failAbandonedJobs: count('failAbandonedJobs', async ({ connectionId, at }) => {
      const ids: string[] = [];
      for (const job of jobs.values()) {
        if (job.connectionId === connectionId && ACTIVE.includes(job.status) && (job.trigger === 'schedule' || job.trigger === 'manual')) {
          end(job.id, 'failed', at);
          job.abandoned = true;
          ids.push(job.id);
        }
      }
      return ids;
    }),
    loadConnectionContext: count('loadConnectionContext', async (id, at) => context(id, at)),
    enqueueJob: count('enqueueJob', async (input) => {
      if (jobs.has(input.jobId)) return { outcome: 'enqueued', jobId: input.jobId };
      if (behaviour.enqueue === 'locked') return { outcome: 'locked' };
      if (behaviour.enqueue === 'existing') return { outcome: 'existing', jobId: 'someone-elses', status: 'running' };
      const c = connections.get(input.connectionId);
      if (!c) return { outcome: 'missing' };
      if (c.status !== 'active') return { outcome: 'inactive', status: c.status };
      if (c.pausedUntil !== null && c.pausedUntil > input.at) return { outcome: 'paused', pausedUntil: c.pausedUntil };
      const active = [...jobs.values()].find((j) => j.connectionId === input.connectionId && j.jobType === input.jobType && ACTIVE.includes(j.status));
      if (active) return { outcome: 'existing', jobId: active.id, status: active.status };
      jobs.set(input.jobId, {
        id: input.jobId, connectionId: input.connectionId, jobType: input.jobType, trigger: input.trigger,
        status: 'queued', scheduledAt: input.scheduledAt, finishedAt: null, abandoned: false, plan: input.plan, runId: input.runId,
      });
      if (input.plan) Object.assign(c.sync, { next_run_at: new Date(input.plan.nextRunAt).toISOString(), last_jitter_seconds: input.plan.jitterSeconds });
      return { outcome: 'enqueued', jobId: input.jobId };
    }),
    rescheduleQueuedJob: count('rescheduleQueuedJob', async (input) => {
      const job = jobs.get(input.jobId);
      if (!job || job.status !== 'queued') return false;
      job.scheduledAt = input.scheduledAt;
      if (input.jobType) job.jobType = input.jobType;
      if (input.trigger) job.trigger = input.trigger;
      return true;
    }),
    cancelJob: count('cancelJob', async ({ jobId, at }) => end(jobId, 'cancelled', at)),
    saveSchedule: count('saveSchedule', async ({ connectionId, change }) => {
      const c = connections.get(connectionId)!;
      delete c.sync.interval_seconds;
      delete c.sync.cron;
      Object.assign(c.sync, change);
    }),
    setConnectionStatus: count('setConnectionStatus', async ({ connectionId, status }) => {
      const c = connections.get(connectionId);
      if (!c) return null;
      // As the real one: a disabled connection stays disabled, one that needs reauthorization needs it still.
      if (c.status !== 'disabled' && c.status !== 'needs_reauth') c.status = status;
      return c.status;
    }),
    claimJob: count('claimJob', async ({ jobId }) => {
      const job = jobs.get(jobId);
      if (!job || !(job.status === 'queued' || job.status === 'retrying' || job.status === 'running')) return null;
      job.status = 'running';
      return { jobId, connectionId: job.connectionId, jobType: job.jobType, retryCount: 0 };
    }),
    prepareJob: count('prepareJob', async ({ jobId }) => ({
      mode: jobs.get(jobId)!.jobType,
      tasks: [{ taskId: `${jobId}:items`, resourceType: 'items' }],
      parallelism: 1,
      provider: 'demo',
      connectionId: jobs.get(jobId)!.connectionId,
      rateLimit: { policy: DEFAULT_RATE_LIMIT_POLICY, retryCap: 20 },
      retryCount: 0,
      rateLimitRetryCount: 0,
      maxRetries: 5,
      pausedUntil: null,
    })),
    syncTask: count('syncTask', async () => {
      if (behaviour.taskFails) throw Object.assign(new Error('stub: provider down'), { name: 'Error' });
      const answer = behaviour.taskAnswers.shift();
      if (answer === 'skipped') return { status: 'skipped', entityCount: 0, writtenCount: 0, deletedCount: 0, pages: 0 };
      if (answer === 'shutdown') throw ApplicationFailure.create({ type: 'WorkerShutdown', message: 'stub: worker shut down', nonRetryable: true });
      return { status: 'completed', entityCount: 1, writtenCount: 1, deletedCount: 0, pages: 1 };
    }),
    failTask: count('failTask', async () => undefined),
    markJobRetrying: count('markJobRetrying', async ({ jobId }) => {
      jobs.get(jobId)!.status = 'retrying';
    }),
    finishJob: count('finishJob', async ({ jobId, outcome, at }) => (end(jobId, outcome, at) ? outcome : null)),
    recordAttemptFailure: count('recordAttemptFailure', async () => ({ consecutiveFailures: 1, pausedUntil: null })),
    recordAttemptSuccess: count('recordAttemptSuccess', async () => undefined),
    syncImmediately: unused('syncImmediately'),
    reconcileConnections: count('reconcileConnections', async () => ({ ensured: 0, stopped: 0, backlog: 0, adopted: 0, abandoned: 0, temporalCalls: 0, ...behaviour.reconcile })),
    reapStaleTasks: count('reapStaleTasks', async () => ({ tasks: 0, jobs: 0 })),
    deleteOldJobs: count('deleteOldJobs', async ({ retentionDays }) => {
      behaviour.retentionDays.push(retentionDays);
      return 0;
    }),
    deliverWebhook: unused('deliverWebhook'),
    failWebhookDelivery: unused('failWebhookDelivery'),
    quiesceConnection: unused('quiesceConnection'),
    purgeConnectionBatch: unused('purgeConnectionBatch'),
  };

  /** Adds a connection (active, 15-minute interval unless `sync` says otherwise). */
  const addConnection = (id: string, createdAt: number, sync: Record<string, unknown> = { interval_seconds: 900 }): StubConnection => {
    const c: StubConnection = { id, tenantId: 'acme', status: 'active', sync: { ...sync }, createdAt, pausedUntil: null };
    connections.set(id, c);
    return c;
  };
  /** The connection's jobs in creation order. */
  const jobsOf = (connectionId: string) => [...jobs.values()].filter((j) => j.connectionId === connectionId);

  // The merged steps of the lean cycle, composed of the single ones above.
  const activities: Activities = {
    ...single,
    openCycle: count('openCycle', async (input: Parameters<Activities['openCycle']>[0]) => {
      if (input.cleanup) await single.failAbandonedJobs({ connectionId: input.connectionId, at: input.at });
      if (input.schedule) await single.saveSchedule({ connectionId: input.connectionId, change: input.schedule });
      if (input.status) await single.setConnectionStatus({ connectionId: input.connectionId, status: input.status });
      return single.loadConnectionContext(input.connectionId, input.at);
    }),
    startJob: count('startJob', async (input: Parameters<Activities['startJob']>[0]) => {
      if (!(await single.claimJob(input))) return { outcome: 'not_claimable' as const };
      return { outcome: 'started' as const, prepared: await single.prepareJob(input) };
    }),
    completeJob: count('completeJob', async (input: Parameters<Activities['completeJob']>[0]) => {
      await single.recordAttemptSuccess(input);
      return single.finishJob({ jobId: input.jobId, outcome: 'completed', at: input.at, startedAt: input.startedAt });
    }),
  };

  return { activities, connections, jobs, calls, behaviour, addConnection, jobsOf };
}
