import { existsSync, readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { z } from 'zod';
import { DEFAULT_DELIVERY_SLOTS } from '../policy/delivery-shares';
import { DEFAULT_MAX_RESET_SECONDS } from '../policy/rate-budget';
import { MIN_INTERVAL_SECONDS, type ScheduleSettings } from '../policy/schedule';
import { DEFAULT_TENANT_LIMITS, DEFAULT_TENANT_MAX_OAUTH_STATES, type TenantLimits } from '../policy/tenant-limits';
import { adminKeyProblem } from './admin-key';
import { parseTrustedProxies } from './client-address';
import { KeyringProblem, parseKeyring, type Keyring } from './credentials';

/**
 * The default byte budget of a records feed page: 8 MiB. A page of the default 100 records, or of
 * the largest 1,000, of records up to 8 KiB is never cut, so readers of ordinary data see the pages
 * they always did; a page of the largest records a provider may send (PROVIDER_MAX_RECORD_BYTES,
 * 1 MiB) holds about eight of them instead of up to a thousand (a gigabyte of JSON).
 */
export const DEFAULT_FEED_PAGE_MAX_BYTES = 8 * 1024 * 1024;

/**
 * `schema` (a coerced number) with an empty or blank value refused by its own rule: `Number('')`
 * is 0, which would turn a timeout off or a bound to nothing without a word.
 */
const numeric = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? Number.NaN : v), schema);

const port = (fallback: number) =>
  numeric(
    z.coerce
      .number({ error: 'must be an integer port number between 1 and 65535' })
      .int('must be an integer port number between 1 and 65535')
      .min(1, 'must be an integer port number between 1 and 65535')
      .max(65535, 'must be an integer port number between 1 and 65535'),
  ).default(fallback);

const positiveInt = (fallback: number, rule = 'must be a positive integer') =>
  numeric(z.coerce.number({ error: rule }).int(rule).positive(rule)).default(fallback);

const fraction = (fallback: number) =>
  numeric(
    z.coerce
      .number({ error: 'must be a number between 0 and 1' })
      .min(0, 'must be a number between 0 and 1')
      .max(1, 'must be a number between 0 and 1'),
  ).default(fallback);

const seconds = (fallback: number, max: number) => {
  const rule = `must be an integer ≥ 0 (0 turns it off), at most ${max}`;
  return numeric(z.coerce.number({ error: rule }).int(rule).min(0, rule).max(max, rule)).default(fallback);
};

/**
 * The most seconds a duration that becomes a Node timer or a Postgres millisecond setting may
 * hold: 2^31 - 1 ms. A longer timer fires after 1 ms (Node's TimeoutOverflowWarning), and Postgres
 * refuses a longer statement_timeout or idle_in_transaction_session_timeout.
 */
const MAX_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);
/** A statement timeout's client-side limit is twice it (db/pool.ts), itself a timer. */
const MAX_STATEMENT_TIMEOUT_SECONDS = Math.floor(MAX_TIMER_SECONDS / 2);

/** A positive whole number of seconds that becomes a timer: at most MAX_TIMER_SECONDS. */
const timerSeconds = (fallback: number) => {
  const rule = `must be a positive integer, at most ${MAX_TIMER_SECONDS}`;
  return numeric(z.coerce.number({ error: rule }).int(rule).positive(rule).max(MAX_TIMER_SECONDS, rule)).default(fallback);
};

/** A name (a host, a namespace, a queue, a directory): surrounding blanks dropped; empty refused. */
const requiredName = (fallback: string) => z.string().trim().min(1, 'must not be empty or blank').default(fallback);

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === '' ? undefined : v))
  .optional();

/** A file the process must be able to read (a certificate or key); unset or empty: none. */
const readableFile = optionalString.pipe(z.string().refine((file) => existsSync(file), 'no readable file there').optional());

/**
 * Whether node-postgres can read `url`: a URL, or one with an empty host (`postgres://user@/db?host=/socket/dir`),
 * which it reads with a stand-in host.
 */
const parsesAsPostgresUrl = (url: string) => URL.canParse(url) || URL.canParse(url.replace('@/', '@localhost/'));

