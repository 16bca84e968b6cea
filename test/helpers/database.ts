import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { createDatabaseIfMissing } from '../../infra/database';
import { createPool, type Pool } from '../../db/pool';

/** A fresh, migrated database of its own for one test file. */
export interface TestDatabase {
  url: string;
  pool: Pool;
  /** Closes the pool and drops the database. */
  drop(): Promise<void>;
}

/** Builds the URL of `database` on the same server as `baseUrl`. */
export function databaseUrl(baseUrl: string, database: string): string {
  const url = new URL(baseUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** A database name no other test uses. */
function freshName(): string {
  return `synctide_test_${randomBytes(6).toString('hex')}`;
}

/** Creates an empty database (no migrations) and returns its URL. */
export async function createEmptyDatabase(): Promise<string> {
  const adminUrl = inject('pgAdminUrl');
  const name = freshName();
  await createDatabaseIfMissing(adminUrl, name);
  return databaseUrl(adminUrl, name);
}

/**
 * Creates a database with every migration applied and opens a pool on it: a copy of the template
 * the global setup migrated (the same tables, functions and `pgmigrations` rows as migrating it).
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = freshName();
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`create database ${client.escapeIdentifier(name)} template ${client.escapeIdentifier(inject('pgTemplateDatabase'))}`);
  } finally {
    await client.end();
  }
  const url = databaseUrl(adminUrl, name);
  const pool = createPool(url, 20);
  return {
    url,
    pool,
    async drop() {
      await pool.end();
      await dropDatabase(url);
    },
  };
}

/**
 * Registers beforeAll/afterAll hooks that give the calling file (or describe block) a fresh,
 * migrated database, dropped afterwards; the returned object is filled in by the time the file's
 * own later hooks and its tests run.
 */
export function useTestDatabase(): TestDatabase {
  const db = {} as TestDatabase;
  beforeAll(async () => {
    Object.assign(db, await createTestDatabase());
  });
  afterAll(async () => {
    await db.drop?.();
  });
  return db;
}

/** Drops the database of `url`, disconnecting anyone still on it. */
export async function dropDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  const client = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await client.connect();
  try {
    await client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`);
  } finally {
    await client.end();
  }
}

/**
 * `pool` with a count of the statements given to its `query` whose text contains `fragment` (a
 * lookup the test expects to be made, or not, as requests come).
 */
export function countingQueries(pool: Pool, fragment: string): { pool: Pool; count: () => number } {
  let count = 0;
  const counted = new Proxy(pool, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop !== 'query' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
      return (...args: unknown[]) => {
        if (typeof args[0] === 'string' && args[0].includes(fragment)) count += 1;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { pool: counted, count: () => count };
}

/** `pool` with every statement it runs (through `query`, or a client it lends) recorded in `statements`. */
export function countingPool(pool: Pool): { pool: Pool; statements: string[] } {
  const statements: string[] = [];
  const counted = <T extends object>(target: T, connect?: () => Promise<pg.PoolClient>): T =>
    new Proxy(target, {
      get(t, key) {
        if (key === 'connect' && connect) return async () => counted(await connect());
        const value: unknown = Reflect.get(t, key, t);
        if (typeof value !== 'function') return value;
        if (key !== 'query') return value.bind(t);
        return (...args: unknown[]) => {
          const first = args[0];
          statements.push(typeof first === 'string' ? first : (first as { text: string }).text);
          return (value as (...a: unknown[]) => unknown).apply(t, args);
        };
      },
    });
  return { pool: counted(pool, () => pool.connect()), statements };
}

/** How many backends of `pool`'s database wait for a lock. */
export async function lockWaits(pool: Pool): Promise<number> {
  return (await pool.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rowCount ?? 0;
}

/** Polls `what` every 20 ms until it is true; fails after `tries` polls (500: 10 s). */
export async function until(what: () => Promise<boolean>, tries = 500): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await what()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`waited ${(tries * 20) / 1000} s in vain`);
}

/**
 * A pg pool of a test's own on a test database. `pool.end()` resolves once its connections are
 * asked to close, before their sockets have: one still closing when the file's database is dropped
 * (which ends its sessions: 57P01, "terminating connection due to administrator command") reports
 * that as the pool's error, which, unheard, fails the whole run as an uncaught exception. That one
 * is expected; any other error of an idle connection is thrown as before.
 */
export function ownPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', (err: Error & { code?: string }) => {
    if (err.code !== '57P01') throw err;
  });
  return pool;
}
