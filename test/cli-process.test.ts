// The `synctide` process at its edges, run as its own process (`node --import tsx cli/main.ts`,
// as bin/synctide.js runs it) against the real API app on Postgres over HTTP (no Temporal: no
// request here reaches it), or a server that never answers: a key no request can carry, Ctrl-C
// while a request is in flight, help for a group that does not exist, and a reader of its output
// that goes away.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HttpServer } from '../lib/http';
import { listenWithoutTemporal, TEST_API_KEY } from './helpers/api';
import { useTestDatabase } from './helpers/database';
import { serve } from './helpers/fake-server';
import { eventually } from './helpers/worker';

const ROOT = join(import.meta.dirname, '..');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

describe('the synctide process', () => {
  const db = useTestDatabase();
  let api: HttpServer;
  let home: string;

  beforeAll(async () => {
    ({ server: api } = await listenWithoutTemporal(db.pool, 'cli-process'));
    // HOME (and so ~/.config/synctide) is an empty folder: no stray config file is read.
    home = await mkdtemp(join(tmpdir(), 'synctide-cli-process-'));
  });
  afterAll(async () => {
    await api?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  /** Starts the CLI with `args`; the env names the test API and admin key unless `env` says otherwise. */
  function start(args: string[], env: Record<string, string | undefined> = {}, stdin: 'ignore' | 'pipe' = 'ignore'): { child: ChildProcess; done: Promise<Run> } {
    const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: home, SYNCTIDE_URL: api.url, SYNCTIDE_API_KEY: TEST_API_KEY };
    for (const [name, value] of Object.entries(env)) {
      if (value === undefined) delete childEnv[name];
      else childEnv[name] = value;
    }
    const child = spawn(process.execPath, ['--import', 'tsx', 'cli/main.ts', ...args], { cwd: ROOT, env: childEnv, stdio: [stdin, 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const done = new Promise<Run>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    return { child, done };
  }

  const cli = (args: string[], env: Record<string, string | undefined> = {}) => start(args, env).done;

  it('refuses a key no request header can carry with exit 2, naming where it came from and never printing it', async () => {
    const file = join(home, 'two-line-key.json');
    // Each key's parts, which no output may hold: a key of two lines, one with a character past
    // U+00FF, one with a control character.
    const parts = [['first-half-of-the-key', 'second-half-of-the-key'], ['snowman-', '-in-the-key'], ['a-control-', '-character']];
    const keys = [parts[0]!.join('\n'), parts[1]!.join('\u2603'), parts[2]!.join('\u0001')];
    await writeFile(file, JSON.stringify({ url: api.url, api_key: keys[0] }));
    const runs = await Promise.all([
      cli(['connections', 'list'], { SYNCTIDE_API_KEY: keys[0] }),
      cli(['connections', 'list', '--json'], { SYNCTIDE_API_KEY: keys[1] }),
      cli(['jobs', 'list'], { SYNCTIDE_API_KEY: keys[2] }),
      cli(['connections', 'list', '--config', file], { SYNCTIDE_API_KEY: undefined, SYNCTIDE_URL: undefined }),
    ]);
    for (const [i, run] of runs.entries()) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr, run.stderr).toMatch(i === 3 ? new RegExp(`the API key from ${file} `) : /the API key from SYNCTIDE_API_KEY /);
      for (const part of parts.flat()) expect(run.stdout + run.stderr).not.toContain(part);
    }
    expect(JSON.parse(runs[1]!.stderr).error).toMatchObject({ code: 'usage', exit_code: 2 });
  });

  it('stops a command at the first Ctrl-C while its request goes unanswered: exit 130', async () => {
    // An API that takes the request and never answers it.
    const silent = await serve(() => undefined);
    const { child, done } = start(['connections', 'list'], { SYNCTIDE_URL: silent.url });
    try {
      await eventually(async () => (silent.requests.length > 0 ? true : undefined));
      child.kill('SIGINT');
      const run = await done;
      expect(run.code, run.stderr).toBe(130);
      expect(run.stderr).toMatch(/^synctide: interrupted/);
      expect(run.stdout).toBe('');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await silent.close();
    }
  });

  it('stops at the first Ctrl-C while it waits for --credentials on stdin: exit 130, nothing sent', async () => {
    const { child, done } = start(['connections', 'create', '--tenant', 'acme', '--app-key', 'cli-stdin', '--provider', 'demo', '--credentials', '-'], {}, 'pipe');
    try {
      // 256 KiB of white space (JSON's leading space), more than a pipe holds: once it is all
      // written, the CLI has begun reading stdin (its Ctrl-C handler is set before), and stdin
      // stays open, the JSON unfinished.
      await new Promise<void>((resolve, reject) => child.stdin!.write(' '.repeat(256 * 1024), (err) => (err ? reject(err) : resolve())));
      child.kill('SIGINT');
      const run = await done;
      expect(run.code, run.stderr).toBe(130);
      expect(run.stderr).toMatch(/^synctide: interrupted/);
      const { rows } = await db.pool.query(`select 1 from connections where app_key = 'cli-stdin'`);
      expect(rows).toEqual([]);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 30_000);

  it('reads --credentials from stdin to its end: JSON cut short is refused with exit 2, never echoed', async () => {
    const { child, done } = start(['connections', 'create', '--tenant', 'acme', '--app-key', 'cli-stdin-cut', '--provider', 'demo', '--credentials', '-'], {}, 'pipe');
    child.stdin!.end('{"token": "secret-token-cut');
    const run = await done;
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toBe('synctide: --credentials (stdin) is not valid JSON\n');
    expect(run.stdout + run.stderr).not.toContain('secret-token-cut');
  });

  it('ends quietly with exit 0 when the reader of its output goes away (records tail | head -1)', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `insert into connections (tenant_id, provider_slug, app_key, status) values ('acme', 'demo', 'cli-epipe', 'paused') returning id`,
    );
    const id = rows[0]!.id;
    await db.pool.query(
      `insert into records (connection_id, resource_type, external_id, data, synced_at, change)
       select $1, 'items', 'item-' || n, jsonb_build_object('n', n, 'text', repeat('x', 200)), now(), 'insert' from generate_series(1, 3000) n`,
      [id],
    );
    const { child, done } = start(['records', 'tail', id, '--json', '--once']);
    // The reader takes the first chunk and goes, as `head -1` does: the CLI's next write finds the pipe closed.
    child.stdout!.once('data', () => child.stdout!.destroy());
    const run = await done;
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
  });

  it('says an answer that is not JSON is not the API (not that the API cannot be reached): exit 1', async () => {
    // A URL that reaches a web server, not the API: a 200 with an HTML page.
    const page = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>Welcome</title>');
    });
    try {
      const run = await cli(['connections', 'list'], { SYNCTIDE_URL: page.url });
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(`synctide: the answer of ${new URL(page.url).origin} is not JSON: is it the Synctide API's URL?\n`);
    } finally {
      await page.close();
    }
  });

  it('answers help for a group that does not exist with exit 2, as an unknown command, and help config with the help of config', async () => {
    const [unknown, known, config] = await Promise.all([cli(['help', 'frobnicate']), cli(['help', 'webhooks']), cli(['help', 'config'])]);
    expect(unknown.code).toBe(2);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toContain('unknown command "frobnicate" (synctide --help lists them)');
    expect(known.code).toBe(0);
    expect(known.stdout).toContain('webhooks create');
    // `config` is a command of its own: its help, as `config --help` gives it.
    expect(config.code).toBe(0);
    expect(config.stdout).toMatch(/^Usage: synctide config\n/);
    expect(config.stdout).not.toContain('Commands:');
  });
});
