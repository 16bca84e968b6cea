// `npm run migrate`: applies pending migrations and exits, as the owner role. Production runs it
// once per deploy (the compose file's `migrate` service) with DATABASE_MIGRATION_URL (or
// DATABASE_URL) naming the role that owns the schema, and starts the API and workers with
// MIGRATE_ON_START=false and a runtime role that has DML rights only.
import { migrateWhenReachable } from '../db/migrate';
import { ConfigError, loadConfigOrExit } from '../lib/config';
import { createLogger } from '../lib/logger';

const config = loadConfigOrExit(process.env, (c) => {
  const url = c.DATABASE_MIGRATION_URL ?? c.DATABASE_URL;
  if (!url) throw new ConfigError('Invalid configuration:\n  DATABASE_MIGRATION_URL: is required for npm run migrate (or DATABASE_URL)');
  return { ...c, url };
});
const logger = createLogger(config.LOG_LEVEL, { process: 'migrate' });

// A Postgres that does not accept connections yet (starting beside this job) is waited for,
// every 2 s for at most DATABASE_STARTUP_WAIT_SECONDS, each wait logged; any other error ends it.
migrateWhenReachable(config.url, {
  timeoutMs: config.DATABASE_STARTUP_WAIT_SECONDS * 1000,
  onWait: ({ attempt, waitedSeconds, error }) =>
    logger.warn({ attempt, waited_seconds: waitedSeconds, bound_seconds: config.DATABASE_STARTUP_WAIT_SECONDS, error }, 'waiting for Postgres to accept connections'),
  log: (msg) => logger.debug({ component: 'migrate' }, msg),
}).then(
  (applied) => logger.info({ applied }, 'migrations applied'),
  (err: Error) => {
    logger.error({ err }, 'migration failed');
    process.exitCode = 1;
  },
);
