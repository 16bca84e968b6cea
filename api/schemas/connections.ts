import { z } from '@hono/zod-openapi';
import { CONNECTION_STATUS, CONNECTION_STATUSES, CREDENTIAL_KINDS, JOB_OUTCOMES, PHASES, SETTABLE_CONNECTION_STATUSES } from '../../policy/vocabulary';
import { MIN_INTERVAL_SECONDS, parseSchedule } from '../../policy/schedule';
import { sharedGrantOf } from '../../policy/oauth';
import { configProblem, credentialsProblem, PROVIDER_CONFIG_SCHEMAS, PROVIDER_CREDENTIALS_DOCS, type ProviderSlug } from '../../commands/provider-configs';
import {
  boundedJsonObject,
  CursorQuery,
  jsonBytes,
  LimitQuery,
  MAX_CONFIG_BYTES,
  MAX_CREDENTIALS_BYTES,
  NullableTime,
  ResourceTypesSchema,
  sizeRule,
  SyncModeSchema,
  TenantIdQuery,
  TenantIdSchema,
} from './common';

/** An app key: letters, digits, `_` and `-`, 1–64 characters. */
export const APP_KEY_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** An app key, validated for format. */
export const AppKeySchema = z
  .string({ error: 'must be a string' })
  .regex(APP_KEY_PATTERN, 'must be 1–64 letters, digits, underscores or hyphens')
  .openapi({ example: 'acme-github' });

/** The schema knows no deployment: the command checks MAX_OVERRIDDEN_INTERVAL_SECONDS. */
const NO_DEPLOYMENT_MAXIMUM = { maxOverriddenIntervalSeconds: Number.POSITIVE_INFINITY };

/**
 * The longest text each field of a schedule takes: far more than any schedule needs (a cron
 * listing every minute, hour, day, month and weekday is under 400 characters), so that no schedule
 * fills every row, listing and workflow history it reaches, as no config may (MAX_CONFIG_BYTES).
 */
export const MAX_SCHEDULE_TEXT = { cron: 1000, timezone: 100, full_sync_every: 32 } as const;

/**
 * A schedule: an interval in seconds or a 5-field cron expression (not both), the cron's IANA
 * `timezone` (default UTC), and how often a scheduled run is a full sync (`full_sync_every`). The
 * fields here give the types and the document; the rules are `parseSchedule`'s (policy/schedule.ts),
 * the one parser the command and the stored row's reader use too (the command adds the
 * deployment's MAX_OVERRIDDEN_INTERVAL_SECONDS).
 */
export const ScheduleSchema = z
  .strictObject({
    interval_seconds: z
      .number({ error: 'must be an integer number of seconds' })
      .optional()
      .openapi({ type: 'integer', minimum: MIN_INTERVAL_SECONDS, description: "At most the deployment's MAX_OVERRIDDEN_INTERVAL_SECONDS (default 86400)" }),
    cron: z
      .string({ error: 'must be a 5-field cron expression' })
      .optional()
      .openapi({ description: 'A 5-field cron expression, evaluated in `timezone` (default UTC)', example: '*/15 * * * *', maxLength: MAX_SCHEDULE_TEXT.cron }),
    timezone: z
      .string({ error: 'must be an IANA time zone name such as Europe/Berlin' })
      .optional()
      .openapi({
        description: 'The IANA time zone the cron expression is evaluated in (only with `cron`; default UTC). DST-correct: a fixed time (no wildcard or step in minute and hour, e.g. 30 2 * * * or 30 2,14 * * *) the clock skips runs once when the clock has jumped, one that occurs twice runs once; a wildcard or step follows the wall clock',
        example: 'Europe/Berlin',
        maxLength: MAX_SCHEDULE_TEXT.timezone,
      }),
    full_sync_every: z
      .union([z.number(), z.string()], { error: 'must be a whole number of runs or a duration such as "7d"' })
      .optional()
      .openapi({
        description:
          'Make a scheduled run a full sync (every record fetched, deletions detected) every N runs (a whole number ≥ 1; a connection\'s first sync is a full one, and the count starts there), or at the run nearest a duration after the last full sync ("12h", "7d", "2w"; units m, h, d, w; at least 1h; at most 32 characters)',
        example: 7,
      }),
  })
  .superRefine((fields, ctx) => {
    // Text too long is refused before it is parsed (or quoted in a problem's message).
    let tooLong = false;
    for (const [key, max] of Object.entries(MAX_SCHEDULE_TEXT)) {
      const value = (fields as Record<string, unknown>)[key];
      if (typeof value !== 'string' || value.length <= max) continue;
      ctx.addIssue({ code: 'custom', message: `must be at most ${max} characters`, path: [key] });
      tooLong = true;
    }
    if (tooLong) return;
    for (const problem of parseSchedule(fields, NO_DEPLOYMENT_MAXIMUM).problems) {
      ctx.addIssue({ code: 'custom', message: problem.message, path: problem.key ? [problem.key] : [] });
    }
  })
  // "Exactly one of interval_seconds and cron" in the document's own terms.
  .openapi('Schedule', {
    oneOf: [{ required: ['interval_seconds'] }, { required: ['cron'] }],
    example: { cron: '30 2 * * *', timezone: 'Europe/Berlin', full_sync_every: 7 },
  });

