// Following a job to its end by polling GET /jobs/{id}: a bar redrawn in place on a terminal, one
// plain line per change otherwise (CI logs, pipes), no progress with `--json` (only a read made
// again, as a JSON object). Progress goes to stderr; the caller prints the finished job.
import { setTimeout as sleep } from 'node:timers/promises';
import type { components } from '../clients/typescript';
import { answer, type SynctideClient } from './api';
import { errorJson, MAX_RETRIED_POLLS, MIN_RETRY_WAIT_MS, retriedRead, retryWaitMs } from './errors';
import { notice, num, type Output } from './output';

export type Job = components['schemas']['Job'];

const FINISHED: ReadonlySet<Job['status']> = new Set(['completed', 'failed', 'cancelled']);

/** True when the job will change no more. */
export const isFinished = (job: Pick<Job, 'status'>) => FINISHED.has(job.status);

/** The bar of `job`, `width` cells wide: `[######......]  50%  1/2 tasks  1,234 records  running`. */
export function renderBar(job: Pick<Job, 'progress_percentage' | 'completed_tasks' | 'failed_tasks' | 'total_tasks' | 'processed_entities' | 'status'>, width = 30): string {
  const pct = Math.max(0, Math.min(100, Math.round(job.progress_percentage)));
  const filled = Math.round((pct / 100) * width);
  const failed = job.failed_tasks > 0 ? ` (${job.failed_tasks} failed)` : '';
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${String(pct).padStart(3)}%  ${job.completed_tasks}/${job.total_tasks} tasks${failed}  ${num(job.processed_entities)} records  ${job.status}`;
}

/** The plain progress line of `job` (no bar), as written when stderr is not a terminal. */
export function renderLine(job: Job): string {
  const failed = job.failed_tasks > 0 ? `, ${job.failed_tasks} failed` : '';
  return `job ${job.id} ${job.status}: ${Math.round(job.progress_percentage)}% (${job.completed_tasks}/${job.total_tasks} tasks${failed}, ${num(job.processed_entities)} records)`;
}

/**
 * Polls the job every `intervalMs` until it finishes; answers the finished job. A poll answered
 * with a status that asks to be tried again, or that reached no API (refused, reset, a name not
 * resolved) once the API has answered this command (`reached`: true when the command's request
 * before the wait was answered), is made again (at most MAX_RETRIED_POLLS times in a row, waiting
 * `max(intervalMs, retryLeastMs)` times the count, said on stderr: a line, or with --json a `retry` object); any other failure ends
 * the wait. `retryLeastMs`: 1 s unless SYNCTIDE_RETRY_WAIT_MS sets another (Settings.retryWaitMs).
 */
export async function watchJob(
  client: SynctideClient,
  baseUrl: string,
  out: Output,
  jobId: string,
  intervalMs: number,
  signal?: AbortSignal,
  reached = false,
  retryLeastMs = MIN_RETRY_WAIT_MS,
): Promise<Job> {
  const tty = !out.json && out.stderr.isTTY === true;
  let last = '';
  let retried = 0;
  let answered = reached;
  for (;;) {
    let job: Job;
    try {
      job = await answer(baseUrl, client.GET('/jobs/{id}', { params: { path: { id: jobId } } }));
      retried = 0;
      answered = true;
    } catch (err) {
      if (!retriedRead(err, answered) || retried >= MAX_RETRIED_POLLS) throw err;
      retried++;
      const waitMs = retryWaitMs(intervalMs, retried, retryLeastMs);
      notice(
        out,
        { retry: { reading: 'job', job_id: jobId, attempt: retried, max_attempts: MAX_RETRIED_POLLS, wait_ms: waitMs, error: errorJson(err) } },
        () => `${tty ? '\n' : ''}${err.message}; reading job ${jobId} again (${retried}/${MAX_RETRIED_POLLS})`,
      );
      await sleep(waitMs, undefined, { signal });
      continue;
    }
    if (!out.json) {
      if (tty) {
        const width = Math.max(10, Math.min(40, (out.stderr.columns ?? 80) - 60));
        out.stderr.write(`\r\x1b[2K${renderBar(job, width)}`);
        if (isFinished(job)) out.stderr.write('\n');
      } else {
        const line = renderLine(job);
        if (line !== last) out.stderr.write(`${line}\n`);
        last = line;
      }
    }
    if (isFinished(job)) return job;
    await sleep(intervalMs, undefined, { signal });
  }
}
