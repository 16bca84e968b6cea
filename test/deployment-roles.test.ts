// The compose deployment's database roles, run for real: the SQL of infra/compose/postgres-init.sh
// (with role and database names made unique for this run) on the tests' Postgres server, then the
// migrations as the owner and the platform's statements as the runtime role, which must not be
// able to change the schema or reach Temporal's databases.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../db/migrate';
import { countActiveJobsByStatus } from '../db/models/jobs';
import { createComposeRoles, type ComposeRoles } from './helpers/compose-roles';

describe('compose database roles', () => {
  let roles: ComposeRoles;
  let names: ComposeRoles['names'];
  let passwords: ComposeRoles['passwords'];
  let urlAs: ComposeRoles['urlAs'];
  beforeAll(async () => {
    roles = await createComposeRoles();
    ({ names, passwords, urlAs } = roles);
  });
  afterAll(async () => {
    await roles?.drop();
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
