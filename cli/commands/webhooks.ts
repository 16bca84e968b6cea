// webhooks create/list/show/enable/disable/delete/rotate-secret/deliveries/redeliver.
import type { components } from '../../clients/typescript';
import { answer } from '../api';
import { int, list, pages, PAGING, required, str, type Command } from '../command';
import { usage } from '../errors';
import { emit, fields, table, when } from '../output';

type EventType = components['schemas']['Webhook']['event_types'][number];

// The CLI imports nothing but the typed client, which carries the event types as a type only: the
// record's keys are held to that type both ways, so a type the document adds fails typecheck here.
const EVENT_TYPE_KEYS: Record<EventType, true> = {
  'sync.completed': true,
  'sync.failed': true,
  'sync.cancelled': true,
  'connection.breaker_opened': true,
  'connection.breaker_closed': true,
  'connection.disabled': true,
  'connection.credentials_invalid': true,
};

/** Every event type a webhook can subscribe to, as the document lists them. */
export const EVENT_TYPES = Object.keys(EVENT_TYPE_KEYS) as readonly EventType[];

/** When and why a webhook is disabled, or 'no'. */
function disabled(w: Pick<components['schemas']['Webhook'], 'disabled_at' | 'disabled_reason'>): string {
  return w.disabled_at === null ? 'no' : `since ${when(w.disabled_at)} (${w.disabled_reason ?? ''})`;
}

