// The `synctide` CLI run as a user runs it: a child process with a home of its own (no config file
// but what the test writes there), its URL and key from the environment.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { inject } from 'vitest';
import { TEST_API_KEY } from './api';

const ROOT = join(import.meta.dirname, '..', '..');

/**
 * The node arguments that run the CLI before its own: cli/main.ts bundled once by the global
 * setup (esbuild, as tsx compiles it), not compiled by tsx's loader in every process (about half a
 * second of CPU each). test/cli-process.test.ts runs it as bin/synctide.js does, through tsx.
 */
export const cliEntry = (): string[] => [inject('cliBundlePath')];

/** A CLI process: its output so far, its end (code and whole output), and ways to stop it. */
export interface CliRun {
  out: { stdout: string; stderr: string };
  ended: Promise<{ code: number | null; stdout: string; stderr: string }>;
  exited(): boolean;
  /** Ctrl-C. */
  interrupt(): void;
  /** SIGKILL unless it has ended, then waits for its end. */
  kill(): Promise<void>;
}

/**
 * Starts `synctide <args>` against the API at `url` with the test admin key, HOME at `home`, and
 * `extraEnv` besides (SYNCTIDE_RETRY_WAIT_MS: a test that waits out every read made again sets a
 * short least wait).
 */
export function startCli(home: string, url: string, args: string[], extraEnv: Record<string, string> = {}): CliRun {
  const env = { PATH: process.env.PATH ?? '', HOME: home, SYNCTIDE_URL: url, SYNCTIDE_API_KEY: TEST_API_KEY, ...extraEnv };
  const child = spawn(process.execPath, [...cliEntry(), ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (out.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out.stderr += chunk.toString()));
  const ended = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, ...out }));
  });
  return {
    out,
    ended,
    exited: () => child.exitCode !== null,
    interrupt: () => child.kill('SIGINT'),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await ended.catch(() => undefined);
    },
  };
}
