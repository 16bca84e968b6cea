// An example of every answer schema, by its component name: the document puts it on each JSON
// answer of that schema. Each is typed by its schema, so an example that no longer fits fails
// typecheck (and `npm run lint:openapi` checks it against the document).
import type { z } from '@hono/zod-openapi';
import { ConnectionDetailSchema, ConnectionPageSchema, ConnectionSchema, StatusChangeSchema } from './connections';
import { CancelAnswerSchema, JobPageSchema, JobSchema } from './jobs';
import { RecordPageSchema } from './records';
import { exampleFeedCursor } from '../../lib/feed-cursors';
import { ImmediateSyncSchema, ImmediateSyncTimeoutSchema, SyncAcceptedSchema } from './sync';
import { ApiKeyListSchema, ApiKeySchema, AuditPageSchema, CreatedApiKeySchema, PurgeSchema, StartedPurgeSchema, TenantLimitsSchema } from './tenancy';
import { AuthorizationSchema, CallbackSchema, OAuthAppPageSchema, OAuthAppSchema } from './oauth';
import { CreatedWebhookSchema, DeliveryPageSchema, RedeliveryAnswerSchema, RotatedWebhookSecretSchema, UpdatedWebhookSchema, WebhookPageSchema, WebhookSchema } from './webhooks';

/** `value`, typed by `schema`. */
const ex = <T extends z.ZodType>(_schema: T, value: z.output<T>): z.output<T> => value;

const CONNECTION_ID = '0b5e2c7e-4a56-4f7e-9d0b-5d7c3c1f2a10';
const JOB_ID = '6f1c0a52-2f1e-4b8e-9a57-0d7f6c1e9b3a';
const WEBHOOK_ID = '3d0f7a9e-8c1b-4e55-b1f2-6a7d9e0c4b21';
const DELIVERY_ID = 'a8e4c3d2-1b0f-4a9e-8d7c-6b5a4f3e2d1c';
const KEY_ID = '5c9b8a7d-6e5f-4d3c-2b1a-0f9e8d7c6b5a';
const PURGE_ID = '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b';
const AT = '2025-01-01T12:00:00.000Z';
const NEXT = 'eyJpZCI6IjBiNWUyYzdlLTRhNTYtNGY3ZS05ZDBiLTVkN2MzYzFmMmExMCJ9';

const connection = ex(ConnectionSchema, {
  id: CONNECTION_ID,
  tenant_id: 'acme',
  provider: 'github',
  app_key: 'acme-github',
  status: 'active',
  status_before_reauth: null,
  config: { repositories: ['acme/app'] },
  has_credentials: true,
  credential_kind: 'token',
  oauth_app_id: null,
  schedule: { interval_seconds: 900, next_run_at: '2025-01-01T12:15:00.000Z', last_jitter_seconds: 12 },
  workflow_id: `connection:${CONNECTION_ID}`,
  created_at: AT,
  updated_at: AT,
});

const job = ex(JobSchema, {
  id: JOB_ID,
  connection_id: CONNECTION_ID,
  tenant_id: 'acme',
  provider: 'github',
  job_type: 'incremental',
  trigger: 'api',
  status: 'running',
  priority: 0,
  scheduled_at: AT,
  started_at: '2025-01-01T12:00:01.000Z',
  finished_at: null,
  window: null,
  payload: {},
  retry_count: 0,
  max_retries: 5,
  retry_after: null,
  total_tasks: 2,
  completed_tasks: 1,
  failed_tasks: 0,
  processed_entities: 1200,
  counts: { added: 40, updated: 12, deleted: 0, unchanged: 1148 },
  progress_percentage: 50,
  error: null,
  workflow_id: `sync-job:${JOB_ID}`,
  created_at: AT,
});

const webhook = ex(WebhookSchema, {
  id: WEBHOOK_ID,
  tenant_id: 'acme',
  url: 'https://example.com/hooks/synctide',
  event_types: ['sync.completed', 'sync.failed'],
  created_at: AT,
  disabled_at: null,
  disabled_reason: null,
});

