// `synctide records tail` that stops on a failure (the API gone, an error answer) says where it
// was, as it does when it stops on --limit or Ctrl-C: the cursor on stderr, from which a later tail
// resumes without reading the feed again from the start. Real Postgres, a fake provider on
// 127.0.0.1, the sync activity run directly, the real API app listening (no Temporal behind it: a
// feed read never reaches Temporal), and the CLI as a child process.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpServer } from '../lib/http';
import { listenWithoutTemporal } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { DATABASE_BUSY_MESSAGE } from '../api/errors';
import { serve } from './helpers/fake-server';
import { startCli } from './helpers/cli';
import { connectionWithThreeRecords } from './helpers/http-sync';
import { eventually } from './helpers/worker';

const db = useTestDatabase();

describe('synctide records tail stopped by a failure', () => {
  let api: HttpServer | undefined;
  let home: string;
  let connectionId: string;

  beforeAll(async () => {
    connectionId = await connectionWithThreeRecords(db.pool, 'cli-tail-stops');
    home = await mkdtemp(join(tmpdir(), 'synctide-cli-tail-'));
  });
  afterAll(async () => {
    await api?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  const start = (url: string, args: string[]) => startCli(home, url, args);
  /** Starts a tail whose reads made again wait 100 ms times the count (not 1 s): what it does is the same, sooner. */
  const startQuick = (url: string, args: string[]) => startCli(home, url, args, { SYNCTIDE_RETRY_WAIT_MS: '100' });

  it('prints the cursor it reached when the API goes away while it follows, and a tail from that cursor reads nothing twice', async () => {
    ({ server: api } = await listenWithoutTemporal(db.pool, 'cli-tail-stops'));
    const following = startQuick(api.url, ['records', 'tail', connectionId, '--json', '--poll', '0.2']);
    // It printed the feed and follows it.
    await eventually(async () => (following.out.stdout.trim().split('\n').filter(Boolean).length === 3 ? true : undefined), { describe: async () => following.out });
    await api.close();
    api = undefined;
    const stopped = await following.ended;
    expect(stopped.code, stopped.stderr).toBe(1);
    expect(stopped.stderr).toMatch(/cannot reach/);
    // With --json every line on stderr is a JSON object: the retries, the cursor, the error.
    const cursor = stopped.stderr.trim().split('\n').map((line) => JSON.parse(line) as { cursor?: string }).find((line) => line.cursor)?.cursor;
    expect(cursor, `the cursor on stderr: ${stopped.stderr}`).toBeDefined();

    ({ server: api } = await listenWithoutTemporal(db.pool, 'cli-tail-stops'));
    const resumed = await start(api.url, ['records', 'tail', connectionId, '--json', '--once', '--cursor', cursor!]).ended;
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toBe('');

    // A cursor the API refuses is not offered to resume from.
    const refused = await start(api.url, ['records', 'tail', connectionId, '--once', '--cursor', 'not-a-cursor']).ended;
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).not.toMatch(/^cursor: /m);
  });

  it('follows on through reads answered 503 busy (the API asks to be tried again), until Ctrl-C stops it', async () => {
    ({ server: api } = await listenWithoutTemporal(db.pool, 'cli-tail-stops'));
    const target = api.url;
    let reads = 0;
    let busy = 0;
    const proxy = await serve(async (req, res) => {
      reads++;
      // The second and third reads (once caught up) are answered as an exhausted pool answers them.
      if (reads === 2 || reads === 3) {
        busy++;
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        res.end(JSON.stringify({ error: { code: 'busy', message: DATABASE_BUSY_MESSAGE } }));
        return;
      }
      const answer = await fetch(`${target}${req.url}`, { headers: { authorization: String(req.headers.authorization ?? '') } });
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(await answer.text());
    });
    try {
      const following = startQuick(proxy.url, ['records', 'tail', connectionId, '--json', '--poll', '0.2']);
      await eventually(async () => (reads >= 5 || following.exited() ? true : undefined), { describe: async () => following.out });
      following.interrupt();
      const stopped = await following.ended;
      expect(stopped.code, stopped.stderr).toBe(130);
      expect(busy).toBe(2);
      expect(stopped.stdout.trim().split('\n')).toHaveLength(3);
      expect(stopped.stderr).toMatch(/^\{"cursor":"\S+"\}$/m);
    } finally {
      await proxy.close();
    }
  });
});
