import { z } from '@hono/zod-openapi';
import { FINISHED_JOB_STATUSES, JOB_TRIGGERS, SYNC_MODES, type WebhookEventType } from '../../policy/vocabulary';
import type { WebhookEventData } from '../../policy/webhook-events';
import { exampleFeedCursor } from '../../lib/feed-cursors';

/** True when A and B are the same type (neither has a field or a value the other lacks). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

const Time = z.string().openapi({ description: 'ISO 8601', example: '2025-01-01T12:00:00.000Z' });

/** The `data` of a `sync.*` event. */
const JobEventDataSchema = z
  .object({
    job: z.object({
      id: z.string(),
      connection_id: z.string(),
      job_type: z.enum(SYNC_MODES),
      trigger: z.enum(JOB_TRIGGERS),
      status: z.enum(FINISHED_JOB_STATUSES),
      started_at: Time.nullable(),
      finished_at: Time.nullable(),
    }),
    counts: z.object({ added: z.number(), updated: z.number(), deleted: z.number(), unchanged: z.number() }),
    error: z.string().nullable().openapi({ description: 'sync.failed: what went wrong; sync.cancelled: why; null when completed' }),
    cursor: z.string().openapi({ description: "A records-feed cursor at the connection's latest change when the job ended (for that connection's feed only)" }),
  })
  .openapi('JobEventData');

/** The `data` of each event type, checked against the types the emitters write (policy/webhook-events.ts). */
export const WEBHOOK_EVENT_DATA_SCHEMAS = {
  'sync.completed': JobEventDataSchema,
  'sync.failed': JobEventDataSchema,
  'sync.cancelled': JobEventDataSchema,
  'connection.breaker_opened': z
    .object({
      connection_id: z.string(),
      provider_slug: z.string(),
      consecutive_failures: z.number(),
      paused_until: Time,
      last_error: z.string(),
    })
    .openapi('BreakerOpenedData'),
  'connection.breaker_closed': z.object({ connection_id: z.string(), closed_at: Time }).openapi('BreakerClosedData'),
  'connection.disabled': z.object({ connection_id: z.string(), disabled_at: Time }).openapi('ConnectionDisabledData'),
  'connection.credentials_invalid': z
    .object({ connection_id: z.string(), provider_slug: z.string(), reason: z.string(), at: Time })
    .openapi('CredentialsInvalidData'),
} as const;

// A schema that says anything else than the emitted type fails typecheck here.
const sameData: { [T in WebhookEventType]: Same<z.output<(typeof WEBHOOK_EVENT_DATA_SCHEMAS)[T]>, WebhookEventData[T]> } = {
  'sync.completed': true,
  'sync.failed': true,
  'sync.cancelled': true,
  'connection.breaker_opened': true,
  'connection.breaker_closed': true,
  'connection.disabled': true,
  'connection.credentials_invalid': true,
};
void sameData;

/** What each event means, for the document. */
export const WEBHOOK_EVENT_DESCRIPTIONS: Record<WebhookEventType, string> = {
  'sync.completed': 'A job completed: the job, its record counts and a feed cursor at the connection\'s latest change.',
  'sync.failed': 'A job failed for good (retries ran out, or the reaper or a clean-up failed it as abandoned): as sync.completed, with its error.',
  'sync.cancelled': 'A job was cancelled (over the API, by a pause, disable or deletion): as sync.completed, with the reason as error.',
  'connection.breaker_opened': 'The circuit breaker paused a connection after repeated failed attempts, until paused_until.',
  'connection.breaker_closed': 'A successful attempt closed the circuit breaker of a connection.',
  'connection.disabled': 'A connection was disabled (its workflow stopped; its data kept).',
  'connection.credentials_invalid': 'The provider refused a connection\'s OAuth grant (revoked or expired): the connection is needs_reauth, its schedule runs nothing until new credentials arrive (the connect flow or PATCH credentials).',
};

/** The body of a delivery of event type `type`. */
export function webhookEventSchema(type: WebhookEventType) {
  return z.object({
    id: z.string().openapi({ description: 'The event id: also `webhook-id` (and the deprecated `Synctide-Event-Id`); deduplicate on it' }),
    type: z.literal(type),
    created_at: Time,
    tenant_id: z.string(),
    data: WEBHOOK_EVENT_DATA_SCHEMAS[type],
  });
}

const EXAMPLE_JOB_ID = '6f1c0a52-2f1e-4b8e-9a57-0d7f6c1e9b3a';
const EXAMPLE_CONNECTION_ID = '0b5e2c7e-4a56-4f7e-9d0b-5d7c3c1f2a10';

type JobEventData = WebhookEventData['sync.completed'];

/** An example `data` of a `sync.*` event: the job's id, connection and cursor are the same in each. */
function jobEventExample(
  job: Pick<JobEventData['job'], 'job_type' | 'trigger' | 'status' | 'finished_at'>,
  counts: JobEventData['counts'],
  error: string | null,
): JobEventData {
  return {
    job: {
      id: EXAMPLE_JOB_ID, connection_id: EXAMPLE_CONNECTION_ID, job_type: job.job_type, trigger: job.trigger,
      status: job.status, started_at: '2025-01-01T12:00:00.000Z', finished_at: job.finished_at,
    },
    counts,
    error,
    cursor: exampleFeedCursor(EXAMPLE_CONNECTION_ID),
  };
}

/** An example `data` of each event type. */
export const WEBHOOK_EVENT_EXAMPLES: WebhookEventData = {
  'sync.completed': jobEventExample(
    { job_type: 'incremental', trigger: 'schedule', status: 'completed', finished_at: '2025-01-01T12:00:42.000Z' },
    { added: 12, updated: 3, deleted: 0, unchanged: 985 },
    null,
  ),
  'sync.failed': jobEventExample(
    { job_type: 'full', trigger: 'api', status: 'failed', finished_at: '2025-01-01T12:31:05.000Z' },
    { added: 0, updated: 0, deleted: 0, unchanged: 400 },
    'issues: the provider answered 500',
  ),
  'sync.cancelled': jobEventExample(
    { job_type: 'incremental', trigger: 'api', status: 'cancelled', finished_at: '2025-01-01T12:00:07.000Z' },
    { added: 5, updated: 0, deleted: 0, unchanged: 0 },
    'cancelled over the API',
  ),
  'connection.breaker_opened': {
    connection_id: EXAMPLE_CONNECTION_ID, provider_slug: 'github', consecutive_failures: 5,
    paused_until: '2025-01-01T13:00:00.000Z', last_error: 'the provider answered 502',
  },
  'connection.breaker_closed': { connection_id: EXAMPLE_CONNECTION_ID, closed_at: '2025-01-01T13:01:12.000Z' },
  'connection.disabled': { connection_id: EXAMPLE_CONNECTION_ID, disabled_at: '2025-01-01T12:00:00.000Z' },
  'connection.credentials_invalid': {
    connection_id: EXAMPLE_CONNECTION_ID,
    provider_slug: 'github',
    reason: 'oauth2: the provider refused the grant (invalid_grant); reconnect the connection or PATCH its credentials',
    at: '2025-01-01T12:00:00.000Z',
  },
};
