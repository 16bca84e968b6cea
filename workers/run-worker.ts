import { NativeConnection } from '@temporalio/worker';
import type { ActivityDeps, RateLimitSettings } from '../activities/deps';
import { workflowCacheSize, type Process } from '../infra/boot';
import { temporalConnectionOptions } from '../infra/temporal-connection';
import { cpuUsage } from '../infra/cpu-usage';
import { READINESS_CACHE_MS, temporalAnswers, type Check } from '../infra/readiness';
import { bundleWorkflows } from '../infra/workflow-bundle';
import { immediateTaskQueue, providerPolicy, scheduleSettings, tenantLimits } from '../lib/config';
import type { Keyring } from '../lib/credentials';
import { singleFlight } from '../lib/single-flight';
import { DeliveryShares } from '../lib/delivery-shares';
import type { BudgetSettings } from '../policy/rate-budget';
import { ensureReconcileWorkflow } from '../temporal/client';
import { createImmediateWorker, createWorker } from './create-worker';
import { LaneGate } from './lane-gate';

/** A worker whose state readiness reads (the SDK's Worker). */
interface StatefulWorker {
  getState(): string;
}

/** Whether a worker process is ready, the state of each of its workers, and whether Temporal answers their connection. */
export interface WorkerReadiness {
  ready: boolean;
  workers: Record<string, string>;
  temporal?: Check;
}

/**
 * A worker process is ready while every one of its workers is RUNNING (polling its task queue)
 * and, when `temporal` is given, Temporal answers the workers' connection: with the server gone
 * the SDK's pollers retry without end and the workers stay RUNNING, though no poll gets through.
 * Before `run()` (INITIALIZED) and from the moment shutdown begins (STOPPING, DRAINING, DRAINED,
 * STOPPED) or a worker failed (FAILED), it is not, so readiness turns false before the process
 * exits while in-flight activities still finish. Postgres is not asked: a worker's readiness
 * gates no traffic (Temporal hands it tasks ready or not), the database is shared, so its outage
 * would only make every worker unready at once, and a worker without it fails its activities
 * where they are counted and logged; its polls getting nowhere fail nothing, hence Temporal.
 */
export function workerReadiness(workers: Record<string, StatefulWorker>, temporal?: Check): WorkerReadiness {
  const states = Object.fromEntries(Object.entries(workers).map(([name, w]) => [name, w.getState()]));
  const running = Object.values(states).every((state) => state === 'RUNNING');
  return { ready: running && temporal !== 'unreachable', workers: states, ...(temporal && { temporal }) };
}

/**
 * Connects and runs the Synctide worker of a booted process until shutdown, beside it the worker
 * of immediate syncs (their own queue, slots, workflow thread and pool), and makes sure the
 * reconcile tick runs, at start and again every tick period. On shutdown it stops polling, lets
 * in-flight activities finish their transaction within WORKER_SHUTDOWN_GRACE_SECONDS (then
 * cancels them through their heartbeats), and resolves. Returns the process's readiness (see
 * workerReadiness), Temporal asked over the workers' connection.
 */
