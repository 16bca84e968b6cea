// The compose deployment's database roles, made for real on the tests' Postgres server: the SQL
// of infra/compose/postgres-init.sh with role and database names made unique for this run, and
// random passwords in place of the secret files.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { inject } from 'vitest';
import { databaseUrl } from './database';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The roles and databases of one run of the init script. */
export interface ComposeRoles {
  /** Each name of the init script → its unique name in this run. */
  names: Record<'synctide_owner' | 'synctide_app' | 'temporal_visibility' | 'temporal' | 'synctide', string>;
  /** The psql variables the script reads from secret files (owner_password, app_password, temporal_password). */
  passwords: Record<string, string>;
  /** URL of `database` as `user` with `password`. */
  urlAs(user: string, password: string, database: string): string;
  /** The schema owner's URL of the synctide database (migrations). */
  ownerUrl: string;
  /** The DML-only runtime role's URL of the synctide database (API and workers). */
  appUrl: string;
  /** Drops the databases and roles. */
  drop(): Promise<void>;
}

/** Runs the init script's psql input: \set from secret files, \connect, statements with :'vars'. */
export async function createComposeRoles(): Promise<ComposeRoles> {
  const suffix = `_t${randomBytes(4).toString('hex')}`;
  const names = {
    synctide_owner: `synctide_owner${suffix}`,
    synctide_app: `synctide_app${suffix}`,
    temporal_visibility: `temporal_visibility${suffix}`,
    temporal: `temporal${suffix}`,
    synctide: `synctide${suffix}`,
  };
  const passwords: Record<string, string> = {};
  const urlAs = (user: string, password: string, database: string) => {
    const url = new URL(databaseUrl(inject('pgAdminUrl'), database));
    url.username = user;
    url.password = password;
    return url.toString();
  };
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
    if (statement.trim() !== '') throw new Error(`init script ends inside a statement: ${statement}`);
  } finally {
    await client.end();
  }
  return {
    names,
    passwords,
    urlAs,
    ownerUrl: urlAs(names.synctide_owner, passwords.owner_password!, names.synctide),
    appUrl: urlAs(names.synctide_app, passwords.app_password!, names.synctide),
    async drop() {
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
    },
  };
}
