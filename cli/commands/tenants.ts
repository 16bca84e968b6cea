// tenants keys list/create/revoke, tenants limits show/set (admin key only).
import type { components } from '../../clients/typescript';
import { answer } from '../api';
import { list, str, type Command, type FlagValues } from '../command';
import { usage } from '../errors';
import { emit, fields, num, table, when } from '../output';

type Limits = components['schemas']['TenantLimits'];
type LimitName = keyof Limits['limits'];

/** Each limit's flag: `--max-connections` sets `max_connections`. */
const LIMIT_FLAGS: Record<string, LimitName> = {
  'max-connections': 'max_connections',
  'max-webhooks': 'max_webhooks',
  'max-immediate-syncs': 'max_immediate_syncs',
  'max-running-jobs': 'max_running_jobs',
  'max-redeliveries-per-hour': 'max_redeliveries_per_hour',
  'max-oauth-apps': 'max_oauth_apps',
};

const USAGE_OF: Record<LimitName, keyof Limits['usage']> = {
  max_connections: 'connections',
  max_webhooks: 'webhooks',
  max_immediate_syncs: 'immediate_syncs',
  max_running_jobs: 'running_jobs',
  max_redeliveries_per_hour: 'redeliveries_last_hour',
  max_oauth_apps: 'oauth_apps',
};

const limitRows = (l: Limits) =>
  table(
    ['LIMIT', 'VALUE', 'OVERRIDE', 'IN USE'],
    (Object.keys(l.limits) as LimitName[]).map((k) => [k, num(l.limits[k]), l.overrides[k] === null ? '-' : num(l.overrides[k]), num(l.usage[USAGE_OF[k]])]),
  );

/** The limit changes the flags name: a number, or `default` (null: back to the deployment's value). */
function limitChanges(flags: FlagValues): components['schemas']['TenantLimitsChange'] {
  const change: Record<string, number | null> = {};
  for (const [flag, field] of Object.entries(LIMIT_FLAGS)) {
    const v = str(flags, flag);
    if (v === undefined) continue;
    if (v === 'default') change[field] = null;
    else if (/^\d+$/.test(v)) change[field] = Number(v);
    else throw usage(`--${flag} must be a whole number or "default"`);
  }
  if (Object.keys(change).length === 0) throw usage(`name at least one limit: ${Object.keys(LIMIT_FLAGS).map((f) => `--${f}`).join(', ')}`);
  return change;
}

export const tenantCommands: Command[] = [
  {
    words: ['tenants', 'keys', 'list'],
    summary: "A tenant's API keys, revoked ones included (never their secrets)",
    args: ['<tenant-id>'],
    async run({ client, settings, out }, _flags, [tenant]) {
      const keys = await answer(settings.url, client.GET('/tenants/{tenant_id}/api-keys', { params: { path: { tenant_id: tenant! } } }));
      emit(out, keys, () =>
        table(
          ['ID', 'NAME', 'PREFIX', 'SCOPES', 'CREATED', 'LAST USED', 'REVOKED'],
          keys.items.map((k) => [k.id, k.name ?? '-', k.prefix, k.scopes.join(','), when(k.created_at), when(k.last_used_at), when(k.revoked_at)]),
          'No keys.',
        ),
      );
    },
  },
  {
    words: ['tenants', 'keys', 'create'],
    summary: 'Create a tenant API key (its secret is printed once)',
    args: ['<tenant-id>'],
    flags: {
      name: { type: 'string', value: '<name>', description: 'A name to know it by' },
      scope: { type: 'string', multiple: true, value: '<scope>', description: 'read or write (repeatable; default both)' },
    },
    async run({ client, settings, out }, flags, [tenant]) {
      const scopes = list(flags, 'scope') as ('read' | 'write')[];
      const key = await answer(
        settings.url,
        client.POST('/tenants/{tenant_id}/api-keys', { params: { path: { tenant_id: tenant! } }, body: { ...(str(flags, 'name') && { name: str(flags, 'name') }), ...(scopes.length > 0 && { scopes }) } }),
      );
      emit(out, key, () => [`Created key ${key.id} for tenant ${key.tenant_id} (${key.scopes.join(', ')})`, `Secret (shown once): ${key.secret}`]);
    },
  },
  {
    words: ['tenants', 'keys', 'revoke'],
    summary: 'Revoke a tenant API key at once',
    args: ['<tenant-id>', '<key-id>'],
    async run({ client, settings, out }, _flags, [tenant, keyId]) {
      const key = await answer(settings.url, client.DELETE('/tenants/{tenant_id}/api-keys/{key_id}', { params: { path: { tenant_id: tenant!, key_id: keyId! } } }));
      emit(out, key, () => `Revoked key ${key.id} (${key.prefix}…) of tenant ${key.tenant_id}.`);
    },
  },
  {
    words: ['tenants', 'limits', 'show'],
    summary: "A tenant's limits: the values that apply, its overrides and its usage",
    args: ['<tenant-id>'],
    async run({ client, settings, out }, _flags, [tenant]) {
      const limits = await answer(settings.url, client.GET('/tenants/{tenant_id}/limits', { params: { path: { tenant_id: tenant! } } }));
      emit(out, limits, () => [...fields([['tenant', limits.tenant_id]]), ...limitRows(limits)]);
    },
  },
  {
    words: ['tenants', 'limits', 'set'],
    summary: 'Override limits of a tenant (a number, or "default" to drop the override)',
    args: ['<tenant-id>'],
    flags: Object.fromEntries(Object.entries(LIMIT_FLAGS).map(([flag, field]) => [flag, { type: 'string' as const, value: '<n|default>', description: `Set ${field}` }])),
    async run({ client, settings, out }, flags, [tenant]) {
      const body = limitChanges(flags);
      const limits = await answer(settings.url, client.PATCH('/tenants/{tenant_id}/limits', { params: { path: { tenant_id: tenant! } }, body }));
      emit(out, limits, () => [...fields([['tenant', limits.tenant_id]]), ...limitRows(limits)]);
    },
  },
];
