import { NativeConnection } from '@temporalio/worker';
import type { Pool } from '../db/pool';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/logger';
import type { Shutdown } from '../lib/shutdown';
import { createWorker } from './create-worker';

/**
 * Connects and runs the Synctide worker until shutdown. On shutdown it stops polling, lets
 * in-flight activities finish their transaction within WORKER_SHUTDOWN_GRACE_SECONDS, then exits.
 */
export async function runWorker(opts: {
  config: Config;
  address: string;
  pool: Pool;
  logger: Logger;
  shutdown: Shutdown;
}): Promise<void> {
  const { config, logger, shutdown } = opts;
  const connection = await NativeConnection.connect({ address: opts.address });
  shutdown.add('worker-connection', () => connection.close());
  const worker = await createWorker({
    connection,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: config.TEMPORAL_TASK_QUEUE,
    pool: opts.pool,
    logger,
    shutdownGraceSeconds: config.WORKER_SHUTDOWN_GRACE_SECONDS,
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
  logger.info({ taskQueue: config.TEMPORAL_TASK_QUEUE, namespace: config.TEMPORAL_NAMESPACE }, 'worker running');
}
