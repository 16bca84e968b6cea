// sync, jobs list/show/cancel/wait.
import { answer } from '../api';
import { list, pages, PAGING, seconds, str, type Command, type Context, type FlagValues } from '../command';
import { EXIT, type ExitCode } from '../errors';
import { emit, fields, note, notice, num, table, when } from '../output';
import { renderLine, watchJob, type Job } from '../progress';

const POLL: Command['flags'] = {
  poll: { type: 'string', value: '<seconds>', description: 'How often to read the job while waiting (default 1)' },
};

/** A finished job in one line: `completed: 40 records (40 added, …) in 2.1s`. */
export function summarize(job: Job): string {
  const c = job.counts;
  const took = job.started_at && job.finished_at ? ` in ${((Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000).toFixed(1)}s` : '';
  const error = job.error ? `: ${job.error.message}` : '';
  return `Job ${job.id} ${job.status}${error}: ${num(job.processed_entities)} records (${num(c.added)} added, ${num(c.updated)} updated, ${num(c.deleted)} deleted, ${num(c.unchanged)} unchanged)${took}.`;
}

/** The --poll interval in milliseconds; read before any request, so a bad value changes nothing. */
const pollMs = (flags: FlagValues): number => seconds(flags, 'poll', 1000);

/**
 * Waits for the job, reading it every `intervalMs`, prints it finished; exit 7 unless it completed.
 * `reached`: the API already answered this command (sync's request), so even the first poll that
 * reaches no API is made again.
 */
async function waitAndReport(ctx: Context, jobId: string, intervalMs: number, reached = false): Promise<ExitCode> {
  let job: Job;
  try {
    job = await watchJob(ctx.client, ctx.settings.url, ctx.out, jobId, intervalMs, ctx.signal, reached, ctx.settings.retryWaitMs);
  } catch (err) {
    if (ctx.signal.aborted) {
      notice(ctx.out, { stopped: { job_id: jobId, message: `stopped waiting; job ${jobId} goes on (synctide jobs show ${jobId})` } }, () => `\nStopped waiting; job ${jobId} goes on (synctide jobs show ${jobId}).`);
      return EXIT.interrupted;
    }
    throw err;
  }
  emit(ctx.out, job, () => summarize(job));
  return job.status === 'completed' ? EXIT.ok : EXIT.jobFailed;
}

const jobRows = (items: Job[]) =>
  table(
    ['ID', 'CONNECTION', 'TYPE', 'TRIGGER', 'STATUS', 'PROGRESS', 'RECORDS', 'CREATED'],
    items.map((j) => [j.id, j.connection_id, j.job_type, j.trigger, j.status, `${Math.round(j.progress_percentage)}%`, num(j.processed_entities), when(j.created_at)]),
    'No jobs.',
  );

