import { existsSync } from 'node:fs';
import { z } from 'zod';
import { MIN_INTERVAL_SECONDS, type ScheduleSettings } from '../policy/schedule';

const port = (fallback: number) =>
  z.coerce
    .number({ error: 'must be an integer port number between 1 and 65535' })
    .int('must be an integer port number between 1 and 65535')
    .min(1, 'must be an integer port number between 1 and 65535')
    .max(65535, 'must be an integer port number between 1 and 65535')
    .default(fallback);

const positiveInt = (fallback: number, rule = 'must be a positive integer') =>
  z.coerce.number({ error: rule }).int(rule).positive(rule).default(fallback);

const fraction = (fallback: number) =>
  z.coerce
    .number({ error: 'must be a number between 0 and 1' })
    .min(0, 'must be a number between 0 and 1')
    .max(1, 'must be a number between 0 and 1')
    .default(fallback);

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === '' ? undefined : v))
  .optional();

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

    DATABASE_URL: optionalString.pipe(
      z
        .string()
        .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// connection URL')
        .optional(),
    ),
    DATABASE_POOL_MAX: positiveInt(10),
    DATA_DIR: z.string().min(1).default('.data'),
    EMBEDDED_PG_PORT: port(54329),

    TEMPORAL_ADDRESS: optionalString.pipe(
      z
        .string()
        .regex(/^[^\s:/]+:\d{1,5}$/, 'must be host:port, for example localhost:7233')
        .optional(),
    ),
    TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
    TEMPORAL_TASK_QUEUE: z.string().min(1).default('synctide'),
    TEMPORAL_DEV_PORT: port(7233),
    TEMPORAL_UI_PORT: port(8233),

    API_HOST: z.string().min(1).default('127.0.0.1'),
    API_PORT: port(3000),
    ADMIN_API_KEY: optionalString.pipe(
      z.string().min(16, 'must be at least 16 characters').optional(),
    ),
    // Open by default so Prometheus can scrape without the admin key.
    METRICS_REQUIRE_AUTH: boolean(false),
    WORKER_METRICS_PORT: port(9464),
    WORKER_SHUTDOWN_GRACE_SECONDS: positiveInt(30),
    // Workflow runs a worker keeps in memory between tasks. A sleeping connection outside the cache
    // costs one replay of its short run history when it wakes (see BENCHMARKS.md for the figures).
    WORKER_MAX_CACHED_WORKFLOWS: z.coerce
      .number({ error: 'must be an integer ≥ 0' })
      .int('must be an integer ≥ 0')
      .min(0, 'must be an integer ≥ 0')
      .default(250),
    // A workflow bundle built by `npm run build:workflows`; unset, the worker bundles at start.
    WORKFLOW_BUNDLE_PATH: optionalString.pipe(
      z.string().refine((file) => existsSync(file), 'no file there; build it with `npm run build:workflows -- <file>`').optional(),
    ),

    SCHEDULER_TICK_SECONDS: positiveInt(60),
    DEFAULT_INTERVAL_SECONDS: positiveInt(900),
    MAX_OVERRIDDEN_INTERVAL_SECONDS: positiveInt(86400),
    JITTER_PCT_MIN: fraction(0),
    // Below 1: a jitter of a whole interval would make next_run_at equal scheduled_at.
    JITTER_PCT_MAX: z.coerce
      .number({ error: 'must be a number from 0 up to (not including) 1' })
      .min(0, 'must be a number from 0 up to (not including) 1')
      .lt(1, 'must be a number from 0 up to (not including) 1')
      .default(0.2),
    RETENTION_DAYS: positiveInt(7),
    TOMBSTONE_RETENTION_DAYS: positiveInt(30),
    // Webhook URLs may name loopback and private addresses (tests and `npm start` only: otherwise a
    // tenant could make the platform call internal services).
    WEBHOOK_ALLOW_PRIVATE: boolean(false),
    // How long `POST /sync` with `immediate: true` may run before it answers 504 with what it fetched.
    IMMEDIATE_SYNC_TIMEOUT_SECONDS: positiveInt(60),
    // Pages one sync task may fetch before it fails as permanent (no job can page forever).
    MAX_PAGES_PER_TASK: positiveInt(10000),

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
    // No interval below the smallest one a schedule may ask for, default or maximum alike.
    for (const name of ['DEFAULT_INTERVAL_SECONDS', 'MAX_OVERRIDDEN_INTERVAL_SECONDS'] as const) {
      if (env[name] < MIN_INTERVAL_SECONDS) {
        ctx.addIssue({ code: 'custom', path: [name], message: `must be at least ${MIN_INTERVAL_SECONDS} (the smallest allowed interval)` });
      }
    }
  });

/** Validated configuration. */
export type Config = z.infer<typeof envSchema>;

/** Thrown when the environment holds an invalid value; its message names each variable and rule. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Reads and validates configuration from `env` (default `process.env`).
 * Throws a ConfigError naming every invalid variable and its rule.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const result = envSchema.safeParse(env);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const name = String(issue.path[0] ?? '(environment)');
    const raw = env[name];
    const got = raw === undefined ? '' : ` (got ${JSON.stringify(raw)})`;
    return `  ${name}: ${issue.message}${got}`;
  });
  throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
}

/**
 * Loads configuration for a process entry point: on a ConfigError it prints the message and
 * exits with status 1, so a bad variable stops the process before anything starts.
 */
export function loadConfigOrExit<T = Config>(
  env: NodeJS.ProcessEnv = process.env,
  refine: (config: Config) => T = (config) => config as T,
): T {
  try {
    return refine(loadConfig(env));
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

/** `npm run api` serves real clients: ADMIN_API_KEY must be set. Throws a ConfigError naming it. */
export function requireAdminKey<C extends Config>(config: C, processName: string): C & { ADMIN_API_KEY: string } {
  if (!config.ADMIN_API_KEY) {
    throw new ConfigError(
      `Invalid configuration:\n  ADMIN_API_KEY: is required for ${processName} (at least 16 characters; e.g. openssl rand -hex 32)`,
    );
  }
  return config as C & { ADMIN_API_KEY: string };
}
