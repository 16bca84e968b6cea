import type { Client } from '@temporalio/client';
import type { RateLimitSettings } from '../activities/deps';
import { NativeConnection } from '@temporalio/worker';
import type { Pool } from '../db/pool';
import { scheduleSettings, type Config } from '../lib/config';
import { ensureReconcileWorkflow } from '../lib/connection-workflows';
import type { Logger } from '../lib/logger';
import type { SyncMetrics } from '../lib/metrics';
import type { Shutdown } from '../lib/shutdown';
import { createWorker } from './create-worker';

/**
 * Connects and runs the Synctide worker until shutdown, and makes sure the reconcile tick runs.
 * On shutdown it stops polling, lets in-flight activities finish their transaction within
 * WORKER_SHUTDOWN_GRACE_SECONDS (then cancels them through their heartbeats), and resolves.
 */
export async function runWorker(opts: {
  config: Config;
  address: string;
  pool: Pool;
  temporal: Client;
  /** The process's metrics (one set per registry; the API of `npm start` shares it). */
  metrics: SyncMetrics;
  logger: Logger;
  shutdown: Shutdown;
  rateLimit: RateLimitSettings;
}): Promise<void> {
  const { config, logger, shutdown } = opts;
  const bundlePath = config.WORKFLOW_BUNDLE_PATH;
  const connection = await NativeConnection.connect({ address: opts.address });
  shutdown.add('worker-connection', () => connection.close());
  const worker = await createWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    shutdownGraceSeconds: config.WORKER_SHUTDOWN_GRACE_SECONDS,
    ...(bundlePath && { workflowBundle: { codePath: bundlePath } }),
    activities: {
      pool: opts.pool,
      logger,
      metrics: opts.metrics,
      temporal: opts.temporal,
      taskQueue: config.TEMPORAL_TASK_QUEUE,
      settings: scheduleSettings(config),
      rateLimit: opts.rateLimit,
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
  await ensureReconcileWorkflow(opts.temporal, config.TEMPORAL_TASK_QUEUE, config.SCHEDULER_TICK_SECONDS, config.RETENTION_DAYS);
  logger.info({ taskQueue: config.TEMPORAL_TASK_QUEUE, namespace: config.TEMPORAL_NAMESPACE }, 'worker running');
}
