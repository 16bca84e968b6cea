import path from 'node:path';
import pg from 'pg';
import type { Config } from '../lib/config';
import type { Logger } from '../lib/logger';
import { startEmbeddedPostgres } from './embedded-postgres';

/** Name of the database the embedded server holds Synctide's data in. */
export const EMBEDDED_DATABASE = 'synctide';

/** The Postgres Synctide uses, and how to let go of it. */
export interface Database {
  url: string;
  /** `external` for DATABASE_URL, `embedded` for the server started here. */
  kind: 'external' | 'embedded';
  /** The embedded server's superuser password file (embedded only). */
  passwordFile?: string;
  stop(): Promise<void>;
}

/**
 * `DATABASE_URL` when set; otherwise an embedded Postgres kept under `DATA_DIR/postgres` (its
 * superuser password in `DATA_DIR/postgres-password`), started here and stopped by `stop()`.
 * `onSpawn` gets that stop as soon as the server process is spawned (see EmbeddedPostgresOptions);
 * when this throws, the server is stopped.
 */
export async function openDatabase(config: Config, logger: Logger, onSpawn?: (stop: () => Promise<void>) => void): Promise<Database> {
  if (config.DATABASE_URL) {
    return { url: config.DATABASE_URL, kind: 'external', stop: async () => undefined };
  }
  const server = await startEmbeddedPostgres({
    dataDir: path.join(config.DATA_DIR, 'postgres'),
    port: config.EMBEDDED_PG_PORT,
    onLog: (line) => logger.debug({ component: 'postgres' }, line),
    onSpawn,
  });
  try {
    await createDatabaseIfMissing(server.adminUrl, EMBEDDED_DATABASE);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return { url: server.urlFor(EMBEDDED_DATABASE), kind: 'embedded', passwordFile: server.passwordFile, stop: () => server.stop() };
}

/** CREATE DATABASE, treating "already exists" (also from a concurrent creator) as success. */
export async function createDatabaseIfMissing(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (rowCount) return;
    await client.query(`create database ${client.escapeIdentifier(name)}`);
  } catch (err) {
    // 42P04 duplicate_database; 23505 when two creators race on the catalog.
    const code = (err as { code?: string }).code;
    if (code !== '42P04' && code !== '23505') throw err;
  } finally {
    await client.end();
  }
}
