import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';

/** Folder of the numbered SQL migrations. */
export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/** Table in which node-pg-migrate records applied migrations. */
export const MIGRATIONS_TABLE = 'pgmigrations';

/**
 * Applies pending migrations and returns the names of those it applied (empty when up to date).
 * node-pg-migrate takes a Postgres advisory lock; `wait` makes a second process that starts at the
 * same moment block until the first has finished, then find nothing to do.
 */
export async function migrate(databaseUrl: string, log: (msg: string) => void = () => undefined): Promise<string[]> {
  const applied = await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    migrationsTable: MIGRATIONS_TABLE,
    direction: 'up',
    count: Infinity,
    singleTransaction: true,
    checkOrder: true,
    advisoryLockMode: 'wait',
    log,
    logger: { debug: () => undefined, info: log, warn: log, error: log },
  });
  return applied.map((m) => m.name);
}
