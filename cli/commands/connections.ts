// connections list/show/create/pause/resume/disable/delete.
import type { components } from '../../clients/typescript';
import { answer } from '../api';
import { int, jsonFlag, pages, PAGING, required, str, type Command } from '../command';
import { usage } from '../errors';
import { emit, fields, table, when } from '../output';

type Connection = components['schemas']['Connection'];
type Schedule = components['schemas']['Schedule'];

/** A schedule as people read it: `every 3600s`, `cron 0 * * * * (UTC)`. */
export function describeSchedule(s: Connection['schedule']): string {
  const parts: string[] = [];
  if (s.interval_seconds !== undefined) parts.push(`every ${s.interval_seconds}s`);
  if (s.cron !== undefined) parts.push(`cron ${s.cron} (${s.timezone ?? 'UTC'})`);
  if (s.full_sync_every !== undefined) parts.push(`full every ${s.full_sync_every}`);
  return parts.join(', ') || '-';
}

const connectionRows = (items: Connection[]) =>
  table(
    ['ID', 'TENANT', 'APP KEY', 'PROVIDER', 'STATUS', 'SCHEDULE'],
    items.map((c) => [c.id, c.tenant_id, c.app_key, c.provider, c.status, describeSchedule(c.schedule)]),
    'No connections.',
  );

const statusCommand = (action: 'pause' | 'resume' | 'disable', summary: string, done: string): Command => ({
  words: ['connections', action],
  summary,
  args: ['<connection-id>'],
  async run({ client, settings, out }, _flags, [id]) {
    const path = `/connections/{id}/${action}` as const;
    const changed = await answer(settings.url, client.POST(path, { params: { path: { id: id! } } }));
    emit(out, changed, () => `${done} connection ${changed.id} (status ${changed.status}).`);
  },
});

export const connectionCommands: Command[] = [
  {
    words: ['connections', 'list'],
    summary: 'List connections',
    flags: {
      tenant: { type: 'string', value: '<tenant-id>', description: 'Only this tenant (a tenant key sees its own only)' },
      provider: { type: 'string', value: '<slug>', description: 'Only this provider (github, http, demo)' },
      status: { type: 'string', value: '<status>', description: 'Only this status (active, paused, disabled, needs_reauth)' },
      ...PAGING,
    },
    async run({ client, settings, out }, flags) {
      const status = str(flags, 'status') as Connection['status'] | undefined;
      const page = await pages(flags, (q) =>
        answer(settings.url, client.GET('/connections', { params: { query: { ...q, tenant_id: str(flags, 'tenant'), provider: str(flags, 'provider'), status } } })),
      );
      emit(out, page, () => [...connectionRows(page.items), ...(page.next_cursor ? [`(more: --cursor ${page.next_cursor}, or --all)`] : [])]);
    },
  },
  {
    words: ['connections', 'show'],
    summary: "A connection with its workflow's live state and breaker",
    args: ['<connection-id>'],
    async run({ client, settings, out }, _flags, [id]) {
      const c = await answer(settings.url, client.GET('/connections/{id}', { params: { path: { id: id! } } }));
      emit(out, c, () =>
        fields([
          ['id', c.id],
          ['tenant', c.tenant_id],
          ['app key', c.app_key],
          ['provider', c.provider],
          ['status', c.status],
          ['schedule', describeSchedule(c.schedule)],
          ['credentials', c.has_credentials ? c.credential_kind : 'none'],
          ['workflow', c.workflow_id],
          ['phase', c.live?.phase ?? 'not running'],
          ['next run', when(c.live?.next_run_at)],
          ['current job', c.live?.current_job_id ?? '-'],
          ['last outcome', c.live?.last_outcome ?? '-'],
          ['breaker', c.breaker.open ? `open until ${when(c.breaker.paused_until)} (${c.breaker.consecutive_failures} failures)` : 'closed'],
          ['created', when(c.created_at)],
        ]),
      );
    },
  },
  {
    words: ['connections', 'create'],
    summary: 'Create a connection (its workflow starts and runs the first sync at once unless --paused)',
    flags: {
      tenant: { type: 'string', value: '<tenant-id>', description: 'The tenant (required)' },
      'app-key': { type: 'string', value: '<key>', description: "The tenant's name for this app instance (required)" },
      provider: { type: 'string', value: '<slug>', description: 'github, http or demo (required)' },
      'provider-config': { type: 'string', value: '<json|@file>', description: "The provider's config as JSON, or @file (--config names the CLI's own config file)" },
      credentials: { type: 'string', value: '<json|@file|->', description: 'Credentials as JSON, @file, or - for stdin (e.g. {"token": "…"})' },
      interval: { type: 'string', value: '<seconds>', description: 'Run every N seconds' },
      cron: { type: 'string', value: '<expr>', description: 'Run on a 5-field cron expression instead' },
      timezone: { type: 'string', value: '<iana>', description: "The cron's time zone (default UTC)" },
      'full-sync-every': { type: 'string', value: '<n|duration>', description: 'Make a scheduled run a full sync every N runs or after a duration (12h, 7d)' },
      paused: { type: 'boolean', description: 'Create it paused (no sync until resumed)' },
    },
    async run({ client, settings, out, signal }, flags) {
      const schedule: Record<string, unknown> = {};
      const interval = int(flags, 'interval', 1);
      if (interval !== undefined) schedule.interval_seconds = interval;
      if (str(flags, 'cron')) schedule.cron = str(flags, 'cron');
      if (str(flags, 'timezone')) schedule.timezone = str(flags, 'timezone');
      const every = str(flags, 'full-sync-every');
      if (every !== undefined) schedule.full_sync_every = /^\d+$/.test(every) ? Number(every) : every;
      const config = await jsonFlag(flags, 'provider-config', signal);
      if (config !== undefined && (typeof config !== 'object' || config === null || Array.isArray(config))) throw usage('--provider-config must be a JSON object');
      const credentials = await jsonFlag(flags, 'credentials', signal);
      const body = {
        tenant_id: required(flags, 'tenant'),
        app_key: required(flags, 'app-key'),
        provider: required(flags, 'provider'),
        ...(config !== undefined && { config }),
        ...(credentials !== undefined && { credentials }),
        ...(Object.keys(schedule).length > 0 && { schedule: schedule as Schedule }),
        ...(flags.paused === true && { status: 'paused' as const }),
      } as components['schemas']['CreateConnection'];
      const c = await answer(settings.url, client.POST('/connections', { body }));
      emit(out, c, () => [
        `Created connection ${c.id}`,
        ...fields([['tenant', c.tenant_id], ['app key', c.app_key], ['provider', c.provider], ['status', c.status], ['schedule', describeSchedule(c.schedule)]]).map((l) => `  ${l}`),
      ]);
    },
  },
  statusCommand('pause', 'Pause scheduling (a running job finishes; a queued one is cancelled)', 'Paused'),
  statusCommand('resume', 'Resume scheduling (also re-enables a disabled connection)', 'Resumed'),
  statusCommand('disable', 'Stop the workflow and its jobs; keep the data', 'Disabled'),
  {
    words: ['connections', 'delete'],
    summary: 'Delete a connection and purge all of its data',
    args: ['<connection-id>'],
    async run({ client, settings, out }, _flags, [id]) {
      const purge = await answer(settings.url, client.DELETE('/connections/{id}', { params: { path: { id: id! } } }));
      emit(out, purge, () => `Deleting connection ${purge.connection_id}: purge ${purge.id} ${purge.status}.`);
    },
  },
];