export const jobCommands: Command[] = [
  {
    words: ['sync'],
    summary: 'Sync a connection now and follow the job to its end (a progress bar on a terminal)',
    args: ['<connection-id>'],
    flags: {
      full: { type: 'boolean', description: 'A full sync (every record fetched, deletions detected); default incremental' },
      resource: { type: 'string', multiple: true, value: '<type>', description: 'Only this resource type (repeatable)' },
      detach: { type: 'boolean', description: 'Print the job and exit without waiting' },
      ...POLL,
    },
    async run(ctx, flags, [id]) {
      const resources = list(flags, 'resource');
      const intervalMs = pollMs(flags);
      const accepted = await answer(
        ctx.settings.url,
        ctx.client.POST('/connections/{id}/sync', {
          params: { path: { id: id! } },
          body: { mode: flags.full ? 'full' : 'incremental', ...(resources.length > 0 && { resource_types: resources }) },
        }),
      );
      if (flags.detach) {
        emit(ctx.out, accepted, () => `Job ${accepted.job_id} ${accepted.status} (${accepted.mode}, ${accepted.resource_types.join(', ')}).`);
        return;
      }
      if (!ctx.out.json) note(ctx.out, `Job ${accepted.job_id} (${accepted.mode}: ${accepted.resource_types.join(', ')})`);
      return waitAndReport(ctx, accepted.job_id, intervalMs, true);
    },
  },
  {
    words: ['jobs', 'list'],
    summary: 'List jobs, newest first',
    flags: {
      connection: { type: 'string', value: '<connection-id>', description: 'Only this connection' },
      tenant: { type: 'string', value: '<tenant-id>', description: 'Only this tenant' },
      status: { type: 'string', value: '<status>', description: 'queued, running, retrying, completed, failed or cancelled' },
      type: { type: 'string', value: '<type>', description: 'incremental or full' },
      trigger: { type: 'string', value: '<trigger>', description: 'schedule, manual, api or backfill' },
      ...PAGING,
    },
    async run({ client, settings, out }, flags) {
      const query = {
        connection_id: str(flags, 'connection'),
        tenant_id: str(flags, 'tenant'),
        status: str(flags, 'status') as Job['status'] | undefined,
        job_type: str(flags, 'type') as Job['job_type'] | undefined,
        trigger: str(flags, 'trigger') as Job['trigger'] | undefined,
      };
      const page = await pages(flags, (q) => answer(settings.url, client.GET('/jobs', { params: { query: { ...query, ...q } } })));
      emit(out, page, () => [...jobRows(page.items), ...(page.next_cursor ? [`(more: --cursor ${page.next_cursor}, or --all)`] : [])]);
    },
  },
  {
    words: ['jobs', 'show'],
    summary: 'A job: status, progress, counts and (with --tasks) each resource task',
    args: ['<job-id>'],
    flags: { tasks: { type: 'boolean', description: 'Include the per-resource tasks' } },
    async run({ client, settings, out }, flags, [id]) {
      const job = await answer(settings.url, client.GET('/jobs/{id}', { params: { path: { id: id! }, query: { include_tasks: flags.tasks ? 'true' : 'false' } } }));
      emit(out, job, () => [
        ...fields([
          ['id', job.id],
          ['connection', job.connection_id],
          ['tenant', job.tenant_id],
          ['type', `${job.job_type} (${job.trigger})`],
          ['status', job.status],
          ['progress', renderLine(job).replace(/^job \S+ \S+: /, '')],
          ['counts', `${num(job.counts.added)} added, ${num(job.counts.updated)} updated, ${num(job.counts.deleted)} deleted, ${num(job.counts.unchanged)} unchanged`],
          ['retries', `${job.retry_count}/${job.max_retries}`],
          ['error', job.error?.message ?? null],
          ['created', when(job.created_at)],
          ['started', when(job.started_at)],
          ['finished', when(job.finished_at)],
        ]),
        ...(job.tasks
          ? ['', ...table(['RESOURCE', 'STATUS', 'RECORDS', 'DELETED', 'ERROR'], job.tasks.map((t) => [t.resource_type, t.status, num(t.entity_count), num(t.deleted_count), t.error_message ?? '']), 'No tasks yet.')]
          : []),
      ]);
    },
  },
  {
    words: ['jobs', 'cancel'],
    summary: 'Cancel a queued, running or waiting job',
    args: ['<job-id>'],
    async run({ client, settings, out }, _flags, [id]) {
      const cancelled = await answer(settings.url, client.POST('/jobs/{id}/cancel', { params: { path: { id: id! } } }));
      emit(out, cancelled, () => `Job ${cancelled.job_id}: ${cancelled.cancel_requested ? 'cancel requested' : cancelled.status}.`);
    },
  },
  {
    words: ['jobs', 'wait'],
    summary: 'Follow a job to its end (exit 7 unless it completed)',
    args: ['<job-id>'],
    flags: { ...POLL },
    run: (ctx, flags, [id]) => waitAndReport(ctx, id!, pollMs(flags)),
  },
];