const JsonObject = z.record(z.string(), z.unknown());

/** Connection credentials: at most 16 KiB as JSON, stored, never returned or logged. */
const Credentials = boundedJsonObject(MAX_CREDENTIALS_BYTES)
  .nullable()
  .optional()
  .openapi({
    description: `Secrets (${sizeRule(MAX_CREDENTIALS_BYTES)}); stored, never returned or logged. Bound to the provider's origin: a config change that moves it clears them unless given again. A GitHub token must be 20–255 letters, digits, '_', '-' or '.'; a GitHub App installation is \`{"kind": "github_app", "app_id", "installation_id", "private_key"}\` (its installation tokens are minted and renewed by the platform); an \`http\` connection may give an OAuth 2 client (the client credentials grant) as \`{"kind": "oauth2_client_credentials", "token_url", "client_id", "client_secret", "scopes"?}\`, whose access token the platform obtains, caches and renews and the connector sends as its \`token\` (auth \`bearer\`, \`header\` or \`query\`). \`{"kind": "oauth2", "grant_from_connection": "<connection id>"}\` shares the OAuth 2 grant of another connection of the same tenant (one refresh serves both; 404 for an id of no connection of the tenant, 409 \`grant_source_not_oauth2\` when that connection holds no oauth2 grant, 400 when this connection's config would present it to another origin or with another auth than that connection's)`,
    example: { token: 'ghp_…' },
  });

/** A config given to PATCH: at most 64 KiB as JSON, checked by the connection's connector. */
const ConfigPatch = boundedJsonObject(MAX_CONFIG_BYTES)
  .optional()
  .openapi({ description: `The new config (${sizeRule(MAX_CONFIG_BYTES)}), checked by the connection's connector. Moving the provider origin (e.g. GitHub's base_url) clears stored credentials unless \`credentials\` is given in the same request` });

/**
 * A provider's connection config, as its connector validates it. The document shows the
 * connector's own zod schema as input (defaults may be left out; unknown keys are allowed and
 * ignored); a value is checked by the connector itself (also for the rules its schema cannot
 * state) and kept as given, so the connector's defaults are not frozen into a stored config.
 */
function providerConfig(provider: ProviderSlug) {
  const { $schema: _dialect, ...documented } = z.toJSONSchema(PROVIDER_CONFIG_SCHEMAS[provider], { io: 'input' }) as Record<string, unknown>;
  // With a `type`, the generator takes the metadata as the whole schema instead of the record's.
  const description = [documented.description, `At most ${sizeRule(MAX_CONFIG_BYTES)}.`].filter(Boolean).join(' ');
  const metadata = { ...documented, description, type: 'object' } as { type: 'object' };
  return JsonObject.superRefine((config, ctx) => {
    if (jsonBytes(config) > MAX_CONFIG_BYTES) {
      ctx.addIssue({ code: 'custom', message: `must be ${sizeRule(MAX_CONFIG_BYTES)}` });
      return;
    }
    const problem = configProblem(provider, config);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }).openapi(metadata);
}

/**
 * A new connection's credentials for `provider`: at most 16 KiB as JSON and of the shape its
 * connector requires (documented where the connector states it, e.g. GitHub's token).
 */
