import type { LogLevel, LogMetadata, Logger as SdkLogger } from '@temporalio/common';
import { Runtime } from '@temporalio/worker';
import type { Logger } from '../lib/logger';
import { ephemeralPort } from '../lib/ports';

/** The Temporal SDK's Prometheus exporter of this process. */
export interface SdkMetrics {
  /** Where the exporter serves its text, on loopback only: it is read through our own /metrics. */
  url: string;
  /** The exporter's current text, or '' when it cannot be read (never fails a scrape). */
  scrape(): Promise<string>;
}

/**
 * The Temporal SDK metrics that deploy/grafana/synctide.json and deploy/prometheus/rules.yml read
 * (histograms in milliseconds, served as `<name>_bucket`, `_sum`, `_count`). The SDK registers
 * them itself, so test/faults/start.slow.test.ts checks each name in a real worker's scrape.
 */
export const SDK_METRICS_READ = [
  'temporal_worker_task_slots_available',
  'temporal_workflow_task_schedule_to_start_latency',
  'temporal_activity_schedule_to_start_latency',
  'temporal_workflow_task_execution_latency',
] as const;

/** A scrape of the SDK's exporter waits at most this long. */
const SCRAPE_TIMEOUT_MS = 2000;

/**
 * Installs the process's Temporal Runtime with the SDK's Prometheus exporter on 127.0.0.1:`port`
 * (default: a free port the OS picks), so worker metrics (`temporal_worker_task_slots_available`,
 * `temporal_workflow_task_execution_latency`, ...) can be served with the process's own.
 * Must run once per process, before any NativeConnection or Worker exists: the Runtime is a
 * process-wide singleton and `Runtime.install` throws once one was created. Durations are in
 * milliseconds and counters have no `_total` suffix: the SDK's defaults, which Temporal's own
 * dashboards for Core-based SDKs expect. `globalTags` are added to every SDK metric. With
 * `logger`, the SDK's own logs and the workflow and activity context loggers (`log` from
 * `@temporalio/workflow`, with workflowId, runId and workflowType) go to that pino logger.
 */
export async function installSdkMetrics(
  opts: { port?: number; globalTags?: Record<string, string>; logger?: Logger } = {},
): Promise<SdkMetrics> {
  // The exporter cannot report the port it bound, so port 0 is no option: the OS picks one first,
  // from the ephemeral range, apart from the ports test harnesses hand to servers they start.
  const port = opts.port ?? (await ephemeralPort());
  const bindAddress = `127.0.0.1:${port}`;
  Runtime.install({
    ...(opts.logger && { logger: sdkLogger(opts.logger) }),
    telemetryOptions: { metrics: { prometheus: { bindAddress }, ...(opts.globalTags && { globalTags: opts.globalTags }) } },
  });
  const url = `http://${bindAddress}/metrics`;
  return { url, scrape: () => scrapeText(url) };
}

/** GETs a Prometheus text endpoint; '' on any failure or after a short timeout. */
export async function scrapeText(url: string, timeoutMs = SCRAPE_TIMEOUT_MS): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return res.ok ? await res.text() : '';
  } catch {
    return '';
  }
}

const PINO_LEVEL = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;

/** The Temporal SDK's logger interface on top of a pino logger (its redaction applies). */
export function sdkLogger(logger: Logger): SdkLogger {
  const sdk = logger.child({ component: 'temporal-sdk' });
  const log = (level: LogLevel, message: string, meta?: LogMetadata) => sdk[PINO_LEVEL[level]](meta ?? {}, message);
  return {
    log,
    trace: (message, meta) => log('TRACE', message, meta),
    debug: (message, meta) => log('DEBUG', message, meta),
    info: (message, meta) => log('INFO', message, meta),
    warn: (message, meta) => log('WARN', message, meta),
    error: (message, meta) => log('ERROR', message, meta),
  };
}
