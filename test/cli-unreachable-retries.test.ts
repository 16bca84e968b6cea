// `synctide jobs wait` (and `sync`, which follows its job the same way) and `synctide records tail`
// keep following through an API they cannot reach for a while (the connection refused or reset: a
// restart, a deploy): a read that reached no API is made again like one answered 503, up to 5 times
// in a row, each after a longer wait, and only then does the command end with exit 1, naming the
// API and the cause. A command whose first request reached no API ends at once (exit 1): a wrong
// URL or an API that is down is said without waiting. Real Postgres and the real API app listening
// on 127.0.0.1 (no Temporal behind it: reading a job or the feed never reaches Temporal), closed and
// listening again on the same port; the CLI as a child process.
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listen, type HttpServer } from '../lib/http';
import { apiAppWithoutTemporal } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { startCli } from './helpers/cli';
import { connectionWithThreeRecords } from './helpers/http-sync';
import { eventually } from './helpers/worker';

const db = useTestDatabase();

/** The API listening on 127.0.0.1:`port` (0: a free port); `reads` counts the requests it took. */
async function startApi(port = 0): Promise<{ server: HttpServer; port: number; reads: () => number }> {
  const app = apiAppWithoutTemporal(db.pool, 'cli-unreachable-retries');
  let reads = 0;
  const server = await listen({ fetch: (request) => ((reads += 1), app.fetch(request)) }, '127.0.0.1', port);
  return { server, port: Number(new URL(server.url).port), reads: () => reads };
}

/** A TCP server on 127.0.0.1:`port` that resets every connection it accepts (no HTTP answer). */
async function resetting(port: number): Promise<Server> {
  const server = createServer((socket: Socket) => socket.resetAndDestroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return server;
}

describe('synctide following through an API it cannot reach', () => {
  let home: string;
  let connectionId: string;
  const open: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    connectionId = await connectionWithThreeRecords(db.pool, 'cli-unreachable');
    home = await mkdtemp(join(tmpdir(), 'synctide-cli-unreachable-'));
  });
  afterEach(async () => {
    for (const close of open.splice(0)) await close();
  });
  afterAll(async () => {
    if (home) await rm(home, { recursive: true, force: true });
  });

  /**
   * Starts the CLI with `args` against `url`, killed after the test if it is still running;
   * `extraEnv` besides the URL and key.
   */
  const start = (url: string, args: string[], extraEnv: Record<string, string> = {}) => {
    const run = startCli(home, url, args, extraEnv);
    open.push(() => run.kill());
    return run;
  };

  /** Waits until `text()` matches `pattern`. */
  const until = (text: () => string, pattern: RegExp) => eventually(async () => (pattern.test(text()) ? true : undefined), { timeoutMs: 30_000, describe: async () => text() });

  it('jobs wait follows a job through a reset connection and a refused one, and reads it to its end once the API listens again', async () => {
    const { rows } = await db.pool.query<{ id: string }>(`insert into connections (tenant_id, provider_slug, app_key) values ('acme', 'demo', 'wait-unreachable') returning id`);
    const jobId = randomUUID();
    await db.pool.query(`insert into sync_jobs (id, connection_id, tenant_id, job_type, trigger, status, started_at) values ($1, $2, 'acme', 'full', 'api', 'running', now())`, [jobId, rows[0]!.id]);
    const first = await startApi();
    const url = first.server.url;
    const waiting = start(url, ['jobs', 'wait', jobId, '--poll', '0.2']);
    await until(() => waiting.out.stderr, new RegExp(`job ${jobId} running`));

    // The API goes away: first something that resets every connection, then nothing at all.
    await first.server.close();
    const reset = await resetting(first.port);
    await until(() => waiting.out.stderr, /reading job \S+ again \(1\/5\)/);
    await new Promise<void>((resolve) => reset.close(() => resolve()));
    await until(() => waiting.out.stderr, /ECONNREFUSED; reading job \S+ again \(\d\/5\)/);

    const second = await startApi(first.port);
    open.push(() => second.server.close());
    await db.pool.query(`update sync_jobs set status = 'completed', finished_at = now() where id = $1`, [jobId]);
    const done = await waiting.ended;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toMatch(new RegExp(`^Job ${jobId} completed`));
    expect(done.stderr).toMatch(new RegExp(`cannot reach ${url}: \\S+; reading job ${jobId} again \\(1/5\\)`));
    expect(second.reads()).toBeGreaterThan(0);
  });

  it('records tail follows the feed through a refused connection, reading on once the API listens again', async () => {
    const first = await startApi();
    const url = first.server.url;
    const following = start(url, ['records', 'tail', connectionId, '--poll', '0.2']);
    await until(() => following.out.stdout, /(insert\s+items\/[abc][^\n]*\n){3}/);
    await first.server.close();
    await until(() => following.out.stderr, new RegExp(`cannot reach ${url}: ECONNREFUSED; reading the feed again \\(1/5\\)`));

    const second = await startApi(first.port);
    open.push(() => second.server.close());
    // It reads the feed on from the API listening again, then Ctrl-C stops it where it was.
    await eventually(async () => (second.reads() >= 2 ? true : undefined), { timeoutMs: 30_000, describe: async () => following.out });
    following.interrupt();
    const stopped = await following.ended;
    expect(stopped.code, stopped.stderr).toBe(130);
    expect(stopped.stdout.trim().split('\n')).toHaveLength(3);
    expect(stopped.stderr).toMatch(/^cursor: \S+$/m);
  });

  it('records tail ends with exit 1 naming the API and the cause after 5 reads in a row reached no API, with the cursor to resume from', async () => {
    const api = await startApi();
    const url = api.server.url;
    // Nothing listens again here: the five reads made again wait 100 ms times the count, not 1 s.
    const following = start(url, ['records', 'tail', connectionId, '--poll', '0.2'], { SYNCTIDE_RETRY_WAIT_MS: '100' });
    await until(() => following.out.stdout, /(insert\s+items\/[abc][^\n]*\n){3}/);
    await api.server.close();
    const stopped = await following.ended;
    expect(stopped.code, stopped.stderr).toBe(1);
    expect(stopped.stderr.match(/; reading the feed again \(\d\/5\)/g)).toHaveLength(5);
    expect(stopped.stderr).toMatch(new RegExp(`^synctide: cannot reach ${url}: ECONNREFUSED`, 'm'));
    expect(stopped.stderr).toMatch(/^cursor: \S+$/m);
  });

  it('a first request that reaches no API ends the command at once with exit 1, nothing made again', async () => {
    const api = await startApi();
    const url = api.server.url;
    await api.server.close();
    const waited = await start(url, ['jobs', 'wait', randomUUID(), '--poll', '0.2']).ended;
    expect(waited.code, waited.stderr).toBe(1);
    expect(waited.stderr).toBe(`synctide: cannot reach ${url}: ECONNREFUSED\n`);
    const tailed = await start(url, ['records', 'tail', connectionId, '--poll', '0.2']).ended;
    expect(tailed.code, tailed.stderr).toBe(1);
    expect(tailed.stderr).toBe(`synctide: cannot reach ${url}: ECONNREFUSED\n`);
  });
});