function providerCredentials(provider: ProviderSlug) {
  const doc = PROVIDER_CREDENTIALS_DOCS[provider];
  const schema = boundedJsonObject(MAX_CREDENTIALS_BYTES).superRefine((credentials, ctx) => {
    // Another connection's OAuth 2 grant, shared: checked here for its shape, by the command for its source.
    const shared = sharedGrantOf(credentials);
    const problem = shared ? ('problem' in shared ? shared.problem : null) : credentialsProblem(provider, credentials);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
  const description = `Secrets (${sizeRule(MAX_CREDENTIALS_BYTES)}); stored, never returned or logged. Bound to the provider's origin: a config change that moves it clears them unless given again. \`{"kind": "oauth2", "grant_from_connection": "<connection id>"}\` shares the OAuth 2 grant of another connection of the same tenant (404 for an id of no connection of the tenant, 409 \`grant_source_not_oauth2\` when it holds no oauth2 grant, 400 when this connection's config would present it to another origin or with another auth than that connection's)${provider === 'github' ? '. A token, or a GitHub App installation (`kind: github_app`) whose installation tokens the platform mints from the app\'s JWT and renews before they expire' : ''}`;
  return schema
    .nullable()
    .optional()
    .openapi({ ...(doc ?? {}), description, example: provider === 'github' ? { token: 'ghp_0123456789abcdefghijklmnopqrstuvwxyz' } : {} } as { description: string });
}

/** What every new connection gives, whatever its provider. */
const connectionFields = {
  tenant_id: TenantIdSchema,
  app_key: AppKeySchema,
  credentials: Credentials,
  schedule: ScheduleSchema.optional(),
  status: z.enum(SETTABLE_CONNECTION_STATUSES).default(CONNECTION_STATUS.active),
};

/** A new `github` connection: its config names the repositories (`credentials.token` is read at sync time). */
const CreateGitHubConnection = z
  .strictObject({
    ...connectionFields,
    provider: z.literal('github'),
    credentials: providerCredentials('github'),
    config: providerConfig('github').openapi({ example: { repositories: ['octo-org/octo-repo'] } }),
  })
  .openapi('CreateGitHubConnection');

/**
 * A new `demo` connection: synthetic data, every config key optional. Accepted only where the
 * demo provider is on (DEMO_CONNECTOR: `npm start`, tests); elsewhere 400 unknown provider.
 */
const CreateDemoConnection = z
  .strictObject({
    ...connectionFields,
    provider: z.literal('demo'),
    credentials: providerCredentials('demo'),
    config: providerConfig('demo').default({}).openapi({ example: { records_per_resource: 100, page_size: 50 } }),
  })
  .openapi('CreateDemoConnection', {
    description: 'Synthetic data for trials and tests: accepted only where the deployment turns the demo provider on (DEMO_CONNECTOR); otherwise 400 unknown provider.',
  });

/** A new declarative `http` connection: its config describes the provider (see the README). */
const CreateHttpConnection = z
  .strictObject({
    ...connectionFields,
    provider: z.literal('http'),
    config: providerConfig('http').openapi({
      example: {
        base_url: 'https://api.example.com',
        auth: { type: 'bearer' },
        pagination: { type: 'cursor', path: 'meta.next_cursor', param: 'cursor' },
        resources: { customers: { path: '/v1/customers', records: 'data', id: 'id', updated_at: 'updated_at', since: { param: 'updated_since', format: 'iso8601' } } },
      },
    }),
  })
  .openapi('CreateHttpConnection');

/** `POST /connections` body: one shape per provider, told apart by `provider`. */
export const CreateConnectionBody = z
  .discriminatedUnion('provider', [CreateGitHubConnection, CreateDemoConnection, CreateHttpConnection], {
    error: (issue) => (issue.code === 'invalid_union' ? `must be one of ${Object.keys(PROVIDER_CONFIG_SCHEMAS).map((p) => `'${p}'`).join(', ')}` : undefined),
  })
  .openapi('CreateConnection');

/** `PATCH /connections/:id` body: any of config, credentials (null removes them), schedule. */
export const UpdateConnectionBody = z
  .strictObject({
    config: ConfigPatch,
    credentials: Credentials,
    schedule: ScheduleSchema.optional(),
  })
  .openapi('UpdateConnection');

/** `POST /connections/:id/sync` body. */
export const SyncNowBody = z
  .strictObject({
    mode: SyncModeSchema.default('incremental'),
    resource_types: ResourceTypesSchema.optional(),
  })
  .openapi('SyncNow');

/** The live state of a connection's workflow (its `state` query). */
export const LiveStateSchema = z
  .object({
    phase: z.enum(PHASES),
    next_run_at: NullableTime,
    scheduled_at: NullableTime,
    last_jitter_seconds: z.number().nullable(),
    current_job_id: z.string().nullable(),
    last_outcome: z.enum(JOB_OUTCOMES).nullable(),
    pending: z.array(z.string()),
    cycles: z.number(),
  })
  .openapi('LiveState');

/** A connection's circuit breaker. */
export const BreakerSchema = z
  .object({
    open: z.boolean(),
    consecutive_failures: z.number(),
    paused_until: NullableTime,
    last_failure_at: NullableTime,
    alert: z.object({ id: z.string(), severity: z.string(), context: JsonObject, created_at: z.string() }).nullable(),
  })
  .openapi('Breaker');

/** A connection (credentials are never shown, only whether it has some). */
export const ConnectionSchema = z
  .object({
    id: z.string(),
    tenant_id: z.string(),
    provider: z.string(),
    app_key: z.string(),
    status: z.enum(CONNECTION_STATUSES).openapi({ description: '`needs_reauth`: the provider refused the OAuth grant; new credentials (PATCH `credentials`, or the connect flow) make it `active` again' }),
    status_before_reauth: z.enum(SETTABLE_CONNECTION_STATUSES).nullable().openapi({
      description:
        'While `needs_reauth`: the status new credentials give back (`active`, or `paused`; a pause or resume since sets it). On a `disabled` connection: set when it was disabled while it needed reauthorization, so a resume makes it `needs_reauth` again, not `active` (new credentials while disabled clear it). Null otherwise.',
    }),
    config: JsonObject,
    has_credentials: z.boolean(),
    credential_kind: z.enum(CREDENTIAL_KINDS).openapi({ description: '`token` (credentials given whole: a static token, or a GitHub App installation whose tokens the platform mints) or `oauth2` (an access token kept fresh by refresh, through `oauth_app_id`)' }),
    oauth_app_id: z.string().nullable(),
    schedule: z.object({
      interval_seconds: z.number().optional(),
      cron: z.string().optional(),
      timezone: z.string().optional(),
      full_sync_every: z.union([z.number(), z.string()]).optional(),
      next_run_at: z.string().optional(),
      last_jitter_seconds: z.number().optional(),
    }),
    workflow_id: z.string(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Connection');

/** `PATCH /connections/:id` answer: the connection; without `config` for a key lacking the `read` scope. */
export const UpdatedConnectionSchema = ConnectionSchema.partial({ config: true }).openapi('UpdatedConnection');

/** `GET /connections/:id`: the connection, its workflow's live state and its breaker. */
export const ConnectionDetailSchema = ConnectionSchema.extend({
  live: LiveStateSchema.nullable().openapi({ description: "The workflow's `state` query; null when the workflow is not running or did not answer" }),
  breaker: BreakerSchema,
}).openapi('ConnectionDetail');

/** `GET /connections` query. */
export const ListConnectionsQuery = z.object({
  tenant_id: TenantIdQuery(),
  provider: z.string().optional().openapi({ param: { name: 'provider', in: 'query' } }),
  status: z.enum(CONNECTION_STATUSES).optional().openapi({ param: { name: 'status', in: 'query' } }),
  limit: LimitQuery,
  cursor: CursorQuery,
});

/** A page of connections. */
export const ConnectionPageSchema = z
  .object({ items: z.array(ConnectionSchema), next_cursor: z.string().nullable() })
  .openapi('ConnectionPage');

/** What a pause, resume or disable did. */
export const StatusChangeSchema = z
  .object({ id: z.string(), status: z.enum(CONNECTION_STATUSES), workflow: z.string() })
  .openapi('StatusChange');