/** A Postgres connection URL (DATABASE_URL, DATABASE_MIGRATION_URL); unset or empty: none. */
const postgresUrl = optionalString.pipe(
  z
    .string()
    .regex(/^postgres(ql)?:\/\//, { message: 'must be a postgres:// or postgresql:// connection URL', abort: true })
    .refine(
      parsesAsPostgresUrl,
      'does not parse as a URL: it must have the form postgres://user:password@host:port/database, with a numeric port and any @ : / # ? % or space in the user or password percent-encoded',
    )
    .optional(),
);

const boolean = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0'], { error: 'must be one of true, false, 1, 0' })
    .transform((v) => v === 'true' || v === '1')
    .default(fallback);

/** Every environment variable Synctide reads, with its rule and default. */
export const envSchema = z
  .object({
    NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
    LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),

    DATABASE_URL: postgresUrl,
    // The owner role that applies migrations; unset, DATABASE_URL's role does. Production runs
    // the API and workers as a role with DML rights only and migrates with this one.
    DATABASE_MIGRATION_URL: postgresUrl,
    // Replace the password of DATABASE_URL / DATABASE_MIGRATION_URL (read from *_FILE secrets).
    DATABASE_PASSWORD: optionalString,
    DATABASE_MIGRATION_PASSWORD: optionalString,
    // `false`: this process does not migrate (a separate `npm run migrate` with the owner role does).
    MIGRATE_ON_START: boolean(true),
    // Per pool: under `npm start` the API and the worker each have one.
    DATABASE_POOL_MAX: positiveInt(10),
    // Set on every pooled connection, so one runaway statement or a transaction left open cannot
    // hold a connection (and its locks) forever. Migrations run on their own connection without
    // these limits. The worker's limit is larger: a full sync's deletion of unseen records and the
    // retention clean-up are its longest statements (a 1,000-record page upsert takes ≈ 20 ms).
    API_STATEMENT_TIMEOUT_SECONDS: seconds(30, MAX_STATEMENT_TIMEOUT_SECONDS),
    WORKER_STATEMENT_TIMEOUT_SECONDS: seconds(300, MAX_STATEMENT_TIMEOUT_SECONDS),
    IDLE_IN_TRANSACTION_TIMEOUT_SECONDS: seconds(60, MAX_TIMER_SECONDS),
    DATA_DIR: requiredName('.data'),
    EMBEDDED_PG_PORT: port(54329),

    // A port outside 1-65535 is refused here: the frontend could never answer there, and the
    // start-up would wait TEMPORAL_STARTUP_WAIT_SECONDS for it before failing.
    TEMPORAL_ADDRESS: optionalString.pipe(
      z
        .string()
        .refine((address) => {
          // A host name or IPv4 address, or an IPv6 address in brackets ([fd00::7]:7233). No host
          // holds an `@`: credentials before it (`token@host:7233`) are refused, not taken and logged.
          const [, host, port] = /^(\[[^\]]+\]|[^\s:/@[\]]+):(\d{1,5})$/.exec(address) ?? [];
          if (host === undefined || (host.startsWith('[') && !isIPv6(host.slice(1, -1)))) return false;
          return Number(port) >= 1 && Number(port) <= 65535;
        }, 'must be host:port with a port from 1 to 65535, for example localhost:7233 or [fd00::7]:7233')
        .optional(),
    ),
    TEMPORAL_NAMESPACE: requiredName('default'),
    TEMPORAL_STARTUP_WAIT_SECONDS: positiveInt(300),
    DATABASE_STARTUP_WAIT_SECONDS: positiveInt(120),
    TEMPORAL_TASK_QUEUE: requiredName('synctide'),
    // TLS to TEMPORAL_ADDRESS (implied by any TEMPORAL_TLS_* file or TEMPORAL_API_KEY): the CA
    // that signed the server's certificate (default: the system's), a client certificate and key for
    // mTLS, the name to check the server's certificate against, and an API key (Temporal Cloud).
    TEMPORAL_TLS: boolean(false),
    TEMPORAL_TLS_CA: readableFile,
    TEMPORAL_TLS_CERT: readableFile,
    TEMPORAL_TLS_KEY: readableFile,
    TEMPORAL_TLS_SERVER_NAME: optionalString,
    TEMPORAL_API_KEY: optionalString,
    TEMPORAL_DEV_PORT: port(7233),
    TEMPORAL_UI_PORT: port(8233),

    API_HOST: requiredName('127.0.0.1'),
    API_PORT: port(3000),
    // How long `npm run api`'s whole shutdown may take from SIGTERM: requests in flight answer
    // within it, less a last second (at most half of it) in which the statements still running
    // are cancelled and the process exits. `npm start`'s API stops by the same rule, before its
    // worker and servers.
    API_SHUTDOWN_GRACE_SECONDS: timerSeconds(5),
    // How long an API request's calls to Temporal may take, counted from the first of them: a
    // Temporal that takes connections and answers nothing fails the request with 503 then, instead
    // of holding it (and its tenant's turn) for ever.
    API_TEMPORAL_TIMEOUT_SECONDS: timerSeconds(10),
    ADMIN_API_KEY: optionalString.pipe(
      z
        .string()
        .superRefine((key, ctx) => {
          const problem = adminKeyProblem(key);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        })
        .optional(),
    ),
    // `/metrics` carries tenant ids in its labels: it requires the admin key unless this is true.
    METRICS_PUBLIC: boolean(false),
    // Encryption keys of credentials and webhook secrets at rest (lib/credentials.ts): one key
    // (id `default`), or several as `id:base64,...` with the active one named.
    CREDENTIALS_KEY: optionalString,
    CREDENTIALS_KEYS: optionalString,
    CREDENTIALS_ACTIVE_KEY_ID: optionalString,
    // Per-API-key token bucket: sustained requests per second and the burst allowed above it.
    API_RATE_LIMIT_PER_SECOND: numeric(z.coerce.number({ error: 'must be a positive number' }).positive('must be a positive number')).default(50),
    API_RATE_LIMIT_BURST: positiveInt(500),
    // Failed lookups of well-formed tenant keys per client address and API process: that many at
    // once, refilled at that many a minute; beyond it such keys from the address answer 429.
    API_AUTH_FAILURES_PER_MINUTE: positiveInt(30),
    // The reverse proxies (IP addresses and CIDR ranges, comma-separated) whose X-Forwarded-For
    // names the client that limit counts; unset or empty, none: the TCP peer is the client and
    // X-Forwarded-For is never read (lib/client-address.ts).
    TRUSTED_PROXIES: z
      .string()
      .default('')
      .transform((list, ctx) => {
        try {
          return parseTrustedProxies(list);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
          return z.NEVER;
        }
      }),
    // The byte budget of one page of the records feed: a page stops before the record whose data
    // would pass it (one record always comes, however large).
    FEED_PAGE_MAX_BYTES: positiveInt(DEFAULT_FEED_PAGE_MAX_BYTES),
    WORKER_METRICS_PORT: port(9464),
    WORKER_SHUTDOWN_GRACE_SECONDS: positiveInt(30),
    // Workflow runs a worker keeps in memory between tasks. A sleeping connection outside the cache
    // costs one replay of its short run history when it wakes (see BENCHMARKS.md for the figures).
    // Unset, the worker sizes it to its memory limit (infra/boot.ts workflowCacheSize).
    WORKER_MAX_CACHED_WORKFLOWS: optionalString.pipe(
      z.string().regex(/^\d+$/, 'must be an integer ≥ 0').transform(Number).optional(),
    ),
    // The CPU use (0–1] above which a worker's scheduled lane takes no more than its minimum of
    // activities and workflow tasks while immediate syncs run in the process (policy/lanes.ts);
    // 1: never.
    WORKER_TARGET_CPU: optionalString.pipe(
      z.coerce
        .number<string | undefined>({ error: 'must be a number above 0 and at most 1' })
        .gt(0, 'must be a number above 0 and at most 1')
        .max(1, 'must be a number above 0 and at most 1')
        .default(0.7),
    ),
    // A workflow bundle built by `npm run build:workflows`; unset, the worker bundles at start.
    WORKFLOW_BUNDLE_PATH: optionalString.pipe(
      z.string().refine((file) => existsSync(file), 'no file there; build it with `npm run build` or `npm run build:workflows -- <file>`').optional(),
    ),

    SCHEDULER_TICK_SECONDS: timerSeconds(60),
    DEFAULT_INTERVAL_SECONDS: positiveInt(900),
    MAX_OVERRIDDEN_INTERVAL_SECONDS: positiveInt(86400),
    JITTER_PCT_MIN: fraction(0),
    // Below 1: a jitter of a whole interval would make next_run_at equal scheduled_at.
    JITTER_PCT_MAX: numeric(
      z.coerce
        .number({ error: 'must be a number from 0 up to (not including) 1' })
        .min(0, 'must be a number from 0 up to (not including) 1')
        .lt(1, 'must be a number from 0 up to (not including) 1'),
    ).default(0.2),
    RETENTION_DAYS: positiveInt(7),
    TOMBSTONE_RETENTION_DAYS: positiveInt(30),
    // audit_log entries older than this are deleted by the worker's daily retention clean-up.
    AUDIT_LOG_RETENTION_DAYS: positiveInt(365),
    // Webhook URLs may name loopback and private addresses (tests and `npm start` only: otherwise a
    // tenant could make the platform call internal services).
    WEBHOOK_ALLOW_PRIVATE: boolean(false),
    // Webhook delivery attempts a worker process runs at once, of its 100 activity slots (the rest
    // stay with syncs however slow tenants' receivers are); tenants with deliveries to make share
    // them equally, and an attempt over its tenant's share is deferred (policy/delivery-shares.ts).
    WEBHOOK_DELIVERY_SLOTS: numeric(
      z.coerce
        .number({ error: 'must be an integer from 1 to 99' })
        .int('must be an integer from 1 to 99')
        .min(1, 'must be an integer from 1 to 99')
        .max(99, 'must be an integer from 1 to 99'),
    ).default(DEFAULT_DELIVERY_SLOTS),
    // How long `POST /sync` with `immediate: true` may run before it answers 504 with what it fetched.
    IMMEDIATE_SYNC_TIMEOUT_SECONDS: timerSeconds(60),
    // Immediate syncs page on their own task queue (default `<TEMPORAL_TASK_QUEUE>-immediate`), where
    // each worker runs at most IMMEDIATE_SYNC_SLOTS of them at once: a flood of them cannot take
    // the slots scheduled work runs in.
    IMMEDIATE_SYNC_TASK_QUEUE: optionalString,
    IMMEDIATE_SYNC_SLOTS: positiveInt(4),

    // Per-tenant limits (the admin overrides them per tenant: PATCH /tenants/{id}/limits). Keep
    // TENANT_MAX_IMMEDIATE_SYNCS below the immediate-sync slots of all workers, and
    // TENANT_MAX_RUNNING_JOBS below the workers' activity slots, so one tenant cannot take them all.
    TENANT_MAX_CONNECTIONS: positiveInt(DEFAULT_TENANT_LIMITS.connections),
    TENANT_MAX_WEBHOOKS: positiveInt(DEFAULT_TENANT_LIMITS.webhooks),
    TENANT_MAX_IMMEDIATE_SYNCS: positiveInt(DEFAULT_TENANT_LIMITS.immediateSyncs),
    TENANT_MAX_RUNNING_JOBS: positiveInt(DEFAULT_TENANT_LIMITS.runningJobs),
    TENANT_MAX_REDELIVERIES_PER_HOUR: positiveInt(DEFAULT_TENANT_LIMITS.redeliveriesPerHour),
    TENANT_MAX_OAUTH_APPS: positiveInt(DEFAULT_TENANT_LIMITS.oauthApps),
    // Connect flows under way (oauth_states rows neither used nor expired) of one tenant; not
    // overridden per tenant.
    TENANT_MAX_OAUTH_STATES: positiveInt(DEFAULT_TENANT_MAX_OAUTH_STATES),

    // Providers: where connectors and OAuth token requests may go (host names, comma-separated:
    // GitHub's API, and github.com where a GitHub OAuth app's token URL is; GitHub Enterprise
    // hosts are added here) and how much a provider may cost a worker.
    PROVIDER_HOSTS: z
      .string()
      .default('api.github.com,github.com')
      .transform((list) => list.split(',').map((host) => host.trim().toLowerCase()).filter(Boolean))
      .pipe(
        z
          .array(z.string().regex(/^[a-z0-9.-]+$|^\[?[0-9a-f:.]+\]?$/, 'must be a comma-separated list of host names, such as api.github.com,ghe.example.com'))
          .min(1, 'must name at least one host, such as api.github.com'),
      ),
    // Test servers only: provider URLs may be plain http and name loopback, private and link-local
    // addresses. Never in production: a tenant could aim a connection at internal services.
    PROVIDER_ALLOW_PRIVATE: boolean(false),
    PROVIDER_MAX_RESPONSE_BYTES: positiveInt(10 * 1024 * 1024),
    PROVIDER_REQUEST_TIMEOUT_SECONDS: timerSeconds(30),
    PROVIDER_MAX_RECORD_BYTES: positiveInt(1024 * 1024),
    PROVIDER_MAX_PAGES_PER_TASK: positiveInt(100_000),
    PROVIDER_MAX_RECORDS_PER_TASK: positiveInt(10_000_000),
    // The furthest a provider's stated rate-limit reset (or Retry-After) is believed: a further one
    // is taken as this far, so a provider or a connection's `rate_limit` header mapping naming a
    // reset decades away holds the credential's syncs back this long at most.
    RATE_BUDGET_MAX_RESET_SECONDS: positiveInt(DEFAULT_MAX_RESET_SECONDS),

    // Registers the `demo` provider (synthetic data with fault-injection hooks): `npm start` and
    // the tests turn it on; production leaves it off, so no tenant can create a demo connection.
    DEMO_CONNECTOR: boolean(false),

    // Traces (OpenTelemetry): unset, tracing is off and costs nothing. Set, spans go over OTLP
    // (HTTP/protobuf) to `<endpoint>/v1/traces`; the SDK's other OTEL_* variables
    // (OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, ...) apply as documented there.
    OTEL_EXPORTER_OTLP_ENDPOINT: optionalString.pipe(z.url({ protocol: /^https?$/, error: 'must be an http(s) URL, for example http://localhost:4318' }).optional()),
    // OpenTelemetry's own switch, read as its specification reads it: "true" in any case turns
    // tracing off whatever OTEL_EXPORTER_OTLP_ENDPOINT says; any other value (or none) leaves it on.
    OTEL_SDK_DISABLED: z
      .string()
      .optional()
      .transform((v) => v?.trim().toLowerCase() === 'true'),
    START_DEMO: boolean(true),
  })
  .superRefine((env, ctx) => {
    if (env.JITTER_PCT_MIN > env.JITTER_PCT_MAX) {
      ctx.addIssue({
        code: 'custom',
        path: ['JITTER_PCT_MIN'],
        message: `must not exceed JITTER_PCT_MAX (${env.JITTER_PCT_MAX})`,
      });
    }
    if (Boolean(env.TEMPORAL_TLS_CERT) !== Boolean(env.TEMPORAL_TLS_KEY)) {
      const missing = env.TEMPORAL_TLS_CERT ? 'TEMPORAL_TLS_KEY' : 'TEMPORAL_TLS_CERT';
      ctx.addIssue({ code: 'custom', path: [missing], message: 'is required with the other one: mTLS needs both the client certificate and its key' });
    }
    // No interval below the smallest one a schedule may ask for, default or maximum alike.
    for (const name of ['DEFAULT_INTERVAL_SECONDS', 'MAX_OVERRIDDEN_INTERVAL_SECONDS'] as const) {
      if (env[name] < MIN_INTERVAL_SECONDS) {
        ctx.addIssue({ code: 'custom', path: [name], message: `must be at least ${MIN_INTERVAL_SECONDS} (the smallest allowed interval)` });
      }
    }
  });

