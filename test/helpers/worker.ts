import { Writable } from 'node:stream';
import type { Client } from '@temporalio/client';
import type { NativeConnection, WorkflowBundle } from '@temporalio/worker';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { Pool } from '../../db/pool';
import { createSyncMetrics } from '../../lib/metrics';
import { DEFAULT_SCHEDULE_SETTINGS, type ScheduleSettings } from '../../policy/schedule';
import { createWorker, WORKFLOWS_PATH } from '../../workers/create-worker';
import type { RateLimitSettings } from '../../activities/deps';
import { DEFAULT_RATE_LIMIT_SETTINGS } from './deps';
import { bundleWorkflows } from './temporal';

/** Log lines captured from a test worker, parsed. */
export type LogLines = Record<string, unknown>[];

/** A pino logger that keeps its JSON lines in memory for assertions. */
export function capturingLogger() {
  const lines: LogLines = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

let bundle: Promise<WorkflowBundle> | undefined;
/** The real Synctide workflows, bundled once per test file. */
export function synctideBundle(): Promise<WorkflowBundle> {
  bundle ??= bundleWorkflows(WORKFLOWS_PATH);
  return bundle;
}

/** Creates a Synctide worker on a test environment with the real activities. */
export async function createTestWorker(opts: {
  connection: NativeConnection;
  client: Client;
  pool: Pool;
  taskQueue: string;
  settings?: Partial<ScheduleSettings>;
  rateLimit?: RateLimitSettings;
}) {
  const { logger, lines } = capturingLogger();
  const registry = new Registry();
  const worker = await createWorker({
    connection: opts.connection,
    namespace: 'default',
    shutdownGraceSeconds: 5,
    workflowBundle: await synctideBundle(),
    activities: {
      pool: opts.pool,
      logger,
      metrics: createSyncMetrics(registry),
      temporal: opts.client,
      taskQueue: opts.taskQueue,
      settings: { ...DEFAULT_SCHEDULE_SETTINGS, ...opts.settings },
      rateLimit: opts.rateLimit ?? DEFAULT_RATE_LIMIT_SETTINGS,
    },
  });
  return { worker, lines, registry };
}

/**
 * Polls `check` until it returns a value other than undefined. Gives up after `timeoutMs` (real
 * time, well inside the test timeout) with `describe()` in the message, so a stuck test says
 * where it stuck instead of polling on after its timeout.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  opts: { timeoutMs?: number; describe?: () => Promise<unknown> } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 45_000);
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      const last = opts.describe ? JSON.stringify(await opts.describe().catch((e) => String(e))) : '';
      throw new Error(`condition not met within ${opts.timeoutMs ?? 45_000} ms ${last}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
