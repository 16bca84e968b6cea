import { NativeConnection } from '@temporalio/worker';
import type { RateLimitSettings } from '../activities/deps';
import type { Process } from '../infra/boot';
import type { BudgetSettings } from '../policy/rate-budget';
import { scheduleSettings } from '../lib/config';
import { ensureReconcileWorkflow } from '../temporal/client';
import { createWorker } from './create-worker';

/**
 * Connects and runs the Synctide worker of a booted process until shutdown, and makes sure the
 * reconcile tick runs. On shutdown it stops polling, lets in-flight activities finish their
 * transaction within WORKER_SHUTDOWN_GRACE_SECONDS (then cancels them through their heartbeats),
 * and resolves.
 */
export async function runWorker(proc: Process, rateLimit: RateLimitSettings, rateBudget?: BudgetSettings): Promise<void> {
  const { config, logger, shutdown } = proc;
  const bundlePath = config.WORKFLOW_BUNDLE_PATH;
  const connection = await NativeConnection.connect({ address: proc.temporalAddress });
  shutdown.add('worker-connection', () => connection.close());
  const worker = await createWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    shutdownGraceSeconds: config.WORKER_SHUTDOWN_GRACE_SECONDS,
    maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
    ...(bundlePath && { workflowBundle: { codePath: bundlePath } }),
    activities: {
      pool: proc.pool,
      logger,
      metrics: proc.metrics,
      temporal: proc.temporal,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      settings: scheduleSettings(config),
      rateLimit,
      reconcile: { tickSeconds: config.SCHEDULER_TICK_SECONDS, retentionDays: config.RETENTION_DAYS },
      tombstoneRetentionDays: config.TOMBSTONE_RETENTION_DAYS,
      webhooks: { allowPrivate: config.WEBHOOK_ALLOW_PRIVATE },
      connectors: { maxPagesPerTask: config.MAX_PAGES_PER_TASK, ...(rateBudget && { rateBudget }) },
    },
  });
  const running = worker.run();
  shutdown.add('worker', async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
  });
  running.catch((err) => {
    logger.error({ err }, 'worker stopped unexpectedly');
    void shutdown.run('worker failed', 1);
  });
  await ensureReconcileWorkflow(proc.temporal, config.TEMPORAL_TASK_QUEUE, config.SCHEDULER_TICK_SECONDS, config.RETENTION_DAYS);
  logger.info({ taskQueue: config.TEMPORAL_TASK_QUEUE, namespace: config.TEMPORAL_NAMESPACE }, 'worker running');
}
