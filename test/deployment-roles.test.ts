// The compose deployment's database roles, run for real: the SQL of infra/compose/postgres-init.sh
// (with role and database names made unique for this run) on the tests' Postgres server, then the
// migrations as the owner and the platform's statements as the runtime role, which must not be
// able to change the schema or reach Temporal's databases.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { migrate } from '../db/migrate';
import { countActiveJobsByStatus } from '../db/models/jobs';
import { databaseUrl } from './helpers/database';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const suffix = `_t${randomBytes(4).toString('hex')}`;
const names = {
  synctide_owner: `synctide_owner${suffix}`,
  synctide_app: `synctide_app${suffix}`,
  temporal_visibility: `temporal_visibility${suffix}`,
  temporal: `temporal${suffix}`,
  synctide: `synctide${suffix}`,
};
const passwords: Record<string, string> = {};

/** `url` (the tests' superuser URL) as `user` with `password` on `database`. */
function urlAs(user: string, password: string, database: string): string {
  const url = new URL(databaseUrl(inject('pgAdminUrl'), database));
  url.username = user;
  url.password = password;
  return url.toString();
}

/** Runs the init script's psql input: \set from secret files, \connect, statements with :'vars'. */
async function runInitScript(): Promise<void> {
  const script = readFileSync(path.join(ROOT, 'infra/compose/postgres-init.sh'), 'utf8');
  let sql = /<<'SQL'\n([\s\S]*?)\nSQL\n/.exec(script)![1]!;
  for (const [name, unique] of Object.entries(names)) sql = sql.replace(new RegExp(`\\b${name}\\b(?!_)`, 'g'), unique);
  let client = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await client.connect();
  try {
    let statement = '';
    for (const raw of sql.split('\n')) {
      const line = raw.replace(/--.*$/, '');
      const set = /^\\set (\w+) `cat \/run\/secrets\/(\w+)`$/.exec(line);
      if (set) {
        passwords[set[1]!] = randomBytes(16).toString('hex');
        continue;
      }
      const connect = /^\\connect (\w+)$/.exec(line);
      if (connect) {
        await client.end();
        client = new pg.Client({ connectionString: databaseUrl(inject('pgAdminUrl'), connect[1]!) });
        await client.connect();
        continue;
      }
      statement += `${line}\n`;
      if (line.trimEnd().endsWith(';')) {
        const text = statement.replace(/:'(\w+)'/g, (_, v: string) => client.escapeLiteral(passwords[v]!));
        await client.query(text);
        statement = '';
      }
    }
    expect(statement.trim()).toBe('');
  } finally {
    await client.end();
  }
}

describe('compose database roles', () => {
  beforeAll(async () => {
    await runInitScript();
  });
  afterAll(async () => {
    const admin = new pg.Client({ connectionString: inject('pgAdminUrl') });
    await admin.connect();
    try {
      for (const db of [names.synctide, names.temporal, names.temporal_visibility]) {
        await admin.query(`drop database if exists ${admin.escapeIdentifier(db)} with (force)`);
      }
      for (const role of [names.synctide_app, names.synctide_owner, names.temporal]) {
        await admin.query(`drop role if exists ${admin.escapeIdentifier(role)}`);
      }
    } finally {
      await admin.end();
    }
  });

  it('lets the owner migrate and the runtime role read and write rows, but not change the schema', async () => {
    expect(Object.keys(passwords).sort()).toEqual(['app_password', 'owner_password', 'temporal_password']);
    const applied = await migrate(urlAs(names.synctide_owner, passwords.owner_password!, names.synctide));
    expect(applied.length).toBeGreaterThan(10);

    const app = new pg.Pool({ connectionString: urlAs(names.synctide_app, passwords.app_password!, names.synctide), max: 2 });
    try {
      const { rows } = await app.query<{ id: string }>(
        `insert into connections (tenant_id, provider_slug, app_key) values ('t', 'github', 'k') returning id`,
      );
      await app.query(`update connections set status = 'paused' where id = $1`, [rows[0]!.id]);
      await app.query(`select nextval('records_change_seq')`);
      expect(await countActiveJobsByStatus(app)).toBeInstanceOf(Map);
      await app.query(`delete from connections where id = $1`, [rows[0]!.id]);

      const refused = async (text: string) => app.query(text).then(() => 'allowed', (err: { code?: string }) => err.code);
      expect(await refused('create table intruder (id int)')).toBe('42501');
      expect(await refused('drop table connections')).toBe('42501');
      expect(await refused('alter table connections add column x int')).toBe('42501');
      expect(await refused('truncate connections')).toBe('42501');
    } finally {
      await app.end();
    }
  });

  it('keeps the runtime role out of Temporal’s databases and Temporal’s role out of Synctide’s', async () => {
    const attempt = async (url: string) => {
      const client = new pg.Client({ connectionString: url });
      const outcome = await client.connect().then(() => 'connected', (err: { code?: string }) => err.code);
      await client.end().catch(() => undefined);
      return outcome;
    };
    expect(await attempt(urlAs(names.synctide_app, passwords.app_password!, names.temporal))).toBe('42501');
    expect(await attempt(urlAs(names.temporal, passwords.temporal_password!, names.synctide))).toBe('42501');
    expect(await attempt(urlAs(names.temporal, passwords.temporal_password!, names.temporal_visibility))).toBe('connected');
  });
});
