import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { migrate } from '../db/migrate';
import { createEmptyDatabase, dropDatabase, useTestDatabase } from './helpers/database';

async function schemaFingerprint(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(`
      select string_agg(table_name || '.' || column_name || ':' || data_type, ',' order by table_name, column_name) as columns,
             (select string_agg(indexname, ',' order by indexname) from pg_indexes where schemaname = 'public') as indexes
      from information_schema.columns where table_schema = 'public'`);
    return JSON.stringify(rows[0]);
  } finally {
    await client.end();
  }
}

/** The up and the down SQL of migration `file`. */
function upAndDown(file: string): [string, string] {
  const [up, down] = readFileSync(new URL(`../db/migrations/${file}`, import.meta.url), 'utf8').split('-- Down Migration');
  return [up!, down!];
}

describe('migrations', () => {
  it('apply once, then are a no-op, leaving the schema unchanged', async () => {
    const url = await createEmptyDatabase();
    try {
      const first = await migrate(url);
      expect(first.length).toBeGreaterThanOrEqual(6);
      expect(first[0]).toMatch(/^0001_/);
      const before = await schemaFingerprint(url);
      const second = await migrate(url);
      expect(second).toEqual([]);
      expect(await schemaFingerprint(url)).toBe(before);
      for (const table of ['connections', 'sync_jobs', 'sync_tasks', 'sync_state', 'sync_job_logs',
        'connector_failure_stats', 'alerts', 'records']) {
        expect(before).toContain(`${table}.`);
      }
    } finally {
      await dropDatabase(url);
    }
  });

  it('the newest migration goes down and up again cleanly, and its down removes what its up added', async () => {
    const url = await createEmptyDatabase();
    const client = new pg.Client({ connectionString: url });
    try {
      await migrate(url);
      const before = await schemaFingerprint(url);
      const [up49, down49] = upAndDown('0049_oauth_grants.sql');
      const [up48, down48] = upAndDown('0048_credential_refresh_lease.sql');
      await client.connect();
      await client.query(down49);
      expect(await schemaFingerprint(url)).not.toContain('oauth_grant');
      await client.query(down48);
      expect(await schemaFingerprint(url)).not.toContain('credential_lease');
      await client.query(up48);
      await client.query(up49);
      expect(await schemaFingerprint(url)).toBe(before);
    } finally {
      await client.end();
      await dropDatabase(url);
    }
  });

  it("0078 goes down and up again cleanly: its down removes a webhook's disabled state, its up brings it back, and a disabled time without a reason is refused", async () => {
    const url = await createEmptyDatabase();
    const client = new pg.Client({ connectionString: url });
    try {
      await migrate(url);
      const before = await schemaFingerprint(url);
      expect(before).toContain('webhooks.disabled_at:timestamp with time zone');
      expect(before).toContain('webhooks.disabled_reason:text');
      const [up78, down78] = upAndDown('0078_webhook_disabled.sql');
      await client.connect();
      await client.query(down78);
      expect(await schemaFingerprint(url)).not.toContain('disabled_reason');
      await client.query(up78);
      expect(await schemaFingerprint(url)).toBe(before);
      await expect(
        client.query(`insert into webhooks (tenant_id, url, event_types, secret, disabled_at) values ('acme', 'https://example.com', '{sync.completed}', 's', now())`),
      ).rejects.toThrow(/webhooks_disabled_check/);
    } finally {
      await client.end();
      await dropDatabase(url);
    }
  });

  it('0075 goes down with a job queued behind a running one of its type: the queued one is cancelled, saying why, and nothing else changes', async () => {
    const url = await createEmptyDatabase();
    const client = new pg.Client({ connectionString: url });
    try {
      await migrate(url);
      const before = await schemaFingerprint(url);
      const [up76, down76] = upAndDown('0076_record_deselected_epoch.sql');
      const [up75, down75] = upAndDown('0075_queued_job_behind_running.sql');
      await client.connect();
      const connection = async (appKey: string) =>
        (await client.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('acme', 'demo', $1) returning id`, [appKey])).rows[0]!.id;
      const job = async (connectionId: string, jobType: string, status: string, trigger = 'api') =>
        (await client.query<{ id: string }>(
          `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status) values ($1, 'acme', $2, $3, $4) returning id`,
          [connectionId, jobType, trigger, status],
        )).rows[0]!.id;
      // A pair (queued behind running, and behind retrying), and a queued job alone; a backfill
      // queued beside a running incremental job is no pair (backfills have their own index).
      const paired = await connection('paired');
      const running = await job(paired, 'incremental', 'running');
      const behindRunning = await job(paired, 'incremental', 'queued');
      const retrying = await job(paired, 'full', 'retrying');
      const behindRetrying = await job(paired, 'full', 'queued');
      const backfill = await job(paired, 'incremental', 'queued', 'backfill');
      const alone = await job(await connection('alone'), 'incremental', 'queued');
      // An open task of the queued job (with what its pass has seen), and one of the running job.
      const task = async (jobId: string, status: string) =>
        (await client.query<{ id: string }>(`insert into sync_tasks (job_id, resource_type, status) values ($1, 'issues', $2) returning id`, [jobId, status])).rows[0]!.id;
      const queuedTask = await task(behindRunning, 'pending');
      const runningTask = await task(running, 'processing');
      await client.query(`insert into sync_seen (task_id, external_id) values ($1, 'a'), ($2, 'b')`, [queuedTask, runningTask]);

      await client.query(down76);
      await client.query(down75);

      const jobs = await client.query<{ id: string; status: string; finished: boolean; last_error: string | null }>(
        `select id, status, finished_at is not null as finished, last_error from sync_jobs order by created_at, id`,
      );
      const byId = new Map(jobs.rows.map((row) => [row.id, row]));
      for (const id of [behindRunning, behindRetrying]) {
        expect(byId.get(id)).toMatchObject({ status: 'cancelled', finished: true, last_error: expect.stringMatching(/queued behind a running job of its type/) });
      }
      expect(byId.get(running)).toMatchObject({ status: 'running', finished: false, last_error: null });
      expect(byId.get(retrying)).toMatchObject({ status: 'retrying', finished: false, last_error: null });
      expect(byId.get(backfill)).toMatchObject({ status: 'queued', finished: false, last_error: null });
      expect(byId.get(alone)).toMatchObject({ status: 'queued', finished: false, last_error: null });
      const tasks = await client.query<{ id: string; status: string; completed: boolean; error_message: string | null }>(
        `select id, status, completed_at is not null as completed, error_message from sync_tasks`,
      );
      expect(tasks.rows.find((t) => t.id === queuedTask)).toMatchObject({ status: 'cancelled', completed: true, error_message: byId.get(behindRunning)!.last_error });
      expect(tasks.rows.find((t) => t.id === runningTask)).toMatchObject({ status: 'processing', completed: false, error_message: null });
      const seen = await client.query<{ task_id: string }>(`select task_id from sync_seen`);
      expect(seen.rows).toEqual([{ task_id: runningTask }]);
      // The old rule holds again: one active job per connection and type.
      await expect(job(paired, 'incremental', 'queued')).rejects.toMatchObject({ code: '23505', constraint: 'sync_jobs_one_active_per_type' });

      await client.query(up75);
      await client.query(up76);
      expect(await schemaFingerprint(url)).toBe(before);
    } finally {
      await client.end();
      await dropDatabase(url);
    }
  });

  it('0049 moves each oauth2 connection\'s sealed credentials unchanged into a grant of the same id, and its down moves them back', async () => {
    const url = await createEmptyDatabase();
    const client = new pg.Client({ connectionString: url });
    try {
      await migrate(url);
      const [up, down] = upAndDown('0049_oauth_grants.sql');
      await client.connect();
      await client.query(down);
      const app = randomUUID();
      await client.query(
        `insert into oauth_apps (id, tenant_id, name, client_id, client_secret, authorize_url, token_url, redirect_uri)
         values ($1, 't1', 'app', 'cid', 'enc:v1:default:x', 'https://p.example/a', 'https://p.example/t', 'https://c.example/cb')`, [app]);
      const oauth = randomUUID();
      const token = randomUUID();
      await client.query(
        `insert into connections (id, tenant_id, provider_slug, app_key, credentials, credential_kind, oauth_app_id, credential_lease_token, credential_lease_until)
         values ($1, 't1', 'http', 'o', to_jsonb('enc:v1:default:oauth-blob'::text), 'oauth2', $2, gen_random_uuid(), now() + interval '1 minute'),
                ($3, 't1', 'http', 'k', to_jsonb('enc:v1:default:token-blob'::text), 'token', null, null, null)`,
        [oauth, app, token],
      );
      await client.query(up);
      const grants = await client.query('select id, tenant_id, oauth_app_id, credentials, credential_lease_token is not null as leased from oauth_grants');
      expect(grants.rows).toEqual([{ id: oauth, tenant_id: 't1', oauth_app_id: app, credentials: 'enc:v1:default:oauth-blob', leased: true }]);
      const conns = await client.query('select id, credentials, credential_kind, oauth_grant_id from connections order by app_key');
      expect(conns.rows).toEqual([
        { id: token, credentials: 'enc:v1:default:token-blob', credential_kind: 'token', oauth_grant_id: null },
        { id: oauth, credentials: null, credential_kind: 'oauth2', oauth_grant_id: oauth },
      ]);
      // A second connection of the tenant shares the grant; another tenant's connection cannot name it.
      const sharer = randomUUID();
      await client.query(
        `insert into connections (id, tenant_id, provider_slug, app_key, credential_kind, oauth_app_id, oauth_grant_id) values ($1, 't1', 'http', 's', 'oauth2', $2, $3)`,
        [sharer, app, oauth],
      );
      await expect(client.query(
        `insert into connections (tenant_id, provider_slug, app_key, credential_kind, oauth_app_id, oauth_grant_id) values ('t2', 'http', 'x', 'oauth2', $1, $2)`, [app, oauth],
      )).rejects.toThrow(/foreign key/);
      // Down: the grant goes back into the connection whose id it has; the sharer needs reauthorization.
      await client.query(down);
      const back = await client.query('select id, credentials, status from connections order by app_key');
      expect(back.rows).toEqual([
        { id: token, credentials: 'enc:v1:default:token-blob', status: 'active' },
        { id: oauth, credentials: 'enc:v1:default:oauth-blob', status: 'active' },
        { id: sharer, credentials: null, status: 'needs_reauth' },
      ]);
      // A grant no connection names any more is deleted with its secrets.
      await client.query(up);
      await client.query(`update connections set credential_kind = 'token', oauth_app_id = null, oauth_grant_id = null, credentials = to_jsonb('enc:v1:default:t'::text) where id = $1`, [oauth]);
      expect((await client.query('select 1 from oauth_grants')).rowCount).toBe(0);
    } finally {
      await client.end();
      await dropDatabase(url);
    }
  });

  it('return only once their connection is closed: ending every session of the database right after cuts none of theirs', async () => {
    const url = await createEmptyDatabase();
    const name = new URL(url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: url });
    // node-pg-migrate's own connection was closed without waiting: ended by the server just after,
    // it raised an error nobody handled (seen when a test dropped its database right after).
    const unhandled: unknown[] = [];
    const keep = (err: unknown) => unhandled.push(err);
    process.on('uncaughtException', keep);
    try {
      await migrate(url);
      await admin.connect();
      for (let i = 0; i < 20; i++) {
        await migrate(url);
        await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('uncaughtException', keep);
      await admin.end();
      await dropDatabase(url);
    }
  });

  it('are safe when two processes migrate the same database at once', async () => {
    const url = await createEmptyDatabase();
    try {
      const [a, b] = await Promise.all([migrate(url), migrate(url)]);
      // One applied everything, the other waited on the advisory lock and found nothing to do.
      expect([a.length, b.length].sort()).toEqual([0, Math.max(a.length, b.length)]);
      expect(Math.max(a.length, b.length)).toBeGreaterThanOrEqual(6);
    } finally {
      await dropDatabase(url);
    }
  });
});

describe('data model constraints', () => {
  const db = useTestDatabase();

  async function newConnection(appKey = `app_${randomUUID().slice(0, 8)}`): Promise<{ id: string; tenant: string }> {
    const tenant = `tenant-${randomUUID().slice(0, 8)}`;
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key) values ($1, 'demo', $2) returning id`,
      [tenant, appKey],
    );
    return { id: rows[0]!.id, tenant };
  }

  function insertJob(conn: { id: string; tenant: string }, jobType: string, status = 'queued') {
    return db.pool.query(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger, status) values ($1, $2, $3, 'schedule', $4)`,
      [conn.id, conn.tenant, jobType, status],
    );
  }

  it('rejects a second queued and a second running incremental job for one connection, and accepts one of each and a full one beside them', async () => {
    const conn = await newConnection();
    await insertJob(conn, 'incremental');
    await expect(insertJob(conn, 'incremental')).rejects.toMatchObject({
      code: '23505',
      constraint: 'sync_jobs_one_queued_per_type',
    });
    // One queued behind one running (or retrying): a sync asking for types the running job does not sync.
    await insertJob(conn, 'incremental', 'running');
    await expect(insertJob(conn, 'incremental', 'running')).rejects.toMatchObject({ code: '23505', constraint: 'sync_jobs_one_running_per_type' });
    await expect(insertJob(conn, 'incremental', 'retrying')).rejects.toMatchObject({ code: '23505', constraint: 'sync_jobs_one_running_per_type' });
    await insertJob(conn, 'full');
    const { rows } = await db.pool.query(
      `select job_type, count(*)::int as n from sync_jobs where connection_id = $1 group by job_type order by job_type`,
      [conn.id],
    );
    expect(rows).toEqual([
      { job_type: 'full', n: 1 },
      { job_type: 'incremental', n: 2 },
    ]);
  });

  it('accepts a new incremental job once the previous one has finished', async () => {
    const conn = await newConnection();
    await insertJob(conn, 'incremental', 'completed');
    await insertJob(conn, 'incremental', 'failed');
    await insertJob(conn, 'incremental', 'queued');
    const { rows } = await db.pool.query(`select count(*)::int as n from sync_jobs where connection_id = $1`, [conn.id]);
    expect(rows[0].n).toBe(3);
  });

  it('checks statuses, app keys and tenant uniqueness', async () => {
    const conn = await newConnection('same-key');
    await expect(insertJob(conn, 'incremental', 'in_progress')).rejects.toMatchObject({ code: '23514' });
    await expect(newConnection('bad key!')).rejects.toMatchObject({ code: '23514' });
    await expect(
      db.pool.query(`insert into connections (tenant_id, provider_slug, app_key) values ($1, 'demo', 'same-key')`, [conn.tenant]),
    ).rejects.toMatchObject({ code: '23505' });
  });

  it('cascades a connection delete to its jobs and tasks', async () => {
    const conn = await newConnection();
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into sync_jobs (connection_id, tenant_id, job_type, trigger) values ($1, $2, 'full', 'manual') returning id`,
      [conn.id, conn.tenant],
    );
    await db.pool.query(`insert into sync_tasks (job_id, resource_type) values ($1, 'issues')`, [rows[0]!.id]);
    await db.pool.query(`delete from connections where id = $1`, [conn.id]);
    const left = await db.pool.query(`select count(*)::int as n from sync_tasks where job_id = $1`, [rows[0]!.id]);
    expect(left.rows[0].n).toBe(0);
  });
});