const apiKey = ex(ApiKeySchema, {
  id: KEY_ID,
  tenant_id: 'acme',
  name: 'billing backend',
  prefix: '4f1a9c2e7b30',
  scopes: ['read', 'write'],
  created_at: AT,
  last_used_at: null,
  revoked_at: null,
});

const purge = ex(PurgeSchema, {
  id: PURGE_ID,
  connection_id: CONNECTION_ID,
  tenant_id: 'acme',
  status: 'running',
  deleted_rows: 5000,
  workflow_id: `connection-purge:${PURGE_ID}`,
  created_at: AT,
  finished_at: null,
});

const githubCounts = [
  { resource_type: 'issues', entity_count: 30, written_count: 30, pages: 1 },
  { resource_type: 'pull_requests', entity_count: 5, written_count: 5, pages: 1 },
];

const oauthApp = ex(OAuthAppSchema, {
  id: '2b7c9d1e-3f4a-4b5c-8d6e-7f8a9b0c1d2e',
  tenant_id: 'acme',
  name: 'github',
  client_id: 'Iv1.8a61f9b3a7aba766',
  authorize_url: 'https://github.com/login/oauth/authorize',
  token_url: 'https://github.com/login/oauth/access_token',
  redirect_uri: 'https://synctide.example.com/oauth/callback',
  scopes: ['repo'],
  created_at: AT,
  updated_at: AT,
});

