// With --json, stdout carries the result as JSON and every line the CLI writes on stderr is one JSON
// object too, so a script parses both streams the same way: an error `{"error": …}`, a read made
// again after an answer asking for it `{"retry": …}`, where a feed tail stopped `{"cursor": …}`.
// Before, a retried read under --json printed nothing at all (a script could not tell a wait from
// a hang), the tail's cursor was a plain `cursor: …` line, and `synctide --json` with no command
// printed the plain help text. Real Postgres, the real API app listening (no Temporal behind it:
// reading a job or the feed never reaches Temporal) behind a proxy that answers the first reads
// 503 busy, and the CLI as a child process.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_BUSY_MESSAGE } from '../api/errors';
import type { HttpServer } from '../lib/http';
import { listenWithoutTemporal } from './helpers/api';
import { startCli } from './helpers/cli';
import { useTestDatabase } from './helpers/database';
import { serve, type FakeServer } from './helpers/fake-server';
import { connectionWithThreeRecords } from './helpers/http-sync';

const db = useTestDatabase();

/** Every line of `stderr` parsed as JSON; a line that is not JSON fails the test, naming it. */
function jsonLines(stderr: string): Record<string, any>[] {
  return stderr.split('\n').filter((line) => line !== '').map((line) => {
    try {
      return JSON.parse(line) as Record<string, any>;
    } catch {
      throw new Error(`a line on stderr is not JSON: ${JSON.stringify(line)} (stderr: ${JSON.stringify(stderr)})`);
    }
  });
}

describe('synctide --json: stderr is JSON lines', () => {
  let api: HttpServer;
  let proxy: FakeServer;
  let home: string;
  let connectionId: string;
  let jobId: string;
  /** Reads the proxy answers 503 busy itself before passing the next one on, per path. */
  const busyLeft = new Map<string, number>();

  beforeAll(async () => {
    connectionId = await connectionWithThreeRecords(db.pool, 'cli-json-stderr');
    jobId = (await db.pool.query<{ id: string }>('select id from sync_jobs where connection_id = $1', [connectionId])).rows[0]!.id;
    home = await mkdtemp(join(tmpdir(), 'synctide-cli-json-'));
    ({ server: api } = await listenWithoutTemporal(db.pool, 'cli-json-stderr'));
    proxy = await serve(async (req, res) => {
      const path = (req.url ?? '').split('?')[0]!;
      const left = busyLeft.get(path) ?? 0;
      if (left > 0) {
        busyLeft.set(path, left - 1);
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(JSON.stringify({ error: { code: 'busy', message: DATABASE_BUSY_MESSAGE } }));
        return;
      }
      const answer = await fetch(`${api.url}${req.url}`, { headers: { authorization: String(req.headers.authorization ?? '') } });
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(await answer.text());
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await api?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('no command: a usage error as JSON on stderr (not the help text), exit 2', async () => {
    const ran = await startCli(home, api.url, ['--json']).ended;
    expect(ran.code, ran.stderr).toBe(2);
    expect(ran.stdout).toBe('');
    expect(jsonLines(ran.stderr)).toEqual([{ error: { code: 'usage', message: expect.stringMatching(/no command/), exit_code: 2 } }]);
  });

  it('jobs wait: each read made again is a retry object on stderr; the job is the JSON on stdout', async () => {
    busyLeft.set(`/jobs/${jobId}`, 2);
    const ran = await startCli(home, proxy.url, ['jobs', 'wait', jobId, '--json', '--poll', '0.2']).ended;
    expect([0, 7], ran.stderr).toContain(ran.code);
    expect(JSON.parse(ran.stdout)).toMatchObject({ id: jobId });
    const busy = { code: 'busy', message: DATABASE_BUSY_MESSAGE, exit_code: 1, status: 503 };
    expect(jsonLines(ran.stderr)).toEqual([
      { retry: { reading: 'job', job_id: jobId, attempt: 1, max_attempts: 5, wait_ms: 1000, error: busy } },
      { retry: { reading: 'job', job_id: jobId, attempt: 2, max_attempts: 5, wait_ms: 2000, error: busy } },
    ]);
  });

  it('records tail: reads made again and the cursor it stopped at are JSON objects on stderr', async () => {
    busyLeft.set(`/connections/${connectionId}/records`, 2);
    const ran = await startCli(home, proxy.url, ['records', 'tail', connectionId, '--json', '--once', '--poll', '0.2']).ended;
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { external_id: string }).external_id)).toEqual(['a', 'b', 'c']);
    const busy = { code: 'busy', message: DATABASE_BUSY_MESSAGE, exit_code: 1, status: 503 };
    expect(jsonLines(ran.stderr)).toEqual([
      { retry: { reading: 'feed', connection_id: connectionId, attempt: 1, max_attempts: 5, wait_ms: 1000, error: busy } },
      { retry: { reading: 'feed', connection_id: connectionId, attempt: 2, max_attempts: 5, wait_ms: 2000, error: busy } },
      { cursor: expect.stringMatching(/^\S+$/) },
    ]);
  });
});
