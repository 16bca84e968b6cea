// The `synctide` CLI end to end: each command runs as its own process (cli/main.ts bundled once
// by the global setup: cliEntry; test/cli-process.test.ts runs it through tsx as bin/synctide.js
// does) against a real API on 127.0.0.1, a Synctide worker
// with the demo connector, the Temporal dev server and Postgres. Asserts on what a person reads,
// on the --json a script parses, and on the exit codes a script branches on.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderBar } from '../cli/progress';
import { startTestApi, TEST_API_KEY, type TestApi } from './helpers/api';
import { cliEntry } from './helpers/cli';
import { receiver, serve, type FakeReceiver } from './helpers/fake-server';
import { useWorkerStack } from './helpers/stack';
import { eventually } from './helpers/worker';

const TASK_QUEUE = 'cli-e2e';
const ROOT = join(import.meta.dirname, '..');
/** Records of a demo connection: 3 resource types (issues, pull_requests, users) × 12. */
const PER_RESOURCE = 12;
const RECORDS = 3 * PER_RESOURCE;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('synctide CLI against a real stack', () => {
  const stack = useWorkerStack('dev-server', TASK_QUEUE);
  let api: TestApi;
  let hooks: FakeReceiver;
  let home: string;
  /** Every output of every run, to prove no key was ever printed. */
  const outputs: string[] = [];

  beforeAll(async () => {
    api = await startTestApi(stack, TASK_QUEUE, { webhookAllowPrivate: true });
    hooks = await receiver(() => 204);
    // HOME (and so ~/.config/synctide) is an empty folder: no stray config file is read.
    home = await mkdtemp(join(tmpdir(), 'synctide-cli-'));
  });
  afterAll(async () => {
    await api?.server.close();
    await hooks?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  /** Runs the CLI with `args`; the env names the test API and admin key unless `env` says otherwise. */
  function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
    const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: home, SYNCTIDE_URL: api.server.url, SYNCTIDE_API_KEY: TEST_API_KEY };
    for (const [name, value] of Object.entries(env)) {
      if (value === undefined) delete childEnv[name];
      else childEnv[name] = value;
    }
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [...cliEntry(), ...args], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => {
        outputs.push(stdout, stderr);
        resolve({ code, stdout, stderr });
      });
    });
  }

  /** Runs the CLI with --json and parses its stdout; fails with its stderr unless it exits 0. */
  async function json<T = any>(args: string[], env: Record<string, string | undefined> = {}): Promise<T> {
    const run = await cli([...args, '--json'], env);
    expect(run.code, run.stderr).toBe(0);
    return JSON.parse(run.stdout) as T;
  }

  /** Creates a demo connection of tenant acme; answers its id. */
  async function createConnection(appKey: string): Promise<string> {
    const created = await json(['connections', 'create', '--tenant', 'acme', '--app-key', appKey, '--provider', 'demo', '--provider-config', JSON.stringify({ records_per_resource: PER_RESOURCE, page_size: 5 }), '--interval', '3600']);
    expect(created).toMatchObject({ tenant_id: 'acme', app_key: appKey, provider: 'demo', status: 'active', schedule: { interval_seconds: 3600 } });
    return created.id;
  }

  let connectionId: string;
  let webhookId: string;
  /** The full sync's job (the next test finds it in the list). */
  let fullJobId: string;

  it('refuses a wrong command line with exit 2 and says why, before any request', async () => {
    const [missing, unknown, badFlag, unknownFlag, noUrl] = await Promise.all([
      cli(['jobs', 'show']),
      cli(['connections', 'frobnicate']),
      cli(['jobs', 'list', '--limit', 'many']),
      cli(['jobs', 'list', '--colour']),
      // No URL anywhere: a usage error naming the ways to give one; with --json, a JSON error.
      cli(['jobs', 'list', '--json'], { SYNCTIDE_URL: undefined }),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('missing <job-id>');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "connections frobnicate"');
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain('--limit must be an integer');
    expect(unknownFlag.code).toBe(2);
    expect(unknownFlag.stderr).toContain("Unknown option '--colour'");
    expect(noUrl.code).toBe(2);
    expect(JSON.parse(noUrl.stderr)).toEqual({ error: { code: 'usage', message: expect.stringContaining('no API URL: set SYNCTIDE_URL'), exit_code: 2 } });
  });

  it('answers --help of a group of two words (`tenants keys`), as `help tenants keys` does, and names its commands when given alone', async () => {
    const [viaHelp, viaFlag, alone] = await Promise.all([cli(['help', 'tenants', 'keys']), cli(['tenants', 'keys', '--help']), cli(['tenants', 'keys'])]);
    for (const run of [viaHelp, viaFlag]) {
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain('tenants keys create');
      expect(run.stdout).not.toContain('tenants limits');
    }
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('tenants keys needs a command: list, create, revoke (synctide tenants keys --help)');
  });

  it('refuses a bad --poll of sync and jobs wait with exit 2 before any request: no job is started', async () => {
    const connectionId = '00000000-0000-4000-8000-000000000001';
    const jobId = '00000000-0000-4000-8000-000000000002';
    // A fake API that would start the job: it records every request it gets.
    const fake = await serve((req, res) => {
      req.resume();
      const accepted = { job_id: jobId, status: 'queued', total_tasks: 1, resource_types: ['issues'], connection_id: connectionId, mode: 'full', workflow_id: `sync-job:${jobId}` };
      res.writeHead(req.method === 'POST' ? 202 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(req.method === 'POST' ? accepted : { error: { code: 'not_found', message: 'no job with that id' } }));
    });
    try {
      const [sync, wait] = await Promise.all([cli(['sync', connectionId, '--full', '--poll', '0'], { SYNCTIDE_URL: fake.url }), cli(['jobs', 'wait', jobId, '--poll', 'soon'], { SYNCTIDE_URL: fake.url })]);
      for (const run of [sync, wait]) {
        expect(run.code, run.stderr).toBe(2);
        expect(run.stderr).toContain('--poll must be a positive number of seconds');
      }
      expect(fake.requests, 'requests sent before the usage error').toEqual([]);
    } finally {
      await fake.close();
    }
  });

  it('refuses an API URL with a user name or password with exit 2, from any source, never printing it (`config` too)', async () => {
    const password = 'hunter2-proxy-password';
    const withCredentials = api.server.url.replace('http://', `http://deploy:${password}@`);
    const file = join(home, 'credentials-in-url.json');
    await writeFile(file, JSON.stringify({ url: withCredentials, api_key: TEST_API_KEY }));
    const runs = await Promise.all([
      cli(['connections', 'list'], { SYNCTIDE_URL: withCredentials }),
      cli(['config'], { SYNCTIDE_URL: withCredentials }),
      cli(['connections', 'list', '--url', api.server.url.replace('http://', 'http://deploy@')]),
      cli(['connections', 'list', '--config', file], { SYNCTIDE_URL: undefined }),
    ]);
    for (const run of runs) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(/^synctide: the API URL from \S+ must not carry a user name or password/);
      expect(run.stdout + run.stderr).not.toContain(password);
      expect(run.stdout + run.stderr).not.toContain('deploy');
    }
  });

  it('reads the URL and key from a config file, and `config` says where they came from without printing the key', async () => {
    const file = join(home, 'other.json');
    await writeFile(file, JSON.stringify({ url: api.server.url, api_key: TEST_API_KEY }));
    const listed = await cli(['connections', 'list', '--config', file], { SYNCTIDE_URL: undefined, SYNCTIDE_API_KEY: undefined });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain('No connections.');
    const [shown, fromEnv] = await Promise.all([json(['config', '--config', file], { SYNCTIDE_URL: undefined, SYNCTIDE_API_KEY: undefined }), cli(['config'])]);
    expect(shown).toEqual({ url: api.server.url, url_from: file, api_key: 'set', api_key_from: file, config_file: file });
    expect(fromEnv.stdout).toMatch(/api key:\s+set \(from SYNCTIDE_API_KEY\)/);
  });

  it('answers exit 3 for a refused key, and for a tenant key on an admin route', async () => {
    const wrong = 'wrong-key-wrong-key-wrong-key-0000';
    // An admin makes a tenant key; the tenant key lists its connections but may not list keys.
    const [refused, key] = await Promise.all([cli(['connections', 'list'], { SYNCTIDE_API_KEY: wrong }), json(['tenants', 'keys', 'create', 'acme', '--name', 'cli-test'])]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/^synctide: unauthorized: /);
    expect(refused.stderr + refused.stdout).not.toContain(wrong);
    expect(key.secret).toEqual(expect.any(String));
    const [own, forbidden, keys] = await Promise.all([
      cli(['connections', 'list', '--json'], { SYNCTIDE_API_KEY: key.secret }),
      cli(['tenants', 'keys', 'list', 'acme', '--json'], { SYNCTIDE_API_KEY: key.secret }),
      json(['tenants', 'keys', 'list', 'acme']),
    ]);
    expect(own.code, own.stderr).toBe(0);
    expect(forbidden.code).toBe(3);
    expect(JSON.parse(forbidden.stderr).error).toMatchObject({ code: 'forbidden', status: 403, exit_code: 3 });
    expect(keys.items.map((k: { id: string }) => k.id)).toContain(key.id);
  });

  it('creates a connection, refuses the same app key again with exit 5, and lists it', async () => {
    connectionId = await createConnection('shop');
    const [again, listed] = await Promise.all([cli(['connections', 'create', '--tenant', 'acme', '--app-key', 'shop', '--provider', 'demo']), cli(['connections', 'list', '--tenant', 'acme'])]);
    expect(again.code).toBe(5);
    expect(again.stderr).toMatch(/^synctide: conflict: /);
    expect(listed.code).toBe(0);
    expect(listed.stdout.split('\n')[0]).toMatch(/^ID\s+TENANT\s+APP KEY\s+PROVIDER\s+STATUS\s+SCHEDULE$/);
    expect(listed.stdout).toMatch(new RegExp(`${connectionId}\\s+acme\\s+shop\\s+demo\\s+active\\s+every 3600s`));
  });

  it('subscribes a webhook (the secret printed once, never listed)', async () => {
    const created = await json(['webhooks', 'create', '--tenant', 'acme', '--endpoint', hooks.url, '--event', 'sync.completed', '--event', 'sync.failed']);
    expect(created).toMatchObject({ tenant_id: 'acme', url: hooks.url, event_types: ['sync.completed', 'sync.failed'] });
    expect(created.secret).toMatch(/^whsec_/);
    webhookId = created.id;
    const [listed, table] = await Promise.all([json(['webhooks', 'list', '--tenant', 'acme']), cli(['webhooks', 'list'])]);
    expect(listed.items).toEqual([{ id: webhookId, tenant_id: 'acme', url: hooks.url, event_types: ['sync.completed', 'sync.failed'], created_at: expect.any(String), disabled_at: null, disabled_reason: null }]);
    expect(table.stdout).toContain(`${webhookId}  acme`);
    expect(table.stdout).toMatch(new RegExp(`${webhookId}\\s+acme\\s+\\S+\\s+sync.completed,sync.failed\\s+enabled\\s`));
    expect(table.stdout).not.toContain(created.secret);
    // Disabled, then enabled again (before any event comes).
    const off = await cli(['webhooks', 'disable', webhookId]);
    expect(off.stdout).toMatch(new RegExp(`^Webhook ${webhookId} is disabled: since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\(disabled through the API at \\S+\\)\\n$`));
    expect((await cli(['webhooks', 'show', webhookId])).stdout).toMatch(/^disabled: +since .*\(disabled through the API at /m);
    expect((await cli(['webhooks', 'enable', webhookId])).stdout).toBe(`Webhook ${webhookId} is enabled.\n`);
    expect((await cli(['webhooks', 'show', webhookId])).stdout).toMatch(/^disabled: +no$/m);
  });

  it('syncs to completion: plain progress lines on stderr off a terminal, the summary on stdout, then --json the finished job', async () => {
    const run = await cli(['sync', connectionId, '--poll', '0.2']);
    expect(run.code, run.stderr).toBe(0);
    const jobId = /^Job (\S+) \(incremental: issues, pull_requests, users\)$/m.exec(run.stderr)?.[1];
    expect(jobId, run.stderr).toBeDefined();
    expect(run.stderr).toContain(`job ${jobId} completed: 100% (3/3 tasks`);
    expect(run.stderr).not.toContain('\r');
    expect(run.stdout).toMatch(new RegExp(`^Job ${jobId} completed: \\d+ records \\(\\d+ added, \\d+ updated, \\d+ deleted, \\d+ unchanged\\) in [\\d.]+s\\.\\n$`));

    const full = await json(['sync', connectionId, '--full', '--poll', '0.2']);
    expect(full).toMatchObject({ connection_id: connectionId, job_type: 'full', status: 'completed', total_tasks: 3, completed_tasks: 3, progress_percentage: 100 });
    expect(full.processed_entities).toBe(RECORDS);
    fullJobId = full.id;
  });

  it('lists and shows the jobs; an unknown job is exit 4', async () => {
    const jobs = await json(['jobs', 'list', '--connection', connectionId]);
    expect(jobs.items.length).toBeGreaterThanOrEqual(2);
    expect(jobs.items.every((j: { connection_id: string }) => j.connection_id === connectionId)).toBe(true);
    // The full sync is listed (not necessarily first: the connection may have queued its next
    // scheduled run since).
    expect(jobs.items.find((j: { id: string }) => j.id === fullJobId)).toMatchObject({ job_type: 'full', status: 'completed' });
    const [shown, missing, cancel] = await Promise.all([
      cli(['jobs', 'show', fullJobId, '--tasks']),
      cli(['jobs', 'show', '00000000-0000-4000-8000-000000000000']),
      // A finished job cannot be cancelled: a conflict.
      cli(['jobs', 'cancel', fullJobId, '--json']),
    ]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^status:\s+completed$/m);
    expect(shown.stdout).toMatch(/^issues\s+completed\s+12\s+0\s*$/m);
    expect(missing.code).toBe(4);
    expect(missing.stderr).toMatch(/^synctide: not_found: /);
    expect(cancel.code).toBe(5);
    expect(JSON.parse(cancel.stderr).error.status).toBe(409);
  });

  it('tails the records: --limit stops after n and prints the cursor, --cursor resumes, --once stops when caught up', async () => {
    const [first, human, unknown] = await Promise.all([
      cli(['records', 'tail', connectionId, '--limit', '5', '--json']),
      cli(['records', 'tail', connectionId, '--once', '--resource-type', 'users']),
      cli(['records', 'tail', '00000000-0000-4000-8000-000000000000', '--once']),
    ]);
    expect(first.code, first.stderr).toBe(0);
    const firstLines = first.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(firstLines).toHaveLength(5);
    expect(firstLines[0]).toMatchObject({ change: 'insert', resource_type: expect.any(String), external_id: expect.any(String) });
    // With --json the cursor is a JSON object on stderr, as everything there is.
    const cursor = (JSON.parse(first.stderr) as { cursor?: string }).cursor;
    expect(cursor, first.stderr).toBeDefined();
    const rest = await cli(['records', 'tail', connectionId, '--cursor', cursor!, '--once', '--json']);
    expect(rest.code, rest.stderr).toBe(0);
    const restLines = rest.stdout.trim().split('\n').map((l) => JSON.parse(l));
    const all = [...firstLines, ...restLines].map((c) => `${c.resource_type}/${c.external_id}`);
    expect(all).toHaveLength(RECORDS);
    expect(new Set(all).size).toBe(RECORDS);
    expect(human.stdout.trim().split('\n')).toHaveLength(PER_RESOURCE);
    expect(human.stdout).toMatch(/^insert\s+users\/\S+\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/m);
    // The feed of an unknown connection is exit 4.
    expect(unknown.code).toBe(4);
  });

  it('lists the webhook deliveries of the syncs and redelivers one', async () => {
    const deliveries = await eventually(async () => {
      const page = await json(['webhooks', 'deliveries', webhookId]);
      return page.items.length >= 2 && page.items.every((d: { status: string }) => d.status === 'delivered') ? page : undefined;
    });
    expect(deliveries.items[0]).toMatchObject({ event_type: 'sync.completed', status: 'delivered', last_status_code: 204 });
    const deliveryId: string = deliveries.items[0].id;
    const sent = () => hooks.received.filter((r) => r.headers['synctide-delivery-id'] === deliveryId).length;
    expect(sent()).toBe(1);
    const again = await json(['webhooks', 'redeliver', webhookId, deliveryId]);
    expect(again).toEqual({ delivery_id: deliveryId, status: 'pending' });
    await eventually(async () => (sent() === 2 ? true : undefined));
  });

  it("rotates a webhook's signing secret: the new one printed once, the overlap's end said; a bad overlap is exit 2, an unknown webhook exit 4", async () => {
    const rotated = await cli(['webhooks', 'rotate-secret', webhookId]);
    expect(rotated.code, rotated.stderr).toBe(0);
    const secret = /^New signing secret \(shown once; verify deliveries with a Standard Webhooks library\): (whsec_\S+)$/m.exec(rotated.stdout)?.[1];
    expect(secret, rotated.stdout).toBeDefined();
    expect(rotated.stdout).toMatch(new RegExp(`^Rotated the signing secret of webhook ${webhookId}\nNew signing secret .*\nUntil \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC deliveries are signed with both secrets: switch your receiver to the new one before then\\.\\n$`));
    const now = await json(['webhooks', 'rotate-secret', webhookId, '--expire-previous-after', '0']);
    expect(now).toEqual({ id: webhookId, tenant_id: 'acme', url: hooks.url, event_types: ['sync.completed', 'sync.failed'], created_at: expect.any(String), disabled_at: null, disabled_reason: null, secret: expect.stringMatching(/^whsec_/), previous_secret_expires_at: null });
    expect(now.secret).not.toBe(secret);
    // The new secret is never shown again.
    expect((await cli(['webhooks', 'show', webhookId, '--json'])).stdout).not.toContain(now.secret);
    const [negative, tooLong, unknown] = await Promise.all([
      cli(['webhooks', 'rotate-secret', webhookId, '--expire-previous-after', '-1']),
      cli(['webhooks', 'rotate-secret', webhookId, '--expire-previous-after', '604801']),
      cli(['webhooks', 'rotate-secret', '00000000-0000-4000-8000-000000000000']),
    ]);
    expect([negative.code, tooLong.code, unknown.code]).toEqual([2, 2, 4]);
    expect(tooLong.stderr).toMatch(/^synctide: invalid_request: expire_previous_after_seconds: /);
  });

  it('pauses (a sync is then refused with exit 5), resumes and deletes a connection (then exit 4)', async () => {
    const id = await createConnection('to-delete');
    expect(await json(['connections', 'pause', id])).toMatchObject({ id, status: 'paused' });
    const refused = await cli(['sync', id]);
    expect(refused.code).toBe(5);
    expect(refused.stderr).toContain('connection_paused');
    expect((await cli(['connections', 'resume', id])).stdout).toBe(`Resumed connection ${id} (status active).\n`);
    const purge = await json(['connections', 'delete', id]);
    expect(purge).toMatchObject({ connection_id: id });
    // The purge runs in the background: wait for it in-process, then ask the CLI once.
    await eventually(async () => ((await api.call('GET', `/connections/${id}`)).status === 404 ? true : undefined));
    const gone = await cli(['connections', 'show', id]);
    expect(gone.code).toBe(4);
    expect(gone.stderr).toMatch(/^synctide: not_found: /);
  });

  it('exits 7 when the job it follows fails, with the failure in the summary', async () => {
    const config = { records_per_resource: PER_RESOURCE, page_size: 5, fail: { resource: 'users', at_page: 1, kind: 'permanent' } };
    const created = await json(['connections', 'create', '--tenant', 'acme', '--app-key', 'doomed', '--provider', 'demo', '--provider-config', JSON.stringify(config)]);
    const run = await cli(['sync', created.id, '--full', '--poll', '0.2']);
    expect(run.code, run.stderr).toBe(7);
    expect(run.stderr).toMatch(/^job \S+ failed: /m);
    expect(run.stdout).toMatch(/^Job \S+ failed: .*users.*: \d+ records/);
  });

  it('never printed the admin key', () => {
    expect(outputs.length).toBeGreaterThan(20);
    for (const output of outputs) expect(output).not.toContain(TEST_API_KEY);
  });

  it('draws the terminal progress bar from the job', () => {
    expect(renderBar({ progress_percentage: 50, completed_tasks: 1, failed_tasks: 0, total_tasks: 2, processed_entities: 1234, status: 'running' }, 10)).toBe(
      '[#####.....]  50%  1/2 tasks  1,234 records  running',
    );
    expect(renderBar({ progress_percentage: 100, completed_tasks: 2, failed_tasks: 1, total_tasks: 3, processed_entities: 0, status: 'failed' }, 4)).toBe(
      '[####] 100%  2/3 tasks (1 failed)  0 records  failed',
    );
  });
});