/** The example of each answer schema, by component name. */
export const ANSWER_EXAMPLES: Record<string, unknown> = {
  Connection: connection,
  UpdatedConnection: connection,
  ConnectionPage: ex(ConnectionPageSchema, { items: [connection], next_cursor: NEXT }),
  ConnectionDetail: ex(ConnectionDetailSchema, {
    ...connection,
    live: {
      phase: 'sleeping', next_run_at: '2025-01-01T12:15:00.000Z', scheduled_at: '2025-01-01T12:15:00.000Z',
      last_jitter_seconds: 12, current_job_id: null, last_outcome: 'completed', pending: [], cycles: 4,
    },
    breaker: { open: false, consecutive_failures: 0, paused_until: null, last_failure_at: null, alert: null },
  }),
  StatusChange: ex(StatusChangeSchema, { id: CONNECTION_ID, status: 'paused', workflow: `connection:${CONNECTION_ID}` }),
  SyncAccepted: ex(SyncAcceptedSchema, {
    job_id: JOB_ID, status: 'queued', total_tasks: 2, resource_types: ['issues', 'pull_requests'],
    connection_id: CONNECTION_ID, mode: 'incremental', workflow_id: `sync-job:${JOB_ID}`,
  }),
  ImmediateSync: ex(ImmediateSyncSchema, { immediate: true, connection_id: CONNECTION_ID, mode: 'incremental', total_entities: 35, resources: githubCounts }),
  ImmediateSyncTimeout: ex(ImmediateSyncTimeoutSchema, {
    error: {
      code: 'timeout',
      message: 'the immediate sync did not finish within 60 s (IMMEDIATE_SYNC_TIMEOUT_SECONDS) and was cancelled; what it fetched is stored',
      fetched: { total_entities: 30, resources: githubCounts.slice(0, 1) },
    },
  }),
  Job: job,
  ScheduledJob: job,
  JobPage: ex(JobPageSchema, { items: [job], next_cursor: null }),
  CancelAnswer: ex(CancelAnswerSchema, { job_id: JOB_ID, status: 'running', cancel_requested: true }),
  RecordPage: ex(RecordPageSchema, {
    items: [
      {
        external_id: '1347', resource_type: 'issues', data: { number: 1347, title: 'Found a bug', state: 'open' },
        source_updated_at: '2025-01-01T11:58:00.000Z', synced_at: '2025-01-01T12:00:03.000Z', deleted_at: null, change: 'insert',
      },
    ],
    next_cursor: exampleFeedCursor(CONNECTION_ID),
    has_more: false,
  }),
  Webhook: webhook,
  UpdatedWebhook: ex(UpdatedWebhookSchema, webhook),
  CreatedWebhook: ex(CreatedWebhookSchema, { ...webhook, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/3JYfWWhE+k=' }),
  RotatedWebhookSecret: ex(RotatedWebhookSecretSchema, { ...webhook, secret: 'whsec_3q2+7wTmPXz1G8yQ0vJkUu5bN4cH6aRfLdS9eKxYtEo=', previous_secret_expires_at: '2025-01-02T12:00:00.000Z' }),
  WebhookPage: ex(WebhookPageSchema, { items: [webhook], next_cursor: null }),
  WebhookDeliveryPage: ex(DeliveryPageSchema, {
    items: [
      {
        id: DELIVERY_ID, event_id: '7b6a5f4e-3d2c-4b1a-9f8e-7d6c5b4a3f2e', event_type: 'sync.completed', status: 'delivered', attempts: 2,
        last_status_code: 200, last_error: null, created_at: AT, finished_at: '2025-01-01T12:00:11.000Z',
        attempt_log: [
          { attempt: 1, status_code: 500, error: null, duration_ms: 31, at: '2025-01-01T12:00:00.500Z' },
          { attempt: 2, status_code: 200, error: null, duration_ms: 28, at: '2025-01-01T12:00:11.000Z' },
        ],
      },
    ],
    next_cursor: null,
  }),
  RedeliveryAnswer: ex(RedeliveryAnswerSchema, { delivery_id: DELIVERY_ID, status: 'pending' }),
  ApiKey: { ...apiKey, revoked_at: '2025-02-01T09:00:00.000Z' },
  CreatedApiKey: ex(CreatedApiKeySchema, { ...apiKey, secret: 'stk_4f1a9c2e7b30_cWppTGIP_NsgguhlFcX-Rwsg3ukPCsbQcoPq8iWG1so' }),
  ApiKeyList: ex(ApiKeyListSchema, { items: [apiKey] }),
  AuditPage: ex(AuditPageSchema, {
    items: [{ id: '42', at: AT, actor: `key:${KEY_ID}`, api_key_id: KEY_ID, tenant_id: 'acme', method: 'POST', path: '/sync', target_id: null, target_tenant_id: null, status: 202 }],
    next_cursor: null,
  }),
  Purge: purge,
  StartedPurge: ex(StartedPurgeSchema, purge),
  TenantLimits: ex(TenantLimitsSchema, {
    tenant_id: 'acme',
    limits: { max_connections: 1000, max_webhooks: 100, max_immediate_syncs: 2, max_running_jobs: 200, max_redeliveries_per_hour: 100, max_oauth_apps: 100 },
    overrides: { max_connections: null, max_webhooks: null, max_immediate_syncs: null, max_running_jobs: 200, max_redeliveries_per_hour: null, max_oauth_apps: null },
    usage: { connections: 12, webhooks: 2, immediate_syncs: 0, running_jobs: 3, redeliveries_last_hour: 1, oauth_apps: 1 },
  }),
  OAuthApp: oauthApp,
  UpdatedOAuthApp: oauthApp,
  OAuthAppPage: ex(OAuthAppPageSchema, { items: [oauthApp], next_cursor: null }),
  OAuthAuthorization: ex(AuthorizationSchema, {
    authorization_url: 'https://github.com/login/oauth/authorize?response_type=code&client_id=Iv1.8a61f9b3a7aba766&redirect_uri=https%3A%2F%2Fsynctide.example.com%2Foauth%2Fcallback&scope=repo&state=Wm9vS2x5c3RhdGU&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256',
    expires_at: '2025-01-01T12:10:00.000Z',
  }),
  OAuthCallback: ex(CallbackSchema, { connection_id: CONNECTION_ID, status: 'active', credential_kind: 'oauth2' }),
};
