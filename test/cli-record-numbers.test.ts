// The CLI's `records tail` prints a record's numbers as the feed served them: an integer past 2^53
// (an int64 amount or foreign key), a fraction with more digits than a double holds, an exponent
// past a double's range keep their digits in `--json` and `--data`, and everything else prints as
// it did. Real Postgres, a fake provider on 127.0.0.1 that writes its JSON by hand, the sync
// activity run directly, the real API app listening (no Temporal behind it: a feed read never
// reaches Temporal), and the CLI as a child process.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpServer } from '../lib/http';
import { listenWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { cliEntry } from './helpers/cli';
import { useTestDatabase } from './helpers/database';
import { testActivityDeps } from './helpers/deps';
import { closeFakeServers, serve } from './helpers/fake-server';
import { createHttpConnection, runPass } from './helpers/http-sync';

const db = useTestDatabase();
const ROOT = join(import.meta.dirname, '..');
const OLD = new Date(Date.now() - 2 * 3_600_000).toISOString();

describe('synctide records tail: numbers in record data', () => {
  let api: HttpServer;
  let home: string;
  let connectionId: string;

  beforeAll(async () => {
    const fake = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        `{"items": [{"id": "a", "amount": 12345678901234567891, "fk": -9223372036854775807, "ratio": 0.12345678901234567890, "huge": 1e400, ` +
          `"small": 42, "half": 0.5, "list": [9007199254740993, 1], "text": "12345678901234567891", "updated_at": "${OLD}"}, ` +
          `{"id": "b", "title": "plain", "n": 7, "updated_at": "${OLD}"}]}`,
      );
    });
    connectionId = await createHttpConnection(
      db.pool,
      { base_url: fake.url, pagination: { type: 'none' }, resources: { items: { path: '/items', records: 'items', id: 'id', updated_at: 'updated_at' } } },
      'cli-numbers',
    );
    await runPass(testActivityDeps({ pool: db.pool }).deps, connectionId, 'items', 'full');
    await closeFakeServers();
    ({ server: api } = await listenWithoutTemporal(db.pool, 'cli-record-numbers'));
    home = await mkdtemp(join(tmpdir(), 'synctide-cli-numbers-'));
  });
  afterAll(async () => {
    await api?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  /** Runs the CLI with `args` against the test API; answers its exit code and output. */
  function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const env = { PATH: process.env.PATH ?? '', HOME: home, SYNCTIDE_URL: api.url, SYNCTIDE_API_KEY: TEST_API_KEY };
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [...cliEntry(), ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  it('prints them with the digits the feed served, in --json and --data, and everything else as before', async () => {
    const [json, human] = await Promise.all([cli(['records', 'tail', connectionId, '--once', '--json']), cli(['records', 'tail', connectionId, '--once', '--data'])]);
    expect(json.code, json.stderr).toBe(0);
    expect(human.code, human.stderr).toBe(0);
    const feed = await fetch(`${api.url}/connections/${connectionId}/records`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } }).then((r) => r.json() as Promise<{ items: unknown[] }>);

    const lines = json.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    const exact = ['"amount":12345678901234567891', '"fk":-9223372036854775807', '"ratio":0.12345678901234567890', '"list":[9007199254740993,1]', '"text":"12345678901234567891"', '"small":42', '"half":0.5'];
    for (const digits of exact) expect(lines[0]).toContain(digits);
    expect(lines[0]).toContain(`"huge":1${'0'.repeat(400)}`);
    // One change a line, as the feed answered it (the same fields in the same order); a record
    // without such numbers prints exactly as JSON.stringify writes the feed's item.
    lines.forEach((line, i) => {
      expect(JSON.parse(line)).toEqual(feed.items[i]);
      expect(Object.keys(JSON.parse(line) as object)).toEqual(Object.keys(feed.items[i] as object));
    });
    expect(lines[1]).toBe(JSON.stringify(feed.items[1]));

    const rows = human.stdout.trim().split('\n');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/^insert {2}items\/a {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d {2}\{.*"id":"a".*\}$/);
    for (const digits of exact) expect(rows[0]).toContain(digits);
    expect(rows[1]).toMatch(new RegExp(`^insert  items/b  \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d  ${JSON.stringify((feed.items[1] as { data: unknown }).data).replace(/[{}[\]]/g, '\\$&')}$`));
  });
});