/** Validated configuration. */
export type Config = z.infer<typeof envSchema>;

/**
 * Variables that hold secrets: each may instead be read from the file named by `<NAME>_FILE`
 * (Docker/Kubernetes secrets), and an invalid value is never echoed in an error.
 */
export const SECRET_VARIABLES = ['ADMIN_API_KEY', 'CREDENTIALS_KEY', 'CREDENTIALS_KEYS', 'DATABASE_URL', 'DATABASE_MIGRATION_URL', 'DATABASE_PASSWORD', 'DATABASE_MIGRATION_PASSWORD', 'TEMPORAL_API_KEY'] as const;

/** `env` with every `<SECRET>_FILE` read into `<SECRET>`; problems are returned as config lines. */
function withSecretFiles(env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; problems: string[] } {
  const out: NodeJS.ProcessEnv = { ...env };
  const problems: string[] = [];
  for (const name of SECRET_VARIABLES) {
    const file = env[`${name}_FILE`]?.trim();
    if (!file) continue;
    if (env[name]?.trim()) {
      problems.push(`  ${name}_FILE: set either ${name} or ${name}_FILE, not both`);
      continue;
    }
    try {
      // One trailing newline (as `echo` writes) is not part of the secret.
      out[name] = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      problems.push(`  ${name}_FILE: cannot read ${JSON.stringify(file)} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  return { env: out, problems };
}

/** Thrown when the environment holds an invalid value; its message names each variable and rule. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Reads and validates configuration from `env` (default `process.env`).
 * Throws a ConfigError naming every invalid variable and its rule.
 */
export function loadConfig(rawEnv: NodeJS.ProcessEnv = process.env): Config {
  const { env, problems } = withSecretFiles(rawEnv);
  const result = envSchema.safeParse(env);
  if (result.success && problems.length === 0) return applyPasswords(result.data);
  const lines = (result.success ? [] : result.error.issues).map((issue) => {
    const name = String(issue.path[0] ?? '(environment)');
    const shown = shownValue(name, env[name]);
    const got = shown === undefined ? '' : ` (got ${JSON.stringify(shown)})`;
    return `  ${name}: ${issue.message}${got}`;
  });
  throw new ConfigError(`Invalid configuration:\n${[...problems, ...lines].join('\n')}`);
}

/**
 * DATABASE_URL / DATABASE_MIGRATION_URL with DATABASE_PASSWORD / DATABASE_MIGRATION_PASSWORD put in.
 * Throws a ConfigError naming the URL's variable when the password has no place in it.
 */
function applyPasswords(config: Config): Config {
  const problems: string[] = [];
  const withPassword = (name: string, url: string | undefined, passwordName: string, password: string | undefined) => {
    if (!url || !password) return url;
    const parsed = URL.canParse(url) ? new URL(url) : undefined;
    // Without a host a URL has no user or password part (the setter would drop the password).
    if (!parsed?.host) {
      problems.push(
        `  ${name}: must name its host for ${passwordName} to be put in (postgres://user@host:port/database; a Unix socket directory as the host, percent-encoded: postgres://user@%2Fvar%2Frun%2Fpostgresql/database)`,
      );
      return url;
    }
    // Percent-encoded: node-postgres decodes the URL's password, so every character reaches the
    // server as it was given (the setter would leave a `%` and what follows it as they are).
    parsed.password = encodeURIComponent(password);
    return parsed.toString();
  };
  const applied = {
    ...config,
    DATABASE_URL: withPassword('DATABASE_URL', config.DATABASE_URL, 'DATABASE_PASSWORD', config.DATABASE_PASSWORD),
    DATABASE_MIGRATION_URL: withPassword('DATABASE_MIGRATION_URL', config.DATABASE_MIGRATION_URL, 'DATABASE_MIGRATION_PASSWORD', config.DATABASE_MIGRATION_PASSWORD),
  };
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
  return applied;
}

/** How to reach TEMPORAL_ADDRESS securely: TLS (with its files read) and the API key, when configured. */
export interface TemporalSecurity {
  tls?: {
    serverNameOverride?: string;
    serverRootCACertificate?: Buffer;
    clientCertPair?: { crt: Buffer; key: Buffer };
  };
  apiKey?: string;
}

/**
 * The TLS and API-key options of the client and worker connections to TEMPORAL_ADDRESS. TLS is on
 * when TEMPORAL_TLS is true or any TEMPORAL_TLS_* or TEMPORAL_API_KEY is set (an API key is never
 * sent in clear text). Reads the certificate files; nothing is on without configuration.
 */
export function temporalSecurity(config: Config): TemporalSecurity {
  const tlsOn =
    config.TEMPORAL_TLS || Boolean(config.TEMPORAL_TLS_CA || config.TEMPORAL_TLS_CERT || config.TEMPORAL_TLS_SERVER_NAME || config.TEMPORAL_API_KEY);
  if (!tlsOn) return {};
  const tls: NonNullable<TemporalSecurity['tls']> = {};
  if (config.TEMPORAL_TLS_SERVER_NAME) tls.serverNameOverride = config.TEMPORAL_TLS_SERVER_NAME;
  if (config.TEMPORAL_TLS_CA) tls.serverRootCACertificate = readFileSync(config.TEMPORAL_TLS_CA);
  if (config.TEMPORAL_TLS_CERT && config.TEMPORAL_TLS_KEY) {
    tls.clientCertPair = { crt: readFileSync(config.TEMPORAL_TLS_CERT), key: readFileSync(config.TEMPORAL_TLS_KEY) };
  }
  return { tls, ...(config.TEMPORAL_API_KEY && { apiKey: config.TEMPORAL_API_KEY }) };
}

/** Variables whose value is a secret by name: a config error never shows it. */
const SECRET_NAME = /KEY|SECRET|TOKEN|PASSWORD/i;

/**
 * Variables a config error never shows, though not secrets by name: an address without a scheme
 * (TEMPORAL_ADDRESS, host:port) may be written with credentials before its host
 * (`user:password@host:7233`), and its form alone is the error: the form expected is named, its
 * value never.
 */
const UNSHOWN_VARIABLES: readonly string[] = ['TEMPORAL_ADDRESS'];

/**
 * A URL query parameter whose value is a secret by its name, with that value: node-postgres
 * takes the password from `?password=` (and libpq's `sslpassword`), and collectors or proxies
 * take tokens, keys and signatures there.
 */
const SECRET_QUERY_PARAMETER = /([?&;][^=&#;]*(?:pass|secret|token|key|sig|auth|cred)[^=&#;]*=)[^&#;]*/gi;

/**
 * The value a config error may show for variable `name`: none for a secret by name, nor for an
 * address (UNSHOWN_VARIABLES), nor for a `scheme://` value that does not parse as a URL (where its
 * password ends cannot be told), nor for a secret variable (SECRET_VARIABLES: the database URLs)
 * that is not such a URL at all (a libpq keyword string or a URL without its scheme holds its
 * password as it is), nor for any other value that is not such a URL and holds an `@`
 * (`user:password@host`: where the credentials end cannot be told); for anything else the
 * value with the password part of a URL masked (a URL's user alone too, but a database URL's role),
 * and the value of each query parameter named like a
 * secret (`?password=`) (a `DATABASE_URL` with a password must not land in logs); undefined when
 * nothing may be shown.
 */
export function shownValue(name: string, raw: string | undefined): string | undefined {
  if (raw === undefined || SECRET_NAME.test(name) || UNSHOWN_VARIABLES.includes(name)) return undefined;
  const schemeUrl = /^\s*[a-z][a-z0-9+.-]*:\/\//i.test(raw);
  if (schemeUrl && !URL.canParse(raw.trim())) return undefined;
  if (!schemeUrl && ((SECRET_VARIABLES as readonly string[]).includes(name) || raw.includes('@'))) return undefined;
  // Any `//user:password@` form; up to the last @, as a password may hold one (or a space). A user
  // alone (`//token@`) may be the secret itself, as Git hosts and collectors take a token: masked
  // whole, except in a database URL, whose user is the role it connects as.
  const masked = raw.replace(/(\/\/[^/:@\s]*:)[\s\S]*@/, '$1***@');
  const userless = (SECRET_VARIABLES as readonly string[]).includes(name) ? masked : masked.replace(/(\/\/)[^/:@\s]+@/, '$1***@');
  return userless.replace(SECRET_QUERY_PARAMETER, '$1***');
}

/**
 * Loads configuration for a process entry point, once: `refine` builds from it everything the
 * process reads from its environment (checked requirements, keyring, other settings), and the
 * entry point passes that down. On a ConfigError it prints the message and exits with status 1,
 * so a bad variable stops the process before anything starts.
 */
export function loadConfigOrExit<T = Config>(
  env: NodeJS.ProcessEnv = process.env,
  refine: (config: Config) => T = (config) => config as T,
): T {
  return orExit(() => refine(loadConfig(env)));
}

/** `fn`'s answer; on a ConfigError it prints the message and exits with status 1. */
export function orExit<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}

/**
 * Production processes (`npm run api`, `npm run worker`) need real servers: the embedded defaults
 * are only for `npm start`. Throws a ConfigError naming each missing variable.
 */
export function requireServers(config: Config, processName: string): Config & { DATABASE_URL: string; TEMPORAL_ADDRESS: string } {
  const missing = (['DATABASE_URL', 'TEMPORAL_ADDRESS'] as const).filter((name) => !config[name]);
  if (missing.length > 0) {
    throw new ConfigError(
      `Invalid configuration:\n${missing
        .map((name) => `  ${name}: is required for ${processName} (the embedded default is only for npm start)`)
        .join('\n')}`,
    );
  }
  return config as Config & { DATABASE_URL: string; TEMPORAL_ADDRESS: string };
}

/** The schedule bounds taken from configuration. */
export function scheduleSettings(config: Config): ScheduleSettings {
  return {
    defaultIntervalSeconds: config.DEFAULT_INTERVAL_SECONDS,
    maxOverriddenIntervalSeconds: config.MAX_OVERRIDDEN_INTERVAL_SECONDS,
    jitterPctMin: config.JITTER_PCT_MIN,
    jitterPctMax: config.JITTER_PCT_MAX,
  };
}

/**
 * The provider policy taken from configuration (the shape of connectors' ProviderPolicy): allowed
 * hosts, the test-server opt-in, and the size and time bounds of provider requests and paging.
 */
export function providerPolicy(config: Config) {
  return {
    allowedHosts: config.PROVIDER_HOSTS.map((host) => host.replace(/^\[|\]$/g, '')),
    allowPrivate: config.PROVIDER_ALLOW_PRIVATE,
    maxResponseBytes: config.PROVIDER_MAX_RESPONSE_BYTES,
    timeoutMs: config.PROVIDER_REQUEST_TIMEOUT_SECONDS * 1000,
    maxRecordBytes: config.PROVIDER_MAX_RECORD_BYTES,
    maxPagesPerTask: config.PROVIDER_MAX_PAGES_PER_TASK,
    maxRecordsPerTask: config.PROVIDER_MAX_RECORDS_PER_TASK,
  };
}

/** The default per-tenant limits (TENANT_MAX_*). */
export function tenantLimits(config: Config): TenantLimits {
  return {
    connections: config.TENANT_MAX_CONNECTIONS,
    webhooks: config.TENANT_MAX_WEBHOOKS,
    immediateSyncs: config.TENANT_MAX_IMMEDIATE_SYNCS,
    runningJobs: config.TENANT_MAX_RUNNING_JOBS,
    redeliveriesPerHour: config.TENANT_MAX_REDELIVERIES_PER_HOUR,
    oauthApps: config.TENANT_MAX_OAUTH_APPS,
  };
}

/** The task queue of immediate syncs' activities: IMMEDIATE_SYNC_TASK_QUEUE, or `<TEMPORAL_TASK_QUEUE>-immediate`. */
export function immediateTaskQueue(config: Config): string {
  return config.IMMEDIATE_SYNC_TASK_QUEUE ?? `${config.TEMPORAL_TASK_QUEUE}-immediate`;
}

/**
 * The credentials keyring of a process: `npm run api` and `npm run worker` refuse to start without
 * a key (naming CREDENTIALS_KEY); an invalid key names its variable and rule, never the value.
 */
export function requireKeyring(config: Config, processName: string): Keyring {
  let keyring: Keyring | null;
  try {
    keyring = parseKeyring(config);
  } catch (err) {
    if (err instanceof KeyringProblem) throw new ConfigError(`Invalid configuration:\n  ${err.variable}: ${err.message}`);
    throw err;
  }
  if (!keyring) {
    throw new ConfigError(
      `Invalid configuration:\n  CREDENTIALS_KEY: is required for ${processName} (32 bytes, base64; e.g. openssl rand -base64 32), or CREDENTIALS_KEYS with CREDENTIALS_ACTIVE_KEY_ID`,
    );
  }
  return keyring;
}

/** `npm run api` serves real clients: ADMIN_API_KEY must be set. Throws a ConfigError naming it. */
export function requireAdminKey<C extends Config>(config: C, processName: string): C & { ADMIN_API_KEY: string } {
  if (!config.ADMIN_API_KEY) {
    throw new ConfigError(
      `Invalid configuration:\n  ADMIN_API_KEY: is required for ${processName} (at least 32 random characters; e.g. openssl rand -hex 32)`,
    );
  }
  return config as C & { ADMIN_API_KEY: string };
}
