// `synctide jobs wait` (and `sync`, which follows its job the same way) keeps following a job
// through an answer that asks to be tried again (503 busy or unavailable, 502, 504, 429): the job
// goes on on the server, so one such answer to one poll is no failure of the job or the command.
// Real Postgres and the real API app listening (no Temporal behind it: reading a job never
// reaches Temporal), behind a proxy on 127.0.0.1 that answers the first polls 503 busy as the
// API does when its pool is exhausted; the CLI as a child process.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_BUSY_MESSAGE } from '../api/errors';
import type { HttpServer } from '../lib/http';
import { listenWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { cliEntry } from './helpers/cli';
import { useTestDatabase } from './helpers/database';
import { serve, type FakeServer } from './helpers/fake-server';

const db = useTestDatabase();
const ROOT = join(import.meta.dirname, '..');

describe('synctide jobs wait through answers that ask to be tried again', () => {
  let api: HttpServer;
  let proxy: FakeServer;
  let home: string;
  /** Polls of GET /jobs/{id} the proxy answered itself (503 busy) before it passed them on. */
  let busyAnswers = 0;
  const BUSY_POLLS = 2;

  beforeAll(async () => {
    ({ server: api } = await listenWithoutTemporal(db.pool, 'cli-job-wait-retries'));
    proxy = await serve(async (req, res) => {
      if (req.method === 'GET' && req.url?.startsWith('/jobs/') && busyAnswers < BUSY_POLLS) {
        busyAnswers++;
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(JSON.stringify({ error: { code: 'busy', message: DATABASE_BUSY_MESSAGE } }));
        return;
      }
      const answer = await fetch(`${api.url}${req.url}`, { method: req.method, headers: { authorization: String(req.headers.authorization ?? '') } });
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
      res.end(await answer.text());
    });
    home = await mkdtemp(join(tmpdir(), 'synctide-cli-wait-'));
  });
  afterAll(async () => {
    await proxy?.close();
    await api?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('a job polled through two 503 busy answers is followed to its end: exit 0 and its summary', async () => {
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('acme', 'demo', 'wait') returning id`);
    const jobId = randomUUID();
    await db.pool.query(`insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, started_at) values ($1, $2, 'acme', 'full', 'api', 'running', now())`, [jobId, rows[0]!.id]);

    // The reads made again wait 100 ms times the count, not 1 s: the same reads, sooner.
    const env = { PATH: process.env.PATH ?? '', HOME: home, SYNCTIDE_URL: proxy.url, SYNCTIDE_API_KEY: TEST_API_KEY, SYNCTIDE_RETRY_WAIT_MS: '100' };
    const child = spawn(process.execPath, [...cliEntry(), 'jobs', 'wait', jobId, '--poll', '0.2'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const ended = new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    // The job ends once the CLI has read it running through the proxy (after the busy answers).
    const running = new RegExp(`job ${jobId} running`);
    const deadline = Date.now() + 30_000;
    while (!running.test(stderr) && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await db.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);
    const code = await ended;

    expect(code, stderr).toBe(0);
    expect(busyAnswers).toBe(BUSY_POLLS);
    expect(stdout).toMatch(new RegExp(`^Job ${jobId} completed`));
  });
});
