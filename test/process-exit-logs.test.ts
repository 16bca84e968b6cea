// A process's last log lines reach stdout before it exits: the shutdown logs one line per step and
// "shutdown complete", then calls process.exit, which must not drop a line still being written.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

it('writes every shutdown line before exiting, while the thread pool is busy', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/exit-logs.ts'], {
    cwd: ROOT,
    env: { ...process.env, UV_THREADPOOL_SIZE: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  const lines = output.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  expect({ code, lines: lines.map((l) => [l.msg, l.component ?? null]) }).toEqual({
    code: 0,
    lines: [['shutting down', null], ['stopped', 'busy-thread-pool'], ['shutdown complete', null]],
  });
}, 60_000);
