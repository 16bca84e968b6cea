import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import pg from 'pg';

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
  // The migrations run on a connection of ours, closed before this returns: node-pg-migrate does
  // not wait for the one it opens itself to close, so a database dropped (or a server stopped)
  // right after a migration could cut that connection and raise an error nobody handles.
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const applied = await runner({
      dbClient: client,
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
  } finally {
    await client.end();
  }
}

/** Error codes of a Postgres that is not reachable or not accepting connections yet. */
const NOT_YET_REACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', '57P03']);

/**
 * True when `err` says Postgres cannot be reached or is still starting (refused, unresolvable,
 * `57P03` the database system is starting up, a connection cut off at once): waiting may help.
 * A wrong password, a missing database or a failing migration is no such error.
 */
export function isNotYetReachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && NOT_YET_REACHABLE.has(code)) return true;
  return err instanceof Error && /Connection terminated unexpectedly/.test(err.message);
}

/**
 * `migrate`, retried every `retryMs` while Postgres is not reachable yet (a compose or Kubernetes
 * start where the database comes up beside the migration job), for at most `timeoutMs`; each
 * wait is reported to `onWait`. Any other failure is thrown at once.
 */
export async function migrateWhenReachable(
  databaseUrl: string,
  opts: { timeoutMs: number; retryMs?: number; onWait?: (info: { attempt: number; waitedSeconds: number; error: string }) => void; log?: (msg: string) => void },
): Promise<string[]> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await migrate(databaseUrl, opts.log);
    } catch (err) {
      const waited = Date.now() - started;
      if (!isNotYetReachable(err)) throw err;
      if (waited >= opts.timeoutMs) throw new Error(`gave up waiting for Postgres after ${Math.round(waited / 1000)} s: ${(err as Error).message}`, { cause: err });
      opts.onWait?.({ attempt, waitedSeconds: Math.round(waited / 1000), error: (err as Error).message || String((err as { code?: string }).code) });
      await new Promise((resolve) => setTimeout(resolve, Math.min(opts.retryMs ?? 2000, Math.max(0, opts.timeoutMs - waited))));
    }
  }
}