export const webhookCommands: Command[] = [
  {
    words: ['webhooks', 'create'],
    summary: "Subscribe an endpoint to a tenant's events (the signing secret is printed once)",
    flags: {
      tenant: { type: 'string', value: '<tenant-id>', description: 'The tenant (required)' },
      endpoint: { type: 'string', value: '<https-url>', description: 'Where deliveries are POSTed (required; --url names the API)' },
      event: { type: 'string', multiple: true, value: '<type>', description: `An event type (repeatable, or comma-separated; "all" for every one): ${EVENT_TYPES.join(', ')}` },
    },
    async run({ client, settings, out }, flags) {
      const events = list(flags, 'event');
      if (events.length === 0) throw usage('--event is required (one or more event types, or "all")');
      const eventTypes = events.includes('all') ? [...EVENT_TYPES] : (events as EventType[]);
      const created = await answer(settings.url, client.POST('/webhooks', { body: { tenant_id: required(flags, 'tenant'), url: required(flags, 'endpoint'), event_types: eventTypes } }));
      emit(out, created, () => [
        `Created webhook ${created.id}`,
        ...fields([['tenant', created.tenant_id], ['url', created.url], ['events', created.event_types.join(', ')]]).map((l) => `  ${l}`),
        `Signing secret (shown once; verify deliveries with a Standard Webhooks library): ${created.secret}`,
      ]);
    },
  },
  {
    words: ['webhooks', 'list'],
    summary: 'List webhooks (never their secrets)',
    flags: { tenant: { type: 'string', value: '<tenant-id>', description: 'Only this tenant' }, ...PAGING },
    async run({ client, settings, out }, flags) {
      const page = await pages(flags, (q) => answer(settings.url, client.GET('/webhooks', { params: { query: { ...q, tenant_id: str(flags, 'tenant') } } })));
      emit(out, page, () => [
        ...table(
          ['ID', 'TENANT', 'URL', 'EVENTS', 'STATE', 'CREATED'],
          page.items.map((w) => [w.id, w.tenant_id, w.url, w.event_types.join(','), w.disabled_at === null ? 'enabled' : 'disabled', when(w.created_at)]),
          'No webhooks.',
        ),
        ...(page.next_cursor ? [`(more: --cursor ${page.next_cursor}, or --all)`] : []),
      ]);
    },
  },
  {
    words: ['webhooks', 'show'],
    summary: 'One webhook',
    args: ['<webhook-id>'],
    async run({ client, settings, out }, _flags, [id]) {
      const w = await answer(settings.url, client.GET('/webhooks/{id}', { params: { path: { id: id! } } }));
      emit(out, w, () => fields([['id', w.id], ['tenant', w.tenant_id], ['url', w.url], ['events', w.event_types.join(', ')], ['created', when(w.created_at)], ['disabled', disabled(w)]]));
    },
  },
  ...(['enable', 'disable'] as const).map(
    (action): Command => ({
      words: ['webhooks', action],
      summary:
        action === 'enable'
          ? 'Enable a disabled webhook again (its failed deliveries may then be redelivered)'
          : 'Disable a webhook: no new event is delivered to it, its pending deliveries end failed unsent',
      args: ['<webhook-id>'],
      async run({ client, settings, out }, _flags, [id]) {
        const w = await answer(settings.url, client.PATCH('/webhooks/{id}', { params: { path: { id: id! } }, body: { enabled: action === 'enable' } }));
        emit(out, w, () => (w.disabled_at === null ? `Webhook ${w.id} is enabled.` : `Webhook ${w.id} is disabled: ${disabled(w)}`));
      },
    }),
  ),
  {
    words: ['webhooks', 'delete'],
    summary: 'Delete a webhook and its deliveries',
    args: ['<webhook-id>'],
    async run({ client, settings, out }, _flags, [id]) {
      await answer(settings.url, client.DELETE('/webhooks/{id}', { params: { path: { id: id! } } }));
      emit(out, { id, deleted: true }, () => `Deleted webhook ${id}.`);
    },
  },
  {
    words: ['webhooks', 'rotate-secret'],
    summary: 'Give a webhook a new signing secret (printed once); the old one keeps signing for an overlap',
    args: ['<webhook-id>'],
    flags: {
      'expire-previous-after': { type: 'string', value: '<seconds>', description: 'How long the old secret still signs beside the new one (default 86400, at most 604800; 0: not at all)' },
    },
    async run({ client, settings, out }, flags, [id]) {
      const body = { expire_previous_after_seconds: int(flags, 'expire-previous-after', 0) };
      const rotated = await answer(settings.url, client.POST('/webhooks/{id}/rotate-secret', { params: { path: { id: id! } }, body }));
      emit(out, rotated, () => [
        `Rotated the signing secret of webhook ${rotated.id}`,
        `New signing secret (shown once; verify deliveries with a Standard Webhooks library): ${rotated.secret}`,
        rotated.previous_secret_expires_at === null
          ? 'The old secret no longer signs deliveries.'
          : `Until ${when(rotated.previous_secret_expires_at)} UTC deliveries are signed with both secrets: switch your receiver to the new one before then.`,
      ]);
    },
  },
  {
    words: ['webhooks', 'deliveries'],
    summary: "A webhook's deliveries, newest first, with each attempt's status",
    args: ['<webhook-id>'],
    flags: { ...PAGING },
    async run({ client, settings, out }, flags, [id]) {
      const page = await pages(flags, (q) => answer(settings.url, client.GET('/webhooks/{id}/deliveries', { params: { path: { id: id! }, query: q } })));
      emit(out, page, () => [
        ...table(
          ['ID', 'EVENT', 'STATUS', 'ATTEMPTS', 'LAST', 'CREATED'],
          page.items.map((d) => [d.id, d.event_type, d.status, String(d.attempts), d.last_status_code !== null ? String(d.last_status_code) : (d.last_error ?? '-'), when(d.created_at)]),
          'No deliveries.',
        ),
        ...(page.next_cursor ? [`(more: --cursor ${page.next_cursor}, or --all)`] : []),
      ]);
    },
  },
  {
    words: ['webhooks', 'redeliver'],
    summary: 'Deliver a finished delivery again (same event id)',
    args: ['<webhook-id>', '<delivery-id>'],
    async run({ client, settings, out }, _flags, [id, deliveryId]) {
      const again = await answer(settings.url, client.POST('/webhooks/{id}/deliveries/{delivery_id}/redeliver', { params: { path: { id: id!, delivery_id: deliveryId! } } }));
      emit(out, again, () => `Delivery ${again.delivery_id} ${again.status} again.`);
    },
  },
];