export async function runWorker(proc: Process, rateLimit: RateLimitSettings, credentials: Keyring, rateBudget?: BudgetSettings): Promise<() => Promise<WorkerReadiness>> {
  const { config, logger, shutdown } = proc;
  // One bundle for both workers: the prebuilt one (WORKFLOW_BUNDLE_PATH), or bundled here once.
  const workflowBundle = config.WORKFLOW_BUNDLE_PATH ? { codePath: config.WORKFLOW_BUNDLE_PATH } : await bundleWorkflows();
  const connection = await NativeConnection.connect(temporalConnectionOptions(proc.temporalAddress, proc.temporalSecurity));
  // Activities get a pool of their own (worker limits), so API probes and requests of the same
  // process (`npm start`) never wait behind a sync's statements, nor the other way round.
  const pool = proc.poolRole === 'worker' ? proc.pool : proc.openPool('worker');
  shutdown.add('worker-connection', () => connection.close());
  const activities: ActivityDeps = {
    pool,
    // The bookkeeping a workflow task waits for (local activities) holds a workflow-task slot
    // meanwhile: it never queues for a connection behind paging activities.
    localPool: proc.openPool('local'),
    credentials,
    logger,
    metrics: proc.metrics,
    temporal: proc.temporal,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    settings: scheduleSettings(config),
    rateLimit,
    reconcile: { tickSeconds: config.SCHEDULER_TICK_SECONDS, retentionDays: config.RETENTION_DAYS },
    tombstoneRetentionDays: config.TOMBSTONE_RETENTION_DAYS,
    auditRetentionDays: config.AUDIT_LOG_RETENTION_DAYS,
    webhooks: { allowPrivate: config.WEBHOOK_ALLOW_PRIVATE, shares: new DeliveryShares(config.WEBHOOK_DELIVERY_SLOTS) },
    providers: providerPolicy(config),
    tenantLimits: tenantLimits(config),
    connectors: { ...(rateBudget && { rateBudget }), maxResetSeconds: config.RATE_BUDGET_MAX_RESET_SECONDS },
  };
  const maxCachedWorkflows = workflowCacheSize(config);
  // One gate for the process's two lanes: the scheduled lane yields on a hot node while immediate syncs run.
  const cpu = cpuUsage();
  shutdown.add('cpu-usage', async () => cpu.stop());
  const lanes = new LaneGate(config.WORKER_TARGET_CPU, cpu.current);
  const worker = await createWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    shutdownGraceSeconds: config.WORKER_SHUTDOWN_GRACE_SECONDS,
    maxCachedWorkflows,
    lanes,
    workflowBundle,
    activities,
  });
  const immediateWorker = await createImmediateWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    shutdownGraceSeconds: config.WORKER_SHUTDOWN_GRACE_SECONDS,
    taskQueue: immediateTaskQueue(config),
    slots: config.IMMEDIATE_SYNC_SLOTS,
    lanes,
    workflowBundle,
    activities,
    pool: proc.openPool('immediate'),
  });
  for (const [name, w] of [['immediate-worker', immediateWorker], ['worker', worker]] as const) {
    const running = w.run();
    shutdown.add(name, async () => {
      if (w.getState() === 'RUNNING') w.shutdown();
      await running;
    });
    running.then(
      () => {
        // Stopped without the process's shutdown: the SDK's runtime stops every worker on SIGQUIT
        // and SIGUSR2 too. Nothing would poll again while /healthz still answered, so the process
        // shuts down (the drain is done or under way) and exits as on SIGTERM.
        if (shutdown.stopping) return;
        logger.warn({ worker: name }, 'worker stopped by the Temporal SDK (a SIGQUIT or SIGUSR2): shutting down');
        void shutdown.run('worker stopped', 0);
      },
      (err) => {
        logger.error({ err, worker: name }, 'worker stopped unexpectedly');
        void shutdown.run('worker failed', 1);
      },
    );
  }
  const ensureReconcile = () =>
    ensureReconcileWorkflow(proc.temporal, config.TEMPORAL_TASK_QUEUE, config.SCHEDULER_TICK_SECONDS, config.RETENTION_DAYS);
  await ensureReconcile();
  keepReconcileRunning(proc, ensureReconcile, config.SCHEDULER_TICK_SECONDS * 1000);
  logger.info({ taskQueue: config.TEMPORAL_TASK_QUEUE, namespace: config.TEMPORAL_NAMESPACE, maxCachedWorkflows, targetCpu: config.WORKER_TARGET_CPU }, 'worker running');
  // Asked of the workers' own connection (the one their polls go over), at most once per period
  // however many probes come.
  const temporalCheck = singleFlight(() => temporalAnswers(connection), READINESS_CACHE_MS);
  return async () => workerReadiness({ worker, immediate: immediateWorker }, await temporalCheck());
}

/**
 * Every `everyMs` until shutdown, starts the reconcile tick when it is not running (terminated,
 * failed, or never started): the tick is every safety net (connection workflows, abandoned jobs,
 * stale tasks, retention), so it must not depend on a worker restart. A running tick is left alone
 * (conflict policy "use existing"), so any number of workers can do this at once. A failed
 * attempt is logged and tried again at the next period.
 */
function keepReconcileRunning(proc: Process, ensure: () => Promise<void>, everyMs: number): void {
  let inFlight: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (inFlight) return;
    inFlight = ensure()
      .catch((err: unknown) => proc.logger.warn({ err: (err as Error).message }, 'could not make sure the reconcile tick runs; trying again next period'))
      .finally(() => (inFlight = null));
  }, everyMs);
  timer.unref();
  proc.shutdown.add('reconcile-keeper', async () => {
    clearInterval(timer);
    await inFlight;
  });
}
